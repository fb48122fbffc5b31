// Linked into the engine-level test binaries, which CTest also runs with a CPU path forced
// (tests/CMakeLists.txt): AFT_ISA for the kernels, ONEDNN_MAX_CPU_ISA for oneDNN's matrix
// products. When this CPU cannot run the forced path, every test is skipped and says why, instead
// of silently testing the fallback path a second time.
#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>
#include <dnnl.hpp>

#include "kernels/kernels.h"

namespace {

struct OneDnnIsa {
  const char* name;  // as ONEDNN_MAX_CPU_ISA takes it
  dnnl::cpu_isa isa;
};

constexpr OneDnnIsa kOneDnnIsas[] = {{"SSE41", dnnl::cpu_isa::sse41},
                                     {"AVX2", dnnl::cpu_isa::avx2},
                                     {"AVX512_CORE", dnnl::cpu_isa::avx512_core}};

class ForcedPaths : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* kernels = std::getenv("AFT_ISA");
    const char* active = aft::kernels::active_kernels().isa;
    if (kernels && *kernels && std::strcmp(kernels, active) != 0) {
      GTEST_SKIP() << "AFT_ISA=" << kernels << ": this CPU cannot run that kernel path (the best "
                   << "it has is " << active << "); skipped";
    }
    const char* onednn = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (!onednn || !*onednn) {
      if (kernels && *kernels) std::printf("forced paths: kernels %s\n", active);
      return;
    }
    for (const OneDnnIsa& known : kOneDnnIsas) {
      if (std::strcmp(onednn, known.name) != 0) continue;
      if (dnnl::get_effective_cpu_isa() != known.isa) {
        GTEST_SKIP() << "ONEDNN_MAX_CPU_ISA=" << onednn
                     << ": this CPU lacks that instruction set; skipped";
      }
      std::printf("forced paths: kernels %s, oneDNN %s\n", active, onednn);
      return;
    }
    FAIL() << "ONEDNN_MAX_CPU_ISA=" << onednn << " is not one the tests know";
  }
};

const ::testing::Environment* const kForcedPaths =
    ::testing::AddGlobalTestEnvironment(new ForcedPaths);  // gtest owns it

}  // namespace
