// aft-gemv-bench: the speed of the GEMV micro-kernels (kernels/group_gemv.hpp,
// kernels/bf16_gemv.hpp, kernels/q8_0.hpp) on one thread, per ISA this CPU runs, by weight type
// (bf16x: bf16 weights by activations rounded to bf16, the matrix units' arithmetic): one vector
// (decode) and batches of vectors (sequences decoding together), over weights that stay in cache
// (what the micro-kernel itself does, in GFLOP/s: 2 per weight and vector) and over weights read
// from memory (GB/s of weights). docs/benchmarks.md, "Batch decode". Usage: aft-gemv-bench [rows
// cols [isa]] [--type T] [--where W] [--passes N] (default 512 512, every ISA, type and place;
// --help)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/packed_weights.h"
#include "tools/cli/arguments.h"

namespace {

using aft::kernels::KernelTable;

// Seconds per call, the best of `passes` timed passes of enough calls to last pass_seconds. On a
// shared host many short passes find its quiet moments: 100 passes of 2 ms read the same q8_0
// kernel within 2-3% run to run where 5 of 20 ms moved by up to 1.4x (an Emerald Rapids guest).
template <class F>
double seconds_per_call(F call, int passes, double pass_seconds) {
  call();
  std::size_t calls = 1;
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < calls; ++i) call();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (took.count() > pass_seconds) break;
    calls *= 2;
  }
  double best = 1e30;
  for (int pass = 0; pass < passes; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < calls; ++i) call();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / static_cast<double>(calls));
  }
  return best;
}

// One weight matrix in every type the GEMVs read, and n_vectors inputs.
struct Problem {
  std::size_t rows, cols, copies;  // copies: enough matrices that one pass leaves the caches
  aft::kernels::PackedWeights packed;
  std::vector<aft::kernels::WeightMatrix> f32_packed, bf16, q8;
  std::vector<float> x, y;
  std::vector<int8_t> xq;
  std::vector<float> xd;
  std::vector<uint16_t> xb;

  Problem(const KernelTable& k, std::size_t rows_, std::size_t cols_, std::size_t copies_,
          std::size_t n_vectors)
      : rows(rows_),
        cols(cols_),
        copies(copies_),
        packed(copies * (aft::kernels::PackedWeights::f32_bytes(rows, cols) +
                         aft::kernels::PackedWeights::bf16_bytes(rows, cols) +
                         aft::kernels::PackedWeights::q8_0_bytes(rows, cols))) {
    std::vector<float> f32(rows * cols);
    std::vector<uint16_t> halves(rows * cols);
    std::vector<int8_t> quants(rows * cols);
    std::vector<float> scales(rows * cols / aft::kernels::kQ8BlockSize);
    for (std::size_t m = 0; m < copies; ++m) {
      for (std::size_t i = 0; i < rows * cols; ++i) {
        const std::size_t at = m * rows * cols + i;
        f32[i] =
            static_cast<float>(static_cast<int>(at * 2654435761u >> 20) % 2001 - 1000) / 1000.0f;
        uint32_t bits;
        std::memcpy(&bits, &f32[i], sizeof bits);
        halves[i] = static_cast<uint16_t>(bits >> 16);
      }
      f32_packed.push_back(packed.add_f32(rows, cols, f32.data()));
      bf16.push_back(packed.add_bf16(rows, cols, halves.data()));
      k.quantize_q8_0(rows * cols, f32.data(), quants.data(), scales.data());
      q8.push_back(packed.add_q8_0(rows, cols, quants.data(), scales.data()));
    }
    x.resize(n_vectors * cols);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) / 97.0f - 0.5f;
    y.resize(n_vectors * rows);
    xq.resize(x.size());
    xd.resize(x.size() / aft::kernels::kQ8BlockSize);
    k.quantize_q8_0(x.size(), x.data(), xq.data(), xd.data());
    xb.resize(n_vectors * aft::kernels::bf16_packed_cols(cols));
    for (std::size_t v = 0; v < n_vectors; ++v) {
      k.round_bf16(cols, &x[v * cols], &xb[v * aft::kernels::bf16_packed_cols(cols)]);
    }
  }
};

// One pass over every copy for n vectors, by weight type.
void run(const KernelTable& k, Problem& p, const char* type, std::size_t n) {
  const std::size_t rows = p.rows, cols = p.cols;
  for (std::size_t m = 0; m < p.copies; ++m) {
    if (type[0] == 'f') {
      const float* w = p.f32_packed[m].f32_rows(0, cols);
      if (n == 1) {
        k.gemv_f32(rows, cols, w, p.x.data(), nullptr, p.y.data());
      } else {
        k.gemv_batch_f32(rows, cols, w, n, p.x.data(), cols, nullptr, p.y.data(), rows);
      }
    } else if (std::strcmp(type, "bf16x") == 0) {
      const auto* w = static_cast<const uint16_t*>(p.bf16[m].data);
      if (n == 1) {
        k.gemv_bf16_bf16(rows, cols, w, p.xb.data(), nullptr, p.y.data());
      } else {
        k.gemv_batch_bf16_bf16(rows, cols, w, n, p.xb.data(), aft::kernels::bf16_packed_cols(cols),
                               nullptr, p.y.data(), rows);
      }
    } else if (type[0] == 'b') {
      const auto* w = static_cast<const uint16_t*>(p.bf16[m].data);
      if (n == 1) {
        k.gemv_bf16(rows, cols, w, p.x.data(), nullptr, p.y.data());
      } else {
        k.gemv_batch_bf16(rows, cols, w, n, p.x.data(), cols, nullptr, p.y.data(), rows);
      }
    } else {
      const auto& w = p.q8[m];
      const auto* wq = static_cast<const int8_t*>(w.data);
      if (n == 1) {
        k.gemv_q8_0(rows, cols, wq, w.scales, p.xq.data(), p.xd.data(), nullptr, p.y.data());
      } else {
        k.gemv_batch_q8_0(rows, cols, wq, w.scales, n, p.xq.data(), p.xd.data(), nullptr,
                          p.y.data(), rows);
      }
    }
  }
}

constexpr const char* kIsas[] = {"avx512amx", "avx512bf16", "avx512vnni", "avx512", "avx2",
                                 "sse2",      "neondot",    "neon",       "scalar"};

constexpr const char* kTypes[] = {"f32", "bf16", "bf16x", "q8_0"};
constexpr const char* kWheres[] = {"cache", "memory"};

constexpr const char* kUsage =
    "usage: aft-gemv-bench [ROWS COLS [ISA]] [options]\n"
    "\n"
    "The GEMV micro-kernels on one thread: ROWS x COLS weights (default 512 512; COLS a\n"
    "multiple of 32) by 1 to 16 vectors, in cache and from memory, for each ISA this CPU runs\n"
    "(or only ISA: avx512amx, avx512bf16, avx512vnni, avx512, avx2, sse2, neondot, neon,\n"
    "scalar).\n"
    "\n"
    "options:\n"
    "      --type T      only weights of type T: f32, bf16, bf16x (bf16 weights by bf16\n"
    "                    activations), q8_0\n"
    "      --where W     only weights in W: cache or memory\n"
    "      --passes N    time each figure as the best of N passes (default 5 of ~20 ms each;\n"
    "                    more than 5 take passes of ~2 ms: on a shared host, try 100)\n";

struct Options {
  std::size_t rows = 512;
  std::size_t cols = 512;
  std::string only;   // one ISA, or every one
  std::string type;   // one weight type, or every one
  std::string where;  // cache or memory, or both
  int passes = 5;
};

// value, checked to be one of names (the flag's message lists them).
template <std::size_t N>
std::string one_of(const std::string& flag, const std::string& value,
                   const char* const (&names)[N]) {
  std::string listed;
  for (const char* name : names) {
    if (value == name) return value;
    listed += listed.empty() ? name : std::string(", ") + name;
  }
  throw aft::cli::UsageError(flag + ": expected one of " + listed + ", found \"" + value + "\"");
}

std::optional<Options> parse_args(int argc, char** argv) {
  Options options;
  std::vector<std::string> positional;
  aft::cli::Arguments args(argc, argv);
  while (args.next()) {
    if (args.help()) return std::nullopt;
    if (args.arg() == "--type") {
      options.type = one_of("--type", args.value(), kTypes);
    } else if (args.arg() == "--where") {
      options.where = one_of("--where", args.value(), kWheres);
    } else if (args.arg() == "--passes") {
      options.passes =
          static_cast<int>(aft::cli::parse_integer("--passes", args.value(), 1, 10000));
    } else {
      positional.push_back(args.positional());
    }
  }
  if (positional.size() == 1 || positional.size() > 3) {
    throw aft::cli::UsageError("expected ROWS COLS [ISA], found " +
                               std::to_string(positional.size()) +
                               (positional.size() == 1 ? " argument" : " arguments"));
  }
  if (positional.size() >= 2) {
    options.rows =
        static_cast<std::size_t>(aft::cli::parse_integer("ROWS", positional[0], 1, 1 << 16));
    options.cols =
        static_cast<std::size_t>(aft::cli::parse_integer("COLS", positional[1], 32, 1 << 16));
    if (options.cols % aft::kernels::kQ8BlockSize != 0) {
      throw aft::cli::UsageError("COLS: expected a multiple of 32, found " + positional[1]);
    }
  }
  if (positional.size() == 3) {
    options.only = positional[2];
    if (std::find_if(std::begin(kIsas), std::end(kIsas),
                     [&](const char* isa) { return options.only == isa; }) == std::end(kIsas)) {
      throw aft::cli::UsageError("ISA: expected one of the names below, found \"" + options.only +
                                 "\"");
    }
    if (!aft::kernels::kernels_for_isa(options.only.c_str())) {
      throw aft::cli::UsageError("ISA: " + options.only +
                                 " is not built for this target or this CPU cannot run it");
    }
  }
  return options;
}

int run_benchmarks(const Options& options) {
  constexpr std::size_t kQ8Block = aft::kernels::kQ8BlockSize;
  const std::size_t rows = options.rows;
  const std::size_t cols = options.cols;
  const std::size_t kVectors[] = {1, 2, 4, 8, 16};
  const std::size_t max_vectors = 16;
  // Out of cache: copies whose q8_0 weights alone (the smallest type, groups of rows padded: a
  // matrix of a few rows takes a whole group's bytes) add up to 256 MiB, 8x a 32 MiB L3; sized by
  // the three types together, q8_0's share fit a 32 MiB L3 nearly whole and read at 1.4x the
  // memory's bandwidth.
  const std::size_t copies =
      std::max<std::size_t>(1, (256u << 20) / aft::kernels::PackedWeights::q8_0_bytes(rows, cols));
  std::printf(
      "%zu x %zu weights, 1 thread. In cache: GFLOP/s (2 per weight and vector); "
      "from memory (%zu matrices): GB/s of weights read\n\n",
      rows, cols, copies);
  std::printf("| isa | type | where |");
  for (std::size_t n : kVectors) std::printf(" x%zu |", n);
  std::printf("\n|---|---|---|");
  for (std::size_t i = 0; i < sizeof kVectors / sizeof kVectors[0]; ++i) std::printf("---:|");
  std::printf("\n");
  for (const char* isa : kIsas) {
    const KernelTable* k = aft::kernels::kernels_for_isa(isa);
    if (!k || (!options.only.empty() && options.only != isa)) continue;
    // The weights from memory take 256 MiB of each type: made only where asked for.
    std::optional<Problem> cached, streamed;
    if (options.where != "memory") cached.emplace(*k, rows, cols, 1, max_vectors);
    if (options.where != "cache") streamed.emplace(*k, rows, cols, copies, max_vectors);
    for (const char* type : kTypes) {
      if (!options.type.empty() && options.type != type) continue;
      // q8_0: a quant and a float32 scale per block of 32, as packed (packed_weights.h).
      const double bytes_per_weight =
          type[0] == 'f'   ? 4.0
          : type[0] == 'b' ? 2.0
                           : (kQ8Block + sizeof(float)) / static_cast<double>(kQ8Block);
      for (Problem* p : {cached ? &*cached : nullptr, streamed ? &*streamed : nullptr}) {
        if (!p) continue;
        const bool in_cache = cached && p == &*cached;
        std::printf("| %s | %s | %s |", isa, type, in_cache ? "cache, GFLOP/s" : "memory, GB/s");
        for (std::size_t n : kVectors) {
          const double s = seconds_per_call([&] { run(*k, *p, type, n); }, options.passes,
                                            options.passes > 5 ? 0.002 : 0.02);
          const double weights = static_cast<double>(rows * cols * p->copies);
          std::printf(" %.1f |", in_cache ? 2.0 * weights * n / s * 1e-9
                                          : weights * bytes_per_weight / s * 1e-9);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return aft::cli::tool_main(
      "aft-gemv-bench", kUsage, [&] { return parse_args(argc, argv); }, run_benchmarks);
}
