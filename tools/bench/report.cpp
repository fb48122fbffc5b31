#include "tools/bench/report.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace aft::bench {
namespace {

using Json = nlohmann::ordered_json;

// Decode reads each matmul weight once per token and does 2 FLOPs with each. A prompt evaluated
// for its last logits runs the head (vocab x d) once, not per token: with RWKV-4's vocabulary of
// 50,277 it is a third of the 169M shape's matmul weights.
double weight_bytes(const Report& r) { return r.matmul_weight_bytes; }
double flops_per_token(const Report& r) {
  return 2.0 * static_cast<double>(r.model.n_matmul_parameters);
}
// The mixer weighs pairs of positions (t' <= t) one by one where its bias is a free weight per
// pair: every earlier position for AFT-full, the window's for AFT-local and AFT-conv. Each pair
// takes two multiply-adds per channel (the numerator's and the denominator's): 4 FLOPs, as
// attention's score and weighted sum count per pair in a transformer's model FLOPs. AFT-simple
// and the decay mixer keep running sums (no pairs). A prompt starts at position 0.
double mixer_pairs(const Report& r, int64_t n_prompt) {
  const std::string mixer = r.model.mixer ? r.model.mixer : "";
  const auto tokens = static_cast<double>(n_prompt);
  if (mixer == "full") return tokens * (tokens + 1.0) / 2.0;
  if (mixer != "local" && mixer != "conv") return 0.0;
  const double window = std::min<double>(r.model.window, tokens);
  // Positions t < window see t + 1 pairs, the others window.
  return window * (window + 1.0) / 2.0 + (tokens - window) * window;
}
double prefill_flops(const Report& r, int64_t n_prompt) {
  const double head = static_cast<double>(r.model.vocab_size) * r.model.d_model;
  const double mixer = 4.0 * r.model.d_model * r.model.n_layers * mixer_pairs(r, n_prompt);
  return 2.0 * ((static_cast<double>(r.model.n_matmul_parameters) - head) * n_prompt + head) +
         mixer;
}

const MeasuredLimits* limits_for(const Report& r, int threads) {
  for (const MeasuredLimits& l : r.limits) {
    if (l.threads == threads) return &l;
  }
  return nullptr;
}

// The peak the products of a prompt (prefill) or of decoded tokens run against: the matrix units'
// where bf16 weights run there (prompts and decode; f32 weights at --matmul-precision bf16 in
// prompts only), the int8 products' for q8_0 weights (integer dot products), else the FMA peak.
// 0 where not measured.
struct ProductLimit {
  double value = 0.0;
  const char* name = "FMA peak";
  const char* key = "fma";
};

ProductLimit product_limit(const Report& r, const MeasuredLimits* l, bool prefill) {
  if (l == nullptr) return {};
  const bool on_units = !r.bf16_units.empty() &&
                        (r.weight_dtype == "bf16" ||
                         (prefill && r.weight_dtype == "f32" && r.matmul_precision == "bf16"));
  if (on_units && l->bf16_units() > 0.0) {
    return {l->bf16_units(), "bf16 matrix-unit peak", "bf16_units"};
  }
  if (r.weight_dtype == "q8_0" && l->int8() > 0.0) return {l->int8(), "int8 peak", "int8"};
  return {l->fma(), "FMA peak", "fma"};
}

// What a test achieved (GFLOP/s for prefill, GB/s of weights for decode) and its limits (0: not
// measured): product_limit for prefill; memory bandwidth and the read bandwidth at the weights'
// size for decode.
struct Achieved {
  double value = 0.0;
  const char* unit = "";
  double limit = 0.0;
  double weights_limit = 0.0;
  // Decode of a small model, and a batch's, is bound by compute once its weights stay in cache:
  // its FLOP rate against the FMA peak and against the peak of its products.
  double gflops = 0.0;
  double fma_limit = 0.0;
  ProductLimit product;  // the peak of the products (prefill: `limit` itself)
};

Achieved achieved(const Report& r, const TestResult& t) {
  const double tps = summarize(t.tokens_per_second).mean;
  const MeasuredLimits* l = limits_for(r, t.threads);
  if (t.kind == TestKind::Prefill) {
    const double prompts_per_second = tps / static_cast<double>(t.n_prompt);
    const ProductLimit limit = product_limit(r, l, true);
    const double gflops = prefill_flops(r, t.n_prompt) * prompts_per_second / 1e9;
    return {gflops, "GFLOP/s", limit.value, 0.0, gflops, l ? l->fma() : 0.0, limit};
  }
  // A batch's step reads the weights once for all its sessions' tokens.
  return {weight_bytes(r) * tps / static_cast<double>(t.batch) / 1e9,
          "GB/s",
          l ? l->read() : 0.0,
          l ? l->read_weights() : 0.0,
          flops_per_token(r) * tps / 1e9,
          l ? l->fma() : 0.0,
          product_limit(r, l, false)};
}

std::string percent(double value, double limit) {
  return std::to_string(static_cast<int>(std::lround(100.0 * value / limit))) + "%";
}

std::string ratio_text(const Achieved& a, bool prefill) {
  if (a.limit <= 0.0) return "-";
  if (prefill) return percent(a.value, a.limit) + " of " + a.product.name;
  return percent(a.value, a.limit) + " of memory read, " + percent(a.value, a.weights_limit) +
         " of read at weights' size, " + percent(a.gflops, a.product.value) + " of " +
         a.product.name;
}

// Tokens/s of t over the same test at 1 thread (or with a batch of 1); 0 when that was not run.
double speedup(const Report& r, const TestResult& t, bool over_batch) {
  for (const TestResult& one : r.results) {
    const bool threads = over_batch ? one.threads == t.threads : one.threads == 1;
    const bool batch = over_batch ? one.batch == 1 : one.batch == t.batch;
    if (threads && batch && one.kind == t.kind && one.n_prompt == t.n_prompt &&
        one.n_gen == t.n_gen && one.depth == t.depth) {
      return summarize(t.tokens_per_second).mean / summarize(one.tokens_per_second).mean;
    }
  }
  return 0.0;
}

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), pattern, value);
  return buffer;
}

// Three significant digits without an exponent: 0.00314, 6.67, 152.
std::string significant(double value) {
  const int digits = value > 0.0 ? 2 - static_cast<int>(std::floor(std::log10(value))) : 2;
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits > 0 ? digits : 0, value);
  return buffer;
}

std::string millions(int64_t count) { return format("%.2f M", static_cast<double>(count) / 1e6); }

// 0 is the automatic count.
std::string threads_text(int threads) { return threads > 0 ? std::to_string(threads) : "auto"; }

std::string thread_list(const std::vector<int>& threads) {
  std::string s;
  for (int t : threads) s += (s.empty() ? "" : ",") + threads_text(t);
  return s;
}

// A figure of the file's mapping, null where the mappings could not be read.
Json known(const MappedPages& pages, uint64_t MappedPages::*figure) {
  return pages.known ? Json(pages.*figure) : Json(nullptr);
}

std::string model_description(const aft_model_info& m) {
  std::string s = std::string(m.mixer) + " mixer";
  if (m.window > 0) s += " (window " + std::to_string(m.window) + ")";
  if (m.n_heads > 1) s += ", " + std::to_string(m.n_heads) + " heads";
  s += ", " + std::to_string(m.n_layers) + " layers x " + std::to_string(m.d_model) + ", d_ff " +
       std::to_string(m.d_ff) + ", vocab " + std::to_string(m.vocab_size);
  s += m.max_positions > 0 ? ", max " + std::to_string(m.max_positions) + " positions"
                           : ", no position limit";
  return s;
}

}  // namespace

Stats summarize(const std::vector<double>& samples) {
  Stats s;
  if (samples.empty()) return s;
  for (double x : samples) s.mean += x;
  s.mean /= static_cast<double>(samples.size());
  if (samples.size() < 2) return s;
  double squares = 0.0;
  for (double x : samples) squares += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(squares / static_cast<double>(samples.size() - 1));
  return s;
}

std::string TestResult::name() const {
  if (kind == TestKind::Prefill) return "pp" + std::to_string(n_prompt);
  std::string s = "tg" + std::to_string(n_gen);
  if (depth > 0) s += " @ d" + std::to_string(depth);
  if (batch > 1) s += " x" + std::to_string(batch);
  return s;
}

void write_markdown(const Report& r, std::FILE* out) {
  const MachineInfo& m = r.machine;
  std::fprintf(out, "## aft-bench\n\n");
  std::fprintf(out, "- build: %s, %s\n", r.build_type.c_str(), r.compiler.c_str());
  std::fprintf(out, "- CPU: %s; %d logical CPUs, %d physical cores", m.cpu.c_str(), m.logical_cpus,
               m.physical_cores);
  if (m.llc_bytes > 0) std::fprintf(out, "; last-level cache %zu MiB", m.llc_bytes >> 20);
  std::fprintf(out, "\n- kernels: %s; threads: %s; %d repetitions after one warm-up\n",
               r.kernel_isa.c_str(), thread_list(r.threads).c_str(), r.repetitions);
  std::fprintf(out, "- matmul: %s\n", r.matmul.c_str());
  if (r.matmul_precision == "bf16") {
    std::fprintf(out, "- matmul precision: bf16 (f32 weights' prompt products %s)\n",
                 *aft_matrix_units() != '\0' ? "on the matrix units"
                                             : "in f32: this CPU has no matrix units");
  }
  std::fprintf(out, "- model: %s: %s\n", r.model_path.c_str(), model_description(r.model).c_str());
  std::fprintf(out, "- loaded in %.2f s%s\n", r.load_seconds,
               r.use_mmap ? "" : " (--no-mmap: no longer changes anything)");
  std::fprintf(
      out, "- parameters: %s, %s in matmuls (%.1f MB of %s weights read per decoded token)\n",
      millions(r.model.n_parameters).c_str(), millions(r.model.n_matmul_parameters).c_str(),
      weight_bytes(r) / 1e6, r.weight_dtype.c_str());
  std::fprintf(out, "- memory: file %.1f MB; resident %.1f MB after loading and one token; ",
               static_cast<double>(r.footprint.file_bytes) / 1e6,
               static_cast<double>(r.footprint.resident_bytes) / 1e6);
  std::fprintf(out, "state per sequence %zu bytes\n", r.footprint.state_bytes);
  const MappedPages& mapped = r.footprint.mapped;
  if (mapped.resident_bytes > 0) {
    std::fprintf(out, "- the file's mapping: %.1f MB resident, %.0f%% of it on 2 MiB pages\n",
                 static_cast<double>(mapped.resident_bytes) / 1e6,
                 100.0 * static_cast<double>(mapped.huge_page_bytes) /
                     static_cast<double>(mapped.resident_bytes));
  }

  if (!r.limits.empty()) {
    std::fprintf(out,
                 "\nLimits, measured before and after each thread count's tests; the best of the "
                 "two is the limit. Memory read: a %zu MiB buffer; at weights' size: a %.1f MB "
                 "buffer read again and again (the decode limit when the weights stay cached).\n\n",
                 r.bandwidth_bytes >> 20, static_cast<double>(r.weights_probe_bytes) / 1e6);
    std::fprintf(out,
                 "Matrix products of oneDNN, M = 512, K = N = 1024, one per thread: bf16 on the "
                 "matrix units %s; int8 (u8 x s8) %s.\n\n",
                 r.bf16_units.empty() ? "none" : r.bf16_units.c_str(),
                 r.int8_product.empty() ? "none" : r.int8_product.c_str());
    std::fprintf(out,
                 "| threads | memory read GB/s (before, after) | read at weights' size GB/s | FMA "
                 "GFLOP/s | bf16 units GFLOP/s | int8 GOP/s | parallel region us |\n");
    std::fprintf(out, "|---:|---:|---:|---:|---:|---:|---:|\n");
    const auto peak = [](double best, double before, double after) {
      if (best <= 0.0) return std::string("-");
      char text[64];
      std::snprintf(text, sizeof text, "%.1f (%.1f, %.1f)", best, before, after);
      return std::string(text);
    };
    for (const MeasuredLimits& l : r.limits) {
      std::fprintf(
          out,
          "| %s | %.1f (%.1f, %.1f) | %.1f (%.1f, %.1f) | %.1f (%.1f, %.1f) | %s | %s | "
          "%.2f (%.2f, %.2f) |\n",
          threads_text(l.threads).c_str(), l.read(), l.before.read_gbps, l.after.read_gbps,
          l.read_weights(), l.before.read_weights_gbps, l.after.read_weights_gbps, l.fma(),
          l.before.fma_gflops, l.after.fma_gflops,
          peak(l.bf16_units(), l.before.bf16_units_gflops, l.after.bf16_units_gflops).c_str(),
          peak(l.int8(), l.before.int8_gops, l.after.int8_gops).c_str(), l.fork_join(),
          l.before.fork_join_us, l.after.fork_join_us);
    }
  }

  std::fprintf(out,
               "\n| threads | test | tokens/s | ms/token | x 1 thread | x batch 1 | achieved | of "
               "limit |\n");
  std::fprintf(out, "|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const TestResult& t : r.results) {
    const Stats s = summarize(t.tokens_per_second);
    const Achieved a = achieved(r, t);
    const std::string ratio = ratio_text(a, t.kind == TestKind::Prefill);
    const double x = speedup(r, t, false);
    const double xb = t.batch > 1 ? speedup(r, t, true) : 0.0;
    std::fprintf(out, "| %s | %s | %.2f ± %.2f | %s | %s | %s | %.1f %s | %s |\n",
                 threads_text(t.threads).c_str(), t.name().c_str(), s.mean, s.stddev,
                 significant(1000.0 / s.mean).c_str(), x > 0.0 ? format("%.2f", x).c_str() : "-",
                 xb > 0.0 ? format("%.2f", xb).c_str() : "-", a.value, a.unit, ratio.c_str());
  }
  if (!r.skipped.empty()) std::fprintf(out, "\nSkipped:\n\n");
  for (const std::string& s : r.skipped) std::fprintf(out, "- %s\n", s.c_str());
}

void write_json(const Report& r, std::FILE* out) {
  const MachineInfo& m = r.machine;
  Json j;
  j["build_type"] = r.build_type;
  j["compiler"] = r.compiler;
  j["cpu"] = {{"model", m.cpu},
              {"logical_cpus", m.logical_cpus},
              {"physical_cores", m.physical_cores},
              {"llc_bytes", m.llc_bytes}};
  j["kernel_isa"] = r.kernel_isa;
  j["matmul"] = r.matmul;
  j["matmul_precision"] = r.matmul_precision;
  j["use_mmap"] = r.use_mmap;
  j["load_seconds"] = r.load_seconds;
  j["bf16_units"] = r.bf16_units;
  j["int8_product"] = r.int8_product;
  j["threads"] = r.threads;
  j["repetitions"] = r.repetitions;
  const aft_model_info& i = r.model;
  j["model"] = {
      {"path", r.model_path},
      {"mixer", i.mixer},
      {"n_layers", i.n_layers},
      {"d_model", i.d_model},
      {"d_ff", i.d_ff},
      {"vocab_size", i.vocab_size},
      {"window", i.window},
      {"n_heads", i.n_heads},
      {"max_positions", i.max_positions},
      {"n_parameters", i.n_parameters},
      {"n_matmul_parameters", i.n_matmul_parameters},
      {"weight_dtype", r.weight_dtype},
      {"matmul_weight_bytes", weight_bytes(r)},
      {"resident_bytes", r.footprint.resident_bytes},
      {"mapped_resident_bytes", known(r.footprint.mapped, &MappedPages::resident_bytes)},
      {"mapped_huge_page_bytes", known(r.footprint.mapped, &MappedPages::huge_page_bytes)},
      {"state_bytes", r.footprint.state_bytes},
      {"file_bytes", i.file_bytes}};
  if (r.limits.empty()) {
    j["limits"] = nullptr;
  } else {
    j["limits"] = Json::array();
    for (const MeasuredLimits& l : r.limits) {
      j["limits"].push_back(
          {{"threads", l.threads},
           {"read_gbps", l.read()},
           {"read_gbps_before_after", {l.before.read_gbps, l.after.read_gbps}},
           {"read_buffer_bytes", r.bandwidth_bytes},
           {"read_weights_gbps", l.read_weights()},
           {"read_weights_gbps_before_after",
            {l.before.read_weights_gbps, l.after.read_weights_gbps}},
           {"read_weights_buffer_bytes", r.weights_probe_bytes},
           {"fma_gflops", l.fma()},
           {"fma_gflops_before_after", {l.before.fma_gflops, l.after.fma_gflops}},
           {"fork_join_us", l.fork_join()},
           {"fork_join_us_before_after", {l.before.fork_join_us, l.after.fork_join_us}},
           {"bf16_units_gflops", l.bf16_units() > 0.0 ? Json(l.bf16_units()) : Json(nullptr)},
           {"bf16_units_gflops_before_after",
            {l.before.bf16_units_gflops, l.after.bf16_units_gflops}},
           {"int8_gops", l.int8() > 0.0 ? Json(l.int8()) : Json(nullptr)},
           {"int8_gops_before_after", {l.before.int8_gops, l.after.int8_gops}}});
    }
  }
  j["results"] = Json::array();
  for (const TestResult& t : r.results) {
    const Stats s = summarize(t.tokens_per_second);
    const Achieved a = achieved(r, t);
    Json row = {{"test", t.name()},
                {"kind", t.kind == TestKind::Prefill ? "pp" : "tg"},
                {"n_prompt", t.n_prompt},
                {"n_gen", t.n_gen},
                {"depth", t.depth},
                {"batch", t.batch},
                {"threads", t.threads},
                {"tokens_per_second", {{"mean", s.mean}, {"stddev", s.stddev}}},
                {"samples_tokens_per_second", t.tokens_per_second},
                {"ms_per_token", 1000.0 / s.mean}};
    const double x = speedup(r, t, false);
    row["speedup_over_1_thread"] = x > 0.0 ? Json(x) : Json(nullptr);
    const double xb = speedup(r, t, true);
    row["speedup_over_batch_1"] = xb > 0.0 ? Json(xb) : Json(nullptr);
    if (t.kind == TestKind::Prefill) {
      row["gflops"] = a.value;
      row["fraction_of_fma_peak"] = a.fma_limit > 0.0 ? Json(a.value / a.fma_limit) : Json(nullptr);
      row["limit"] = a.limit > 0.0 ? Json(a.product.key) : Json(nullptr);
      row["fraction_of_limit"] = a.limit > 0.0 ? Json(a.value / a.limit) : Json(nullptr);
    } else {
      row["weight_gbps"] = a.value;
      row["fraction_of_read_bandwidth"] = a.limit > 0.0 ? Json(a.value / a.limit) : Json(nullptr);
      row["fraction_of_read_at_weight_size"] =
          a.weights_limit > 0.0 ? Json(a.value / a.weights_limit) : Json(nullptr);
      row["gflops"] = a.gflops;
      row["fraction_of_fma_peak"] =
          a.fma_limit > 0.0 ? Json(a.gflops / a.fma_limit) : Json(nullptr);
      row["compute_limit"] = a.product.value > 0.0 ? Json(a.product.key) : Json(nullptr);
      row["fraction_of_compute_limit"] =
          a.product.value > 0.0 ? Json(a.gflops / a.product.value) : Json(nullptr);
    }
    j["results"].push_back(row);
  }
  j["skipped"] = r.skipped;
  std::fprintf(out, "%s\n", j.dump(2).c_str());
}

}  // namespace aft::bench
