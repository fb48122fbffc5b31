// The linear op (engine/runtime/ops/linear_op.cpp). On q8_0 weights, and on f32 ones where the
// table's f32 batch GEMV takes prompts: a prompt's rows go through the GEMV kernels as a batch's,
// so every row of a prompt gets the bits it gets fed alone (a decoded token), with bias,
// activation and residual, on any thread count; q8_0 prompts on the bf16 tiles (the avx512amx
// table) get the bits of that kernel on each row alone. The shapes are wide enough for 2 and 3
// threads to split the rows, and the prompt longer than the rows that pass the kernel at once
// (128). CTest runs these tests under every kernel path too (AFT_ISA, beside oneDNN's matching
// limit).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/ops/ops.h"
#include "engine/runtime/scratch.h"
#include "kernels/bf16.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "kernels/packed_weights.h"
#include "random_vector.h"

namespace aft {
namespace {

using test_data::random_vector;

// out = op(x) (+ residual) for `rows` rows of one sequence, on n_threads threads.
std::vector<float> run(const Op& op, const float* x, std::size_t rows, std::size_t in,
                       std::size_t out, const float* residual, int n_threads, Scratch& scratch) {
  SequenceState state;
  const Sequence sequence{&state, nullptr};
  scratch.begin_call(n_threads);
  const ExecContext ctx{kernels::active_kernels(), n_threads, nullptr, &sequence, 1, scratch};
  std::vector<float> y(rows * out);
  std::vector<Tensor> inputs{Tensor{const_cast<float*>(x), rows, in}};
  if (residual != nullptr) inputs.push_back(Tensor{const_cast<float*>(residual), rows, out});
  op.run(ctx, inputs, Tensor{y.data(), rows, out});
  return y;
}

// A prompt of `rows` rows through `packed` (kOut x in), each row against the same row fed alone,
// with and without gelu and a residual, on 1 to 3 threads.
constexpr std::size_t kOut = 200, kRows = 300;
void expect_prompt_rows_as_fed_alone(const kernels::WeightMatrix& packed, std::size_t in,
                                     std::size_t rows = kRows) {
  const std::vector<float> x = random_vector(rows * in, -2.0f, 2.0f, 2);
  const std::vector<float> bias = random_vector(kOut, -0.5f, 0.5f, 3);
  const std::vector<float> residual = random_vector(rows * kOut, -1.0f, 1.0f, 4);
  for (kernels::PostOp post : {kernels::PostOp::None, kernels::PostOp::Gelu}) {
    const std::unique_ptr<Op> op =
        make_linear_op(in, kOut, packed, bias.data(), post, kernels::MatmulPrecision::F32);
    Scratch scratch;
    for (const float* skip : {static_cast<const float*>(nullptr), residual.data()}) {
      std::vector<float> alone;
      for (std::size_t r = 0; r < rows; ++r) {
        const std::vector<float> row =
            run(*op, x.data() + r * in, 1, in, kOut, skip ? skip + r * kOut : nullptr, 1, scratch);
        alone.insert(alone.end(), row.begin(), row.end());
      }
      for (int threads : {1, 2, 3}) {
        const std::vector<float> prompt =
            run(*op, x.data(), rows, in, kOut, skip, threads, scratch);
        for (std::size_t i = 0; i < prompt.size(); ++i) {
          ASSERT_EQ(prompt[i], alone[i]) << threads << " threads, row " << i / kOut << ", column "
                                         << i % kOut << (skip ? ", with a residual" : "")
                                         << (post == kernels::PostOp::Gelu ? ", gelu" : "");
        }
      }
    }
  }
}

// Whether q8_0 prompts of kQ8TilePromptRows rows or more take the bf16 tiles
// (KernelTable::gemv_prompt_q8_0_bf16).
bool q8_prompts_on_bf16_tiles() {
  return kernels::active_kernels().gemv_prompt_q8_0_bf16 != nullptr &&
         !kernels::matrix_units().empty();
}

// q8_0 weights of kOut x in, quantized by the active table.
kernels::WeightMatrix q8_weights(kernels::PackedWeights& room, std::size_t in) {
  const std::vector<float> w = random_vector(kOut * in, -1.0f, 1.0f, 1);
  std::vector<int8_t> quants(w.size());
  std::vector<float> scales(w.size() / kernels::kQ8BlockSize);
  kernels::active_kernels().quantize_q8_0(w.size(), w.data(), quants.data(), scales.data());
  room = kernels::PackedWeights(kernels::PackedWeights::q8_0_bytes(kOut, in));
  return room.add_q8_0(kOut, in, quants.data(), scales.data());
}

// Prompts shorter than kQ8TilePromptRows where longer ones take the bf16 tiles.
TEST(LinearOp, Q8PromptRowsHaveTheBitsOfTokensFedAlone) {
  constexpr std::size_t kIn = 96;
  kernels::PackedWeights room;
  const kernels::WeightMatrix w = q8_weights(room, kIn);
  expect_prompt_rows_as_fed_alone(w, kIn,
                                  q8_prompts_on_bf16_tiles() ? kQ8TilePromptRows - 1 : kRows);
}

// Where q8_0 prompts of kQ8TilePromptRows rows or more take the bf16 tiles: each row the bits of
// that kernel given the row alone, rounded to bf16, plus the residual, on 1 to 3 threads (at
// 1100 columns the rows' rounding is split among the threads too).
TEST(LinearOp, Q8PromptsOnMatrixUnitsHaveTheBitsOfTheTileKernelOnEachRow) {
  if (!q8_prompts_on_bf16_tiles()) {
    GTEST_SKIP() << "skipped: the " << kernels::active_kernels().isa
                 << " table multiplies q8_0 prompts in integers (no AMX, or AFT_MATRIX_UNITS=off)";
  }
  const kernels::KernelTable& k = kernels::active_kernels();
  for (std::size_t in : {std::size_t{96}, std::size_t{1120}}) {
    kernels::PackedWeights room;
    const kernels::WeightMatrix w = q8_weights(room, in);
    const std::vector<float> bias = random_vector(kOut, -0.5f, 0.5f, 3);
    const std::unique_ptr<Op> op = make_linear_op(in, kOut, w, bias.data(), kernels::PostOp::None,
                                                  kernels::MatmulPrecision::F32);
    for (std::size_t rows : {kQ8TilePromptRows, std::size_t{80}, std::size_t{300}}) {
      const std::vector<float> x = random_vector(rows * in, -2.0f, 2.0f, 2);
      const std::vector<float> residual = random_vector(rows * kOut, -1.0f, 1.0f, 4);
      std::vector<float> want(rows * kOut);
      std::vector<uint16_t> rounded(kernels::bf16_packed_cols(in));
      for (std::size_t r = 0; r < rows; ++r) {
        k.round_bf16(in, x.data() + r * in, rounded.data());
        k.gemv_prompt_q8_0_bf16(kOut, in, w.q8_rows(0, in), w.q8_scales(0, in), 1, rounded.data(),
                                0, bias.data(), want.data() + r * kOut, 0);
        k.add_f32(kOut, residual.data() + r * kOut, want.data() + r * kOut);
      }
      Scratch scratch;
      for (int threads : {1, 2, 3}) {
        const std::vector<float> prompt =
            run(*op, x.data(), rows, in, kOut, residual.data(), threads, scratch);
        for (std::size_t i = 0; i < prompt.size(); ++i) {
          ASSERT_EQ(prompt[i], want[i]) << in << " columns, " << rows << " rows, " << threads
                                        << " threads, row " << i / kOut << ", column " << i % kOut;
        }
      }
    }
  }
}

// f32 weights, where the table's f32 batch GEMV takes prompts (KernelTable::
// f32_prompts_on_batch_gemv); elsewhere they take oneDNN, and the products' description says which.
TEST(LinearOp, F32PromptRowsOnTheBatchGemvHaveTheBitsOfTokensFedAlone) {
  const kernels::KernelTable& k = kernels::active_kernels();
  const std::string matmul = kernels::matmul_description();
  if (!k.f32_prompts_on_batch_gemv) {
    EXPECT_NE(matmul.find("f32 weights on it"), std::string::npos) << matmul;
    GTEST_SKIP() << "skipped: the " << k.isa << " table's f32 prompts take oneDNN";
  }
  EXPECT_NE(matmul.find("f32 weights on aft's batch GEMV"), std::string::npos) << matmul;
  constexpr std::size_t kIn = 100;  // no multiple of a vector register's lanes
  const std::vector<float> w = random_vector(kOut * kIn, -1.0f, 1.0f, 1);
  kernels::PackedWeights room(kernels::PackedWeights::f32_bytes(kOut, kIn));
  expect_prompt_rows_as_fed_alone(room.add_f32(kOut, kIn, w.data()), kIn);
}

// bf16 weights where the CPU has matrix units: a token's products take its row rounded to bf16
// (the bf16 x bf16 GEMV's bits), and a prompt of up to kMatmulRuntimeRows rows, or any prompt
// where that kernel runs on tiles (KernelTable::bf16_batch_on_tiles), goes through the same kernel
// as a batch, each row with the bits it gets alone, on any thread count; there f32 weights at
// MatmulPrecision::BF16 prompt with the bits of their rounding to bf16.
TEST(LinearOp, Bf16OnMatrixUnitsPromptRowsHaveTheBitsOfTokensFedAlone) {
  if (kernels::matrix_units().empty()) {
    GTEST_SKIP() << "skipped: no matrix units taken (no AMX/AVX512-BF16, Intel's AVX512-BF16 "
                    "unless AFT_MATRIX_UNITS=on, or =off)";
  }
  const kernels::KernelTable& k = kernels::active_kernels();
  // On tiles, 80 rows: blocks of 32 by the kernel's pairs of groups (300 rows: 19 groups, the
  // last alone), then 16 rows by its passes of three.
  const std::size_t kOut = 300, kRows = k.bf16_batch_on_tiles ? 80 : kernels::kMatmulRuntimeRows;
  std::vector<std::size_t> row_counts;
  for (std::size_t rows = 2; rows <= kernels::kMatmulRuntimeRows; ++rows)
    row_counts.push_back(rows);
  if (k.bf16_batch_on_tiles) row_counts.insert(row_counts.end(), {31, 32, 33, 64, 80});
  // 1100 columns: from 4 rows on, the rows' rounding to bf16 is split among the threads too.
  for (std::size_t in : {std::size_t{80}, std::size_t{1100}}) {
    const std::vector<float> w = random_vector(kOut * in, -1.0f, 1.0f, 5);
    const std::vector<float> x = random_vector(kRows * in, -2.0f, 2.0f, 6);
    const std::vector<float> bias = random_vector(kOut, -0.5f, 0.5f, 7);
    std::vector<uint16_t> halves(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) halves[i] = kernels::f32_to_bf16(w[i]);
    kernels::PackedWeights room(kernels::PackedWeights::bf16_bytes(kOut, in));
    const kernels::WeightMatrix packed = room.add_bf16(kOut, in, halves.data());
    const std::unique_ptr<Op> op = make_linear_op(
        in, kOut, packed, bias.data(), kernels::PostOp::None, kernels::MatmulPrecision::F32);
    // On tiles, the f32 matrix at MatmulPrecision::BF16 prompts through its rounded copy: the
    // bits of the bf16 matrix.
    kernels::PackedWeights f32_room(kernels::PackedWeights::f32_bytes(kOut, in));
    const std::unique_ptr<Op> f32_op =
        make_linear_op(in, kOut, f32_room.add_f32(kOut, in, w.data()), bias.data(),
                       kernels::PostOp::None, kernels::MatmulPrecision::BF16);
    Scratch scratch;
    std::vector<float> alone;
    for (std::size_t r = 0; r < kRows; ++r) {
      const std::vector<float> row = run(*op, x.data() + r * in, 1, in, kOut, nullptr, 1, scratch);
      std::vector<uint16_t> rounded(kernels::bf16_packed_cols(in));
      std::vector<float> want(kOut);
      k.round_bf16(in, x.data() + r * in, rounded.data());
      k.gemv_bf16_bf16(kOut, in, static_cast<const uint16_t*>(packed.data), rounded.data(),
                       bias.data(), want.data());
      ASSERT_EQ(row, want) << in << " columns, row " << r << ": not the bf16 x bf16 product";
      alone.insert(alone.end(), row.begin(), row.end());
    }
    for (std::size_t rows : row_counts) {
      for (int threads : {1, 2, 3}) {
        const std::vector<float> prompt =
            run(*op, x.data(), rows, in, kOut, nullptr, threads, scratch);
        for (std::size_t i = 0; i < prompt.size(); ++i) {
          ASSERT_EQ(prompt[i], alone[i]) << in << " columns, " << rows << " rows, " << threads
                                         << " threads, row " << i / kOut << ", column " << i % kOut;
        }
        if (!k.bf16_batch_on_tiles || rows <= kernels::kMatmulRuntimeRows) continue;
        const std::vector<float> f32_prompt =
            run(*f32_op, x.data(), rows, in, kOut, nullptr, threads, scratch);
        for (std::size_t i = 0; i < f32_prompt.size(); ++i) {
          ASSERT_EQ(f32_prompt[i], alone[i])
              << in << " columns, " << rows << " rows, " << threads << " threads, row " << i / kOut
              << ", column " << i % kOut << ": f32 weights at bf16 precision";
        }
      }
    }
  }
}

}  // namespace
}  // namespace aft
