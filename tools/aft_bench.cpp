// aft-bench: prefill and decode speed of a model, next to the machine's limits measured in the
// same run (llama-bench's conventions; see docs/benchmarks.md). The report goes to stdout; a
// progress line to stderr when it is a terminal. Exit codes: 0 success, 1 an error, 2 bad usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "aft.h"
#include "engine/runtime/physical_cores.h"
#include "kernels/matrix_unit_probe.h"
#include "tools/bench/machine.h"
#include "tools/bench/options.h"
#include "tools/bench/probes.h"
#include "tools/bench/report.h"
#include "tools/bench/runner.h"
#include "tools/cli/progress.h"

namespace aft::bench {
namespace {

constexpr int kProbeRuns = 5;  // best of: the limit is what the machine can do, not its average

std::string compiler() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown compiler";
#endif
}

// Deterministic tokens: the same run of the same model sees the same text.
std::vector<int32_t> bench_tokens(std::size_t count, int32_t vocab_size) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, vocab_size - 1);
  std::vector<int32_t> tokens(count);
  for (int32_t& t : tokens) t = pick(rng);
  return tokens;
}

// The tests of one thread count, in order: prefills, then decodes by length and depth.
std::vector<TestResult> planned_tests(const Options& o, int threads) {
  std::vector<TestResult> tests;
  for (int64_t p : o.n_prompt) {
    if (p > 0) tests.push_back({TestKind::Prefill, p, 0, 0, 1, threads, {}});
  }
  for (int64_t n : o.n_gen) {
    for (int64_t d : o.depth) {
      for (int64_t b : o.batch) {
        if (n > 0) tests.push_back({TestKind::Decode, 0, n, d, b, threads, {}});
      }
    }
  }
  return tests;
}

struct Probes {
  ReadProbe memory;   // a buffer much larger than the caches
  ReadProbe weights;  // a buffer the size of the model's matmul weights
  FmaProbe fma;
  kernels::MatrixUnitProbe bf16_units;  // nothing where the CPU has no matrix units
  kernels::MatrixUnitProbe int8;
};

// threads 0 (automatic): the limits of every physical core.
MeasuredLimits::Sample measure_limits(const Probes& probes, int requested) {
  const int threads = requested > 0 ? requested : physical_cores();
  return {probes.memory.best_gbps(threads, kProbeRuns),
          probes.weights.best_gbps(threads, kProbeRuns),
          probes.fma.best_gflops(threads, kProbeRuns),
          ForkJoinProbe::best_microseconds(threads, kProbeRuns),
          probes.bf16_units.best_gops(threads, kProbeRuns),
          probes.int8.best_gops(threads, kProbeRuns)};
}

int run(const Options& o) {
  cli::Progress progress("aft-bench");
  progress.show("loading " + o.model);
  const aft_model_params params = o.load.params();
  const auto load_start = std::chrono::steady_clock::now();
  const BenchModel model(o.model, params);
  const std::chrono::duration<double> load_time = std::chrono::steady_clock::now() - load_start;
  const aft_model_info& info = model.info();

  Report report;
  report.build_type = AFT_BUILD_TYPE;
  report.compiler = compiler();
  report.machine = machine_info();
  report.kernel_isa = aft_kernel_isa();
  report.matmul = aft_matmul_implementation();
  report.matmul_precision = o.load.matmul_precision == AFT_MATMUL_PRECISION_BF16 ? "bf16" : "f32";
  report.use_mmap = o.load.use_mmap;
  report.load_seconds = load_time.count();
  report.threads = o.threads;
  report.repetitions = o.repetitions;
  report.model_path = o.model;
  report.model = info;
  report.weight_dtype = model.weight_dtype();
  // q8_0: 32 one-byte quants and a 4-byte scale per block (docs/format.md).
  const double bytes_per_weight = report.weight_dtype == "bf16"   ? 2.0
                                  : report.weight_dtype == "q8_0" ? 36.0 / 32.0
                                                                  : 4.0;
  report.matmul_weight_bytes = bytes_per_weight * static_cast<double>(info.n_matmul_parameters);
  progress.show("measuring the model's memory");
  report.footprint = model.footprint(0);

  std::optional<Probes> probes;
  if (o.limits) {
    progress.show("preparing the machine probes");
    const auto weight_bytes = static_cast<std::size_t>(report.matmul_weight_bytes);
    int most_threads = 1;
    for (int t : o.threads) most_threads = std::max(most_threads, t > 0 ? t : physical_cores());
    try {
      probes.emplace(Probes{ReadProbe(o.bandwidth_mib << 20), ReadProbe(weight_bytes), FmaProbe(),
                            kernels::MatrixUnitProbe(kernels::UnitProduct::Bf16, most_threads),
                            kernels::MatrixUnitProbe(kernels::UnitProduct::Int8, most_threads)});
    } catch (const std::bad_alloc&) {
      throw std::runtime_error("the machine probes' buffers (--bandwidth-mib " +
                               std::to_string(o.bandwidth_mib) + ", and " +
                               std::to_string(weight_bytes >> 20) +
                               " MiB at the weights' size) do not fit in memory: give a smaller "
                               "--bandwidth-mib, or --no-limits");
    }
    report.bandwidth_bytes = probes->memory.bytes();
    report.weights_probe_bytes = probes->weights.bytes();
    report.bf16_units = probes->bf16_units.implementation();
    report.int8_product = probes->int8.implementation();
  }

  // The tokens of the longest test the model can run (the others are skipped below).
  const auto runs = [&](int64_t positions) {
    return info.max_positions <= 0 || positions <= info.max_positions;
  };
  int64_t longest = 0;
  for (int64_t p : o.n_prompt) {
    if (runs(p)) longest = std::max(longest, p);
  }
  for (int64_t n : o.n_gen) {
    for (int64_t d : o.depth) {
      if (runs(n + d)) longest = std::max(longest, n + d);
    }
  }
  const std::vector<int32_t> tokens =
      bench_tokens(static_cast<std::size_t>(longest), info.vocab_size);

  for (int threads : o.threads) {
    const std::string where =
        ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
    MeasuredLimits limits;
    limits.threads = threads;
    if (o.limits) {
      progress.show("measuring the limits" + where);
      limits.before = measure_limits(*probes, threads);
    }
    for (TestResult& test : planned_tests(o, threads)) {
      const int64_t positions =
          test.kind == TestKind::Prefill ? test.n_prompt : test.depth + test.n_gen;
      if (info.max_positions > 0 && positions > info.max_positions) {
        report.skipped.push_back(test.name() + where + ": needs " + std::to_string(positions) +
                                 " positions, the model stops at " +
                                 std::to_string(info.max_positions));
        continue;
      }
      for (int rep = 0; rep <= o.repetitions; ++rep) {  // rep 0: the warm-up
        progress.show(test.name() + where +
                      (rep == 0
                           ? ": warm-up"
                           : ": run " + std::to_string(rep) + "/" + std::to_string(o.repetitions)));
        double seconds = 0.0;
        if (test.kind == TestKind::Prefill) {
          seconds = model.time_prefill(tokens, static_cast<std::size_t>(test.n_prompt), threads);
        } else {
          seconds = model.time_decode(tokens, static_cast<std::size_t>(test.depth),
                                      static_cast<std::size_t>(test.n_gen),
                                      static_cast<std::size_t>(test.batch), threads);
        }
        const double count = static_cast<double>(
            test.kind == TestKind::Prefill ? test.n_prompt : test.n_gen * test.batch);
        if (rep > 0) test.tokens_per_second.push_back(count / seconds);
      }
      report.results.push_back(test);
    }
    if (o.limits) {
      progress.show("measuring the limits again" + where);
      limits.after = measure_limits(*probes, threads);
      report.limits.push_back(limits);
    }
  }
  progress.clear();

  if (o.format == Format::Json) {
    write_json(report, stdout);
  } else {
    write_markdown(report, stdout);
  }
  for (const std::string& s : report.skipped) {
    std::fprintf(stderr, "aft-bench: skipped %s\n", s.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace aft::bench

int main(int argc, char** argv) {
  using namespace aft::bench;
  return aft::cli::tool_main(
      "aft-bench", kUsage, [&] { return parse_args(argc, argv); }, run);
}
