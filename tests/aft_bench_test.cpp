// aft-bench as a user meets it: it runs on a small model and reports positive speeds (never a
// required speed), as markdown or JSON, and refuses bad command lines with exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "kernels/matmul.h"
#include "model_file_writer.h"
#include "run_command.h"
#include "tools/bench/mapped_pages.h"

namespace aft::testing {
namespace {

using Result = CommandResult;

std::string quote(const std::string& s) { return shell_quote(s); }

Result run(const std::string& args) { return run_command(AFT_BENCH_PATH, args); }

std::string fixture(const std::string& name) {
  return quote(std::string(AFT_FIXTURES_DIR) + "/" + name + ".aft");
}

nlohmann::json parse_json(const Result& r) {
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << r.out;
  return j;
}

TEST(AftBench, ReportsPositiveSpeedsAsJson) {
  const Result r = run(fixture("simple") + " -r 1 -p 8 -n 4 -t 1 --no-limits -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "stderr is not a terminal: no progress line";
  const nlohmann::json j = parse_json(r);
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j["limits"].is_null());
  EXPECT_GT(j["model"]["n_matmul_parameters"].get<int64_t>(), 0);
  // The fixture's file size, and its state: 2 layers' sums (3 x 32 doubles) and frames (32
  // floats) and the blob's headers; AFT-simple keeps no rows.
  EXPECT_EQ(j["model"]["file_bytes"].get<uint64_t>(),
            std::filesystem::file_size(std::string(AFT_FIXTURES_DIR) + "/simple.aft"));
  EXPECT_GT(j["model"]["resident_bytes"].get<uint64_t>(), j["model"]["file_bytes"].get<uint64_t>());
  // The whole file was read (its checksums) through the mapping, which stays while it runs.
  if (!j["model"]["mapped_resident_bytes"].is_null()) {
    EXPECT_GT(j["model"]["mapped_resident_bytes"].get<uint64_t>(), 0u);
    EXPECT_LE(j["model"]["mapped_resident_bytes"].get<uint64_t>(),
              j["model"]["file_bytes"].get<uint64_t>() + 4096);
    EXPECT_LE(j["model"]["mapped_huge_page_bytes"].get<uint64_t>(),
              j["model"]["mapped_resident_bytes"].get<uint64_t>());
  }
  EXPECT_EQ(j["model"]["state_bytes"].get<uint64_t>(), 32u + 2 * (16 + 3 * 32 * 8 + 32 * 4) + 8);
  EXPECT_FALSE(j["kernel_isa"].get<std::string>().empty());
  EXPECT_EQ(j["matmul"].get<std::string>().rfind("oneDNN ", 0), 0u) << j["matmul"];
  EXPECT_EQ(j["matmul_precision"], "f32");
  EXPECT_EQ(j["use_mmap"], true);
  EXPECT_GT(j["load_seconds"].get<double>(), 0.0);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["test"], "pp8");
  EXPECT_EQ(j["results"][1]["test"], "tg4");
  for (const auto& row : j["results"]) {
    EXPECT_GT(row["tokens_per_second"]["mean"].get<double>(), 0.0) << row.dump();
    EXPECT_EQ(row["samples_tokens_per_second"].size(), 1u);
    EXPECT_EQ(row["threads"], 1);
  }
}

// A prompt's GFLOP/s counts 2 FLOPs per matmul weight and token (the head once) and, for the
// mixers that weigh pairs of positions one by one, 4 per channel and pair: all earlier positions
// for AFT-full, the window's for AFT-local, none for AFT-simple.
TEST(AftBench, PromptFlopsCountTheMixersPairsOfPositions) {
  constexpr int64_t kPrompt = 24;
  for (const char* name : {"full_table", "local", "simple"}) {
    SCOPED_TRACE(name);
    const Result r = run(fixture(name) + " -r 1 -p " + std::to_string(kPrompt) +
                         " -n 0 -t 1 --no-limits -o json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = parse_json(r);
    const nlohmann::json& m = j["model"];
    const double d = m["d_model"].get<double>(), layers = m["n_layers"].get<double>();
    const double head = m["vocab_size"].get<double>() * d;
    const double matmul = 2.0 * ((m["n_matmul_parameters"].get<double>() - head) * kPrompt + head);
    double pairs = 0.0;
    if (m["mixer"] == "full") pairs = kPrompt * (kPrompt + 1) / 2;
    if (m["mixer"] == "local") {
      const int64_t window = m["window"].get<int64_t>();
      ASSERT_GT(window, 1);
      ASSERT_LT(window, kPrompt) << "the test wants positions past the window";
      for (int64_t t = 0; t < kPrompt; ++t) pairs += static_cast<double>(std::min(t + 1, window));
    }
    EXPECT_EQ(pairs == 0.0, m["mixer"] == "simple") << m.dump();
    const nlohmann::json& pp = j["results"][0];
    const double prompts_per_second = pp["tokens_per_second"]["mean"].get<double>() / kPrompt;
    EXPECT_NEAR(pp["gflops"].get<double>() / prompts_per_second * 1e9,
                matmul + 4.0 * d * layers * pairs, 1e-6 * matmul);
  }
}

// The file's mappings in an smaps listing: their resident bytes and those on 2 MiB pages, summed
// over every mapping of that path and of no other (a path with a space, a prefix of it, no path).
TEST(AftBench, MappedPagesSumsTheFilesMappings) {
  std::istringstream smaps(
      "7f0000000000-7f0000400000 r--p 00000000 fe:01 1234                       /models/a b.aft\n"
      "Size:               4096 kB\n"
      "Rss:                4096 kB\n"
      "FilePmdMapped:      2048 kB\n"
      "7f0000400000-7f0000500000 rw-p 00000000 00:00 0 \n"
      "Rss:                 512 kB\n"
      "FilePmdMapped:         0 kB\n"
      "7f0000500000-7f0000600000 r--p 00400000 fe:01 1234                       /models/a b.aft\n"
      "Rss:                 100 kB\n"
      "FilePmdMapped:         0 kB\n"
      "7f0000600000-7f0000700000 r--p 00000000 fe:01 99                         /models/a b.aft2\n"
      "Rss:                 700 kB\n"
      "FilePmdMapped:      2048 kB\n");
  const bench::MappedPages pages = bench::mapped_pages(smaps, "/models/a b.aft");
  EXPECT_TRUE(pages.known);
  EXPECT_EQ(pages.resident_bytes, (4096u + 100u) * 1024u);
  EXPECT_EQ(pages.huge_page_bytes, 2048u * 1024u);
  std::istringstream none("");
  EXPECT_EQ(bench::mapped_pages(none, "/models/a b.aft").resident_bytes, 0u);
  EXPECT_FALSE(bench::mapped_pages_of("/no/such/file.aft").known);
}

// --no-mmap: still accepted, and said in the report to change nothing (every weight matrix is
// packed into the process's memory at load).
TEST(AftBench, NoMmapIsReported) {
  const Result json = run(fixture("simple") + " -r 1 -p 0 -n 2 -t 1 --no-limits --no-mmap -o json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(parse_json(json)["use_mmap"], false);
  const Result md = run(fixture("simple") + " -r 1 -p 0 -n 2 -t 1 --no-limits --no-mmap");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find(" (--no-mmap: no longer changes anything)"), std::string::npos) << md.out;
}

// -t 0: the sessions' automatic thread count, reported as "auto" (0 in JSON), its limits those
// of every physical core.
TEST(AftBench, AutomaticThreadCount) {
  const Result md = run(fixture("simple") + " -r 1 -p 8 -n 4 -t 0 --bandwidth-mib 8");
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("threads: auto;"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| auto | pp8 |"), std::string::npos) << md.out;
  const Result r = run(fixture("simple") + " -r 1 -p 8 -n 4 -t 0 --no-limits -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = parse_json(r);
  ASSERT_EQ(j["results"].size(), 2u);
  for (const auto& row : j["results"]) {
    EXPECT_EQ(row["threads"], 0);
    EXPECT_GT(row["tokens_per_second"]["mean"].get<double>(), 0.0) << row.dump();
  }
}

// --batch: sessions decoding together; tokens/s counts every session's, and the ratio to a batch
// of one is reported.
TEST(AftBench, DecodesBatchesOfSessions) {
  const Result r = run(fixture("local") + " -r 1 -p 0 -n 3 -b 1,4 -t 1 --no-limits -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = parse_json(r);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["test"], "tg3");
  EXPECT_EQ(j["results"][0]["batch"], 1);
  EXPECT_EQ(j["results"][1]["test"], "tg3 x4");
  EXPECT_EQ(j["results"][1]["batch"], 4);
  EXPECT_GT(j["results"][1]["speedup_over_batch_1"].get<double>(), 0.0);
  const Result bad = run(fixture("local") + " -b 0");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("-b"), std::string::npos) << bad.err;
}

TEST(AftBench, MeasuresTheLimitsAndRatios) {
  const Result r =
      run(fixture("conv") + " -r 2 -p 8 -n 4 -d 0,16 -t 1,2 --bandwidth-mib 16 -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = parse_json(r);
  ASSERT_EQ(j["limits"].size(), 2u);
  for (const auto& l : j["limits"]) {
    EXPECT_GT(l["read_gbps"].get<double>(), 0.0) << l.dump();
    EXPECT_GT(l["read_weights_gbps"].get<double>(), 0.0) << l.dump();
    EXPECT_GT(l["fma_gflops"].get<double>(), 0.0) << l.dump();
    EXPECT_GT(l["fork_join_us"].get<double>(), 0.0) << l.dump();
  }
  ASSERT_EQ(j["results"].size(), 6u);  // (pp8, tg4, tg4 @ d16) x 2 thread counts
  EXPECT_EQ(j["results"][2]["test"], "tg4 @ d16");
  EXPECT_EQ(j["results"][5]["threads"], 2);
  for (const auto& row : j["results"]) {
    EXPECT_EQ(row["samples_tokens_per_second"].size(), 2u);
    // Thread scaling: the same test at 1 thread is the reference.
    const double speedup = row["speedup_over_1_thread"].get<double>();
    if (row["threads"] == 1) {
      EXPECT_EQ(speedup, 1.0) << row.dump();
    }
    EXPECT_GT(speedup, 0.0) << row.dump();
    if (row["kind"] == "pp") {
      EXPECT_GT(row["fraction_of_fma_peak"].get<double>(), 0.0) << row.dump();
    } else {
      EXPECT_GT(row["fraction_of_read_bandwidth"].get<double>(), 0.0) << row.dump();
      EXPECT_GT(row["fraction_of_read_at_weight_size"].get<double>(), 0.0) << row.dump();
      EXPECT_GT(row["fraction_of_fma_peak"].get<double>(), 0.0) << row.dump();
    }
  }
}

// A prompt, and decoded tokens, are measured against the peak of the products they run: bf16
// weights against the matrix units' bf16 peak where the CPU has them (f32 ones at
// --matmul-precision bf16 in prompts only: they decode in f32), q8_0 against the int8 products'
// peak, f32 against the FMA peak; each peak measured where oneDNN has a product for it that is
// not a reference loop, and reported as null elsewhere.
TEST(AftBench, PromptsAndTokensAreMeasuredAgainstThePeakOfTheirProducts) {
  const bool units = !kernels::matrix_units().empty();
  const struct {
    std::string model, flags, limit, decode_limit;
  } cases[] = {
      {"conv", "", "fma", "fma"},
      {"conv", " --matmul-precision bf16", units ? "bf16_units" : "fma", "fma"},
      {"conv_bf16", "", units ? "bf16_units" : "fma", units ? "bf16_units" : "fma"},
      {"conv_q8_0", "", "int8", "int8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.model + c.flags);
    const Result r =
        run(fixture(c.model) + " -r 1 -p 16 -n 2 -t 1 --bandwidth-mib 16 -o json" + c.flags);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = parse_json(r);
    EXPECT_EQ(j["bf16_units"], kernels::matrix_units());
    const nlohmann::json& l = j["limits"][0];
    if (units) {
      EXPECT_GT(l["bf16_units_gflops"].get<double>(), 0.0) << l.dump();
    } else {
      EXPECT_TRUE(l["bf16_units_gflops"].is_null()) << l.dump();
    }
    const std::string int8 = j["int8_product"];
    EXPECT_NE(int8.rfind("ref", 0), 0u) << int8;
    if (int8.empty()) {
      EXPECT_TRUE(l["int8_gops"].is_null()) << l.dump();
    } else {
      EXPECT_GT(l["int8_gops"].get<double>(), 0.0) << l.dump();
    }
    const nlohmann::json& pp = j["results"][0];
    EXPECT_EQ(pp["limit"], c.limit == "int8" && int8.empty() ? "fma" : c.limit) << pp.dump();
    const double peak = pp["limit"] == "fma"          ? l["fma_gflops"].get<double>()
                        : pp["limit"] == "bf16_units" ? l["bf16_units_gflops"].get<double>()
                                                      : l["int8_gops"].get<double>();
    EXPECT_DOUBLE_EQ(pp["fraction_of_limit"].get<double>(), pp["gflops"].get<double>() / peak);
    const nlohmann::json& tg = j["results"][1];
    const std::string decode_limit =
        c.decode_limit == "int8" && int8.empty() ? "fma" : c.decode_limit;
    EXPECT_EQ(tg["compute_limit"], decode_limit) << tg.dump();
    const double decode_peak = decode_limit == "fma"          ? l["fma_gflops"].get<double>()
                               : decode_limit == "bf16_units" ? l["bf16_units_gflops"].get<double>()
                                                              : l["int8_gops"].get<double>();
    EXPECT_DOUBLE_EQ(tg["fraction_of_compute_limit"].get<double>(),
                     tg["gflops"].get<double>() / decode_peak);
  }
}

TEST(AftBench, MarkdownByDefault) {
  const Result r = run(fixture("simple_sinusoidal_gelu") + " -r 1 -p 8 -n 2 -t 1 --no-limits");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("| 1 | pp8 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 1 | tg2 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernels: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("matmul: oneDNN "), std::string::npos) << r.out;
}

TEST(AftBench, SkipsTestsPastThePositionLimit) {
  const Result r = run(fixture("local") + " -r 1 -p 100,8 -n 4 -d 62 -t 1 --no-limits -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;  // max_seq_len 64: pp100 and tg4 @ d62 cannot run
  const nlohmann::json j = parse_json(r);
  ASSERT_EQ(j["results"].size(), 1u);
  EXPECT_EQ(j["results"][0]["test"], "pp8");
  EXPECT_EQ(j["skipped"].size(), 2u);
  EXPECT_NE(r.err.find("the model stops at 64"), std::string::npos) << r.err;
}

TEST(AftBench, UsageErrorsExitWithTwo) {
  const std::string model = fixture("simple");
  for (const std::string& args :
       {std::string(""), model + " -p abc", model + " -p 8,", model + " -n -1", model + " -t -1",
        model + " -r 0", model + " -o xml", model + " --bogus", model + " -t", model + " extra",
        model + " --matmul-precision fp16"}) {
    const Result r = run(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("usage: aft-bench"), std::string::npos) << args;
    EXPECT_EQ(r.out, "") << args;
  }
  EXPECT_NE(run(model + " -o xml").err.find("expected md or json"), std::string::npos);
}

TEST(AftBench, HelpExitsWithZero) {
  const Result r = run("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--no-limits"), std::string::npos);
}

// A tensor whose bytes no longer match its checksum: refused by default, naming the checksum;
// --no-checksum (a flag the tools share, tools/cli/model_flags.h) loads it and measures.
TEST(AftBench, NoChecksumLoadsAFileWhoseChecksumIsWrong) {
  const TempFile corrupt;
  std::filesystem::copy_file(std::string(AFT_FIXTURES_DIR) + "/simple.aft", corrupt.path());
  {
    std::fstream f(corrupt.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char last = static_cast<char>(f.get());
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(last ^ 0x01));
  }
  const std::string args = quote(corrupt.path()) + " -r 1 -p 0 -n 2 -t 1 --no-limits";
  const Result checked = run(args);
  EXPECT_EQ(checked.exit_code, 1);
  EXPECT_NE(checked.err.find("checksum"), std::string::npos) << checked.err;
  const Result unchecked = run(args + " --no-checksum");
  EXPECT_EQ(unchecked.exit_code, 0) << unchecked.err;
  EXPECT_NE(unchecked.out.find("tg2"), std::string::npos) << unchecked.out;
}

TEST(AftBench, MissingModelExitsWithOne) {
  const Result r = run("no-such-model.aft -r 1 --no-limits");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no-such-model.aft"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace aft::testing
