// Runtime choice of the kernel table: the one place that knows which ISAs exist and which the CPU
// runs. AFT_KERNELS_X86 / AFT_KERNELS_NEON come from CMakeLists.txt, which builds the matching
// isa_*.cpp files.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/isa_tables.h"
#include "kernels/kernels.h"

namespace aft::kernels {
namespace {

struct Isa {
  const char* name;
  const KernelTable& (*table)();
  bool (*supported)();
};

#if defined(AFT_KERNELS_X86)
// GCC's cpuid check also asks the OS (XGETBV) whether it saves the AVX / AVX-512 registers, which
// xsimd 8.1's available_architectures() does not.
// __builtin_cpu_init() makes the checks valid even from another file's static initializer.
bool has_avx512() {
  __builtin_cpu_init();
  // xsimd's avx512f kernels use some AVX512DQ instructions (e.g. in hadd); the q8_0 kernels use
  // AVX512BW's byte instructions.
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
}
bool has_avx512vnni() { return has_avx512() && __builtin_cpu_supports("avx512vnni"); }
bool has_avx512bf16() { return has_avx512vnni() && __builtin_cpu_supports("avx512bf16"); }
bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif
bool always() { return true; }

// Best first.
constexpr Isa kIsas[] = {
#if defined(AFT_KERNELS_X86)
    {"avx512bf16", avx512bf16_kernels, has_avx512bf16},
    {"avx512vnni", avx512vnni_kernels, has_avx512vnni},
    {"avx512", avx512_kernels, has_avx512},
    {"avx2", avx2_kernels, has_avx2},
    {"sse2", sse2_kernels, always},  // the x86-64 baseline
#endif
#if defined(AFT_KERNELS_NEON)
    {"neon", neon_kernels, always},  // the aarch64 baseline
#endif
    {"scalar", scalar_kernels, always},
};

constexpr const char* kKnownNames[] = {"avx512bf16", "avx512vnni", "avx512", "avx2",
                                       "sse2",       "neon",       "scalar"};

bool is_known_name(const char* name) {
  for (const char* known : kKnownNames) {
    if (std::strcmp(name, known) == 0) return true;
  }
  return false;
}

const KernelTable& best_kernels() {
  for (const Isa& isa : kIsas) {
    if (isa.supported()) return isa.table();
  }
  return scalar_kernels();
}

}  // namespace

const KernelTable* kernels_for_isa(const char* name) {
  if (name == nullptr) return nullptr;
  for (const Isa& isa : kIsas) {
    if (std::strcmp(name, isa.name) == 0) return isa.supported() ? &isa.table() : nullptr;
  }
  return nullptr;
}

KernelChoice choose_kernels(const char* requested) {
  const KernelTable& best = best_kernels();
  if (requested == nullptr || *requested == '\0') return {&best, ""};
  if (const KernelTable* forced = kernels_for_isa(requested)) return {forced, ""};
  const std::string asked = "AFT_ISA=" + std::string(requested);
  if (is_known_name(requested)) {
    return {&best, asked + " is not available on this CPU or build; using " + best.isa};
  }
  return {&best,
          asked + " is unknown (expected scalar, sse2, avx2, avx512, avx512vnni or neon); using " +
              best.isa};
}

const KernelChoice& active_kernel_choice() {
  static const KernelChoice choice = choose_kernels(std::getenv("AFT_ISA"));
  return choice;
}

}  // namespace aft::kernels
