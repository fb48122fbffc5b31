#include "tools/cli/model_flags.h"

#include <string>

namespace aft::cli {

bool ModelFlags::parse(Arguments& args) {
  const std::string& arg = args.arg();
  if (arg == "--no-checksum") {
    verify_checksums = false;
  } else if (arg == "--matmul-precision") {
    matmul_precision = parse_matmul_precision(arg, args.value());
  } else if (arg == "--no-mmap") {
    use_mmap = false;
  } else {
    return false;
  }
  return true;
}

aft_model_params ModelFlags::params() const {
  aft_model_params params = aft_model_default_params();
  params.verify_checksums = verify_checksums ? 1 : 0;
  params.matmul_precision = matmul_precision;
  params.use_mmap = use_mmap ? 1 : 0;
  return params;
}

}  // namespace aft::cli
