// The generic ops a model's graph is made of (a family adds its own, models/*/ops/). Each holds
// pointers to weights it does not own (the memory-mapped file, or tables the model owns) and works
// on the rows it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/runtime/graph.h"
#include "kernels/matmul.h"
#include "pos_encoding.h"

namespace aft {

// out[r] = table[token_r] * scale + position_encoding(position + r).
std::unique_ptr<Op> make_embedding_op(const float* table, std::size_t width, float scale,
                                      PosEncoding positions, const float* learned_positions);

std::unique_ptr<Op> make_layer_norm_op(const float* gamma, const float* beta, float eps);

// (gate, y, x) -> x + sigmoid(gate) * y, row by row (RWKV-4's gated feed-forward output).
std::unique_ptr<Op> make_gated_residual_op();

// out = post(in W^T + bias), W [out_width, in_width] row-major (nn.Linear), f32, bf16 or q8_0.
// With a second input (a residual, out_width wide): out = post(in W^T + bias) + residual, added
// as out is written. One token (per sequence) runs the GEMV of W's dtype: for q8_0, on the input
// quantized to 8-bit blocks. More tokens of q8_0 weights run the batch GEMV (a prompt of
// kQ8TilePromptRows rows or more, where the table has KernelTable::gemv_prompt_q8_0_bf16 and the
// matrix units are on, that kernel instead, its rows rounded to bf16), as do those of f32
// weights multiplied in f32 where the kernel table says so (KernelTable::f32_prompts_on_batch_gemv)
// and those the table's bf16 batch GEMV takes on tiles (KernelTable::bf16_batch_on_tiles); the
// others run the matrix product (kernels::Matmul, at `precision`: bf16 weights, and f32 ones at
// MatmulPrecision::BF16, on the matrix units where the CPU has them; otherwise in f32, of W
// widened exactly).
// A q8_0 prompt of at least this many rows takes the bf16 tiles (KernelTable::
// gemv_prompt_q8_0_bf16) where the table has them: each part of the product dequantizes its
// weights once for all its rows, which fewer rows would not repay.
constexpr std::size_t kQ8TilePromptRows = 64;

std::unique_ptr<Op> make_linear_op(std::size_t in_width, std::size_t out_width,
                                   kernels::WeightMatrix w, const float* bias, kernels::PostOp post,
                                   kernels::MatmulPrecision precision);

}  // namespace aft
