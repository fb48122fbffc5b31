// How aft-run, aft-server and aft-bench load their model: the flags they share, parsed in one
// place and handed to aft_model_load.
#pragma once

#include "aft.h"
#include "tools/cli/arguments.h"

namespace aft::cli {

struct ModelFlags {
  bool verify_checksums = true;                                      // --no-checksum: skip them
  aft_matmul_precision matmul_precision = AFT_MATMUL_PRECISION_F32;  // --matmul-precision P
  bool use_mmap = true;  // --no-mmap: aft_model_params.use_mmap = 0, which no longer differs

  // Takes the current argument (and its value) if it is one of these flags; false if not.
  bool parse(Arguments& args);
  // aft_model_default_params() with these flags applied.
  aft_model_params params() const;
};

}  // namespace aft::cli
