// The benchmark record: what ran where, each test's speed, and its ratio to the machine's limits.
// Written as a markdown table (llama-bench style) or as JSON.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "aft.h"
#include "tools/bench/machine.h"
#include "tools/bench/runner.h"

namespace aft::bench {

struct Stats {
  double mean = 0.0;
  double stddev = 0.0;  // sample standard deviation; 0 for one sample
};
Stats summarize(const std::vector<double>& samples);

enum class TestKind { Prefill, Decode };

struct TestResult {
  TestKind kind = TestKind::Prefill;
  int64_t n_prompt = 0;  // prefill: tokens in the prompt
  int64_t n_gen = 0;     // decode: tokens decoded one at a time
  int64_t depth = 0;     // decode: context tokens before them
  int64_t batch = 1;     // decode: sessions decoding together (tokens/s counts all)
  int threads = 1;
  std::vector<double> tokens_per_second;  // one per repetition
  std::string name() const;               // "pp512", "tg128", "tg128 @ d4096", "tg128 x16"
};

// One thread count's limits, measured before and after its tests: the best of the two is the
// limit; their difference shows how much the machine's load moved meanwhile.
struct MeasuredLimits {
  struct Sample {
    double read_gbps = 0.0;          // memory read bandwidth (large buffer), 1e9 bytes/s
    double read_weights_gbps = 0.0;  // read bandwidth over a buffer the size of the weights
    double fma_gflops = 0.0;         // FMA peak, 1e9 FLOP/s
    double fork_join_us = 0.0;       // an empty OpenMP parallel region, microseconds
    double bf16_units_gflops = 0.0;  // bf16 products on the matrix units; 0: none
    double int8_gops = 0.0;          // u8 x s8 products (AMX, VNNI, ...); 0: none
  };
  int threads = 1;
  Sample before, after;
  double read() const { return std::max(before.read_gbps, after.read_gbps); }
  double read_weights() const {
    return std::max(before.read_weights_gbps, after.read_weights_gbps);
  }
  double fma() const { return std::max(before.fma_gflops, after.fma_gflops); }
  double fork_join() const { return std::min(before.fork_join_us, after.fork_join_us); }
  double bf16_units() const { return std::max(before.bf16_units_gflops, after.bf16_units_gflops); }
  double int8() const { return std::max(before.int8_gops, after.int8_gops); }
};

struct Report {
  std::string build_type;
  std::string compiler;
  MachineInfo machine;
  std::string kernel_isa;
  std::string matmul;  // aft_matmul_implementation()
  // --matmul-precision: "bf16" puts prompts' products of f32 weights on the matrix units.
  std::string matmul_precision = "f32";
  // --no-mmap (aft_model_params.use_mmap = 0), which no longer changes anything.
  bool use_mmap = true;
  double load_seconds = 0.0;  // aft_model_load, checksums included
  std::vector<int> threads;
  int repetitions = 0;
  std::string model_path;
  aft_model_info model{};
  // The linear layers' weight dtype (the file's metadata "dtype"; f32 when absent) and the bytes of
  // those weights that decode reads per token.
  std::string weight_dtype = "f32";
  double matmul_weight_bytes = 0.0;
  Footprint footprint;
  std::size_t bandwidth_bytes = 0;      // the memory read probe's buffer; 0 with --no-limits
  std::size_t weights_probe_bytes = 0;  // the weight-sized read probe's buffer
  std::vector<MeasuredLimits> limits;   // empty with --no-limits
  // oneDNN's implementations the bf16 and int8 peaks were measured with ("": none, or not measured)
  std::string bf16_units;
  std::string int8_product;
  std::vector<TestResult> results;
  std::vector<std::string> skipped;  // tests the model cannot run, with the reason
};

void write_markdown(const Report& report, std::FILE* out);
void write_json(const Report& report, std::FILE* out);

}  // namespace aft::bench
