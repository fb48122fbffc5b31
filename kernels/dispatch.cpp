// Runtime choice of the kernel table: the one place that knows which ISAs exist and which the CPU
// runs. AFT_KERNELS_X86 / AFT_KERNELS_NEON come from CMakeLists.txt, which builds the matching
// isa_*.cpp files.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(AFT_KERNELS_X86)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif
#if defined(AFT_KERNELS_NEON) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

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
// The avx512amx table without its tiles: the avx512bf16 table's instructions and AVX512CD.
bool runs_amx_table_float_work() { return has_avx512bf16() && __builtin_cpu_supports("avx512cd"); }
// AMX's tiles, bf16 and int8 products (CPUID leaf 7: EDX bits 24, 22, 25), the OS saving the
// tile state (XCR0 bits 17, 18), and on Linux the process's permission to use it, asked for once
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA): without it the first tile instruction
// is a SIGILL.
bool request_amx() {
  if (!runs_amx_table_float_work()) return false;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24, kAmxInt8 = 1u << 25;
  if ((edx & (kAmxBf16 | kAmxTile | kAmxInt8)) != (kAmxBf16 | kAmxTile | kAmxInt8)) return false;
  unsigned xcr0_low = 0, xcr0_high = 0;
  asm volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
bool has_amx() {
  static const bool granted = request_amx();
  return granted;
}
bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif
#if defined(AFT_KERNELS_NEON)
// armv8.2's dot product extension, as the kernel reports it (elsewhere than Linux: not used).
bool has_neon_dotprod() {
#if defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return false;
#endif
}
#endif
bool always() { return true; }

// Best first.
constexpr Isa kIsas[] = {
#if defined(AFT_KERNELS_X86)
    // Batches of bf16 sequences twice as fast on the tiles, the rest level (isa_avx512amx.cpp);
    // where the OS does not grant the tiles, avx512bf16.
    {"avx512amx", avx512amx_kernels, has_amx},
    {"avx512bf16", avx512bf16_kernels, has_avx512bf16},
    {"avx512vnni", avx512vnni_kernels, has_avx512vnni},
    {"avx512", avx512_kernels, has_avx512},
    {"avx2", avx2_kernels, has_avx2},
    {"sse2", sse2_kernels, always},  // the x86-64 baseline
#endif
#if defined(AFT_KERNELS_NEON)
    {"neondot", neondot_kernels, has_neon_dotprod},
    {"neon", neon_kernels, always},  // the aarch64 baseline
#endif
    {"scalar", scalar_kernels, always},
};

constexpr const char* kKnownNames[] = {"avx512amx", "avx512bf16", "avx512vnni", "avx512", "avx2",
                                       "sse2",      "neondot",    "neon",       "scalar"};

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
  return {
      &best,
      asked +
          " is unknown (expected scalar, sse2, avx2, avx512, avx512vnni, avx512bf16, avx512amx, "
          "neon or neondot); using " +
          best.isa};
}

GemvBatchQ8 emulated_tiles_gemv_batch_q8_0() {
#if defined(AFT_KERNELS_X86)
  if (runs_amx_table_float_work()) return gemv_batch_q8_0_emulated_tiles;
#endif
  return nullptr;
}

GemvBatchBf16Bf16 emulated_tiles_gemv_batch_bf16_bf16() {
#if defined(AFT_KERNELS_X86)
  if (runs_amx_table_float_work()) return gemv_batch_bf16_bf16_emulated_tiles;
#endif
  return nullptr;
}

GemvPromptQ8Bf16 emulated_tiles_gemv_prompt_q8_0_bf16() {
#if defined(AFT_KERNELS_X86)
  if (runs_amx_table_float_work()) return gemv_prompt_q8_0_bf16_emulated_tiles;
#endif
  return nullptr;
}

bool bf16_dot_outpaces_fma() {
#if defined(AFT_KERNELS_X86)
  return has_avx512bf16() && !__builtin_cpu_is("intel");
#else
  return false;
#endif
}

const KernelChoice& active_kernel_choice() {
  static const KernelChoice choice = choose_kernels(std::getenv("AFT_ISA"));
  return choice;
}

}  // namespace aft::kernels
