#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/runtime/parallel.h"
#include "engine/runtime/runtime_kernels.h"
#include "kernels/packed_weights.h"
#include "ops.h"

namespace aft {
namespace {

// Output rows per thread range start at multiples of this (see parallel.h).
constexpr std::size_t kRowAlign = 64;
// A block of a prompt's rows starts at a multiple of this: the bf16 tile kernel's blocks of 32
// vectors (bf16_tiles.hpp) stay whole.
constexpr std::size_t kVectorAlign = 32;
// Input rows a prompt's product takes through the batch GEMV at once: they stay in cache while the
// panels of weight rows pass (at 2048 columns 256 KB of q8_0 blocks, 1 MB of f32; a 512-token
// prompt's would be 1 MB and 4 MB). Measured on a Zen 4 (1 MB L2), enwik8 q8_0 pp512: 16 rows
// 6-9% slower, 64 to 512 within 3%; on a Zen 5 (1 MB L2), enwik8 f32 pp512 at 1 thread: 16 rows
// 15-26% slower than 128, 64 rows 2-9%, 256 (a whole chunk) within the noise of 128.
constexpr std::size_t kVectorsPerPass = 128;
// Work units (parallel.h) of quantizing one value, or rounding it to bf16: 0.18 ns on a Zen 4,
// where a multiply-add of the f32 GEMV takes 0.02. At one unit a value a batch of 16 rows of 512
// stayed on one thread while the others waited (measured: 12% of the calling thread's time).
constexpr std::size_t kPrepareWorkPerValue = 8;

// Input rows in 8-bit blocks, for q8_0 weights (in the session's scratch): a thread's own copy of
// one token's row, or the rows of a call, quantized once by its threads and read by all.
struct QuantizedInput {
  std::vector<int8_t> values;
  std::vector<float> scales;

  void reserve(std::size_t count) {
    if (values.size() < count) values.resize(count);
    if (scales.size() < count / kernels::kQ8BlockSize) scales.resize(count / kernels::kQ8BlockSize);
  }
};
struct SharedQuantizedInput : QuantizedInput {};

// Input rows rounded to bf16 (KernelTable::round_bf16), for bf16 weights on a CPU with matrix
// units: a thread's own copy of one token's row, or the rows of a batch, rounded once by its
// threads and read by all.
struct RoundedInput {
  std::vector<uint16_t> values;

  void reserve(std::size_t count) {
    if (values.size() < count) values.resize(count);
  }
};
struct SharedRoundedInput : RoundedInput {};

// Rows [begin, end) of `in` rounded to bf16 into `to`, bf16_packed_cols(in.width) values apart.
void round_rows_to_bf16(const kernels::KernelTable& k, const Tensor& in, std::size_t begin,
                        std::size_t end, uint16_t* to) {
  const std::size_t stride = kernels::bf16_packed_cols(in.width);
  for (std::size_t r = begin; r < end; ++r) k.round_bf16(in.width, in.row(r), to + r * stride);
}

class LinearOp final : public Op {
 public:
  LinearOp(std::size_t in_width, std::size_t out_width, kernels::WeightMatrix w, const float* bias,
           kernels::PostOp post, kernels::MatmulPrecision precision)
      : in_width_(in_width),
        out_width_(out_width),
        w_(w),
        bias_(bias),
        post_(post),
        rounds_to_bf16_(w.type == kernels::WeightType::BF16 && !kernels::matrix_units().empty()),
        tile_prompts_(
            !kernels::matrix_units().empty() && runtime_kernels().bf16_batch_on_tiles &&
            (w.type == kernels::WeightType::BF16 ||
             (w.type == kernels::WeightType::F32 && precision == kernels::MatmulPrecision::BF16))),
        q8_tile_prompts_(w.type == kernels::WeightType::Q8_0 && !kernels::matrix_units().empty() &&
                         runtime_kernels().gemv_prompt_q8_0_bf16 != nullptr),
        f32_prompts_on_gemv_(
            w.type == kernels::WeightType::F32 && runtime_kernels().f32_prompts_on_batch_gemv &&
            !(precision == kernels::MatmulPrecision::BF16 && !kernels::matrix_units().empty())),
        matmul_(w.type == kernels::WeightType::Q8_0 || tile_prompts_ || f32_prompts_on_gemv_
                    ? std::nullopt
                    : std::make_optional<kernels::Matmul>(in_width, out_width, w, bias, post,
                                                          kernels::matmul_machine_blocks(),
                                                          precision)) {}

  void run(const ExecContext& ctx, const std::vector<Tensor>& inputs,
           const Tensor& out) const override {
    const Tensor& in = inputs[0];
    const float* residual = inputs.size() > 1 ? inputs[1].data : nullptr;
    const Input input = input_of(ctx, out.rows);
    if (input == Input::Matmul) {
      matmul_->run(out.rows, in.data, out.data, ctx.n_threads, residual,
                   ctx.scratch.local<kernels::MatmulScratch>());
      return;
    }
    const bool tile_prompt = out.rows != 1 && ctx.one_sequence() && tile_prompts_;
    reserve_input(ctx, out.rows, input);
    products(ctx, tile_prompt ? bf16_prompt_weights(ctx) : w_, input, in, residual, out,
             CallSplit{ctx.n_threads});
  }

  PreparedInput prepares_input(const ExecContext& ctx, std::size_t rows) const override {
    switch (input_of(ctx, rows)) {
      case Input::Quantized:
        return PreparedInput::Q8_0;
      case Input::Rounded:
        return PreparedInput::Bf16;
      default:
        return PreparedInput::None;
    }
  }

  // A decoded token, or a batch's (a token per sequence), in one region: run()'s split.
  void prepare(const ExecContext& ctx, std::size_t rows) const override {
    reserve_input(ctx, rows, batch_input(rows));
  }
  void run_in_team(const ExecContext& ctx, const std::vector<Tensor>& inputs, const Tensor& out,
                   Team team) const override {
    const float* residual = inputs.size() > 1 ? inputs[1].data : nullptr;
    products(ctx, w_, batch_input(out.rows), inputs[0], residual, out, MemberSplit{team});
  }
  // Rows taken as they are: each member reads the input and writes its own output columns (one
  // token's row quantized or rounded in its own scratch).
  bool touches_only_its_tensors(std::size_t rows) const override {
    return batch_input(rows) == Input::AsIs;
  }

 private:
  // What the products read of the input rows: the rows as they are (f32 weights; one token's
  // row, which each thread quantizes or rounds itself, as it needs), or all rows prepared once,
  // split among the threads: quantized to 8-bit blocks (q8_0) or rounded to bf16 (bf16 weights
  // on the matrix units). Every thread preparing all of a batch's rows took 8% of a step of 16
  // (docs/benchmarks.md). Or a prompt's product is oneDNN's (Matmul), which takes the rows as
  // they are.
  enum class Input { AsIs, Quantized, Rounded, Matmul };

  // A call's, of `rows` rows.
  Input input_of(const ExecContext& ctx, std::size_t rows) const {
    if (rows == 1 || !ctx.one_sequence()) return batch_input(rows);
    // A prompt. Of q8_0 weights: its rows as a batch's, integer products of 8-bit blocks (VNNI
    // where the CPU has it), faster than widening W to f32 for oneDNN, and each row the bits it
    // gets decoded alone; or, on a table with gemv_prompt_q8_0_bf16, from kQ8TilePromptRows rows
    // on, its rows rounded to bf16 by the weights dequantized to bf16 on the tiles. On a table
    // whose bf16 batch GEMV runs on tiles, of a few rows with bf16 weights on the units (the Matmul
    // would widen W to f32 for them), or of f32 weights on a table whose f32 batch GEMV takes
    // prompts: the batch GEMV, with the bits of each row decoded alone (an f32 model at
    // MatmulPrecision::BF16 on tiles: those of its bf16 file).
    if (w_.type == kernels::WeightType::Q8_0) {
      return q8_tile_prompts_ && rows >= kQ8TilePromptRows ? Input::Rounded : Input::Quantized;
    }
    if (tile_prompts_) return Input::Rounded;
    if (f32_prompts_on_gemv_) return Input::AsIs;
    if (rounds_to_bf16_ && rows <= kernels::kMatmulRuntimeRows) return Input::Rounded;
    return Input::Matmul;
  }

  // A decode's: a batch's rows are prepared once where the weights need it.
  Input batch_input(std::size_t rows) const {
    if (rows == 1) return Input::AsIs;
    if (w_.type == kernels::WeightType::Q8_0) return Input::Quantized;
    return rounds_to_bf16_ ? Input::Rounded : Input::AsIs;
  }

  // The shared prepared rows, sized before any thread writes them (Scratch::shared).
  void reserve_input(const ExecContext& ctx, std::size_t rows, Input input) const {
    if (input == Input::Quantized) {
      ctx.scratch.shared<SharedQuantizedInput>().reserve(rows * in_width_);
    } else if (input == Input::Rounded) {
      ctx.scratch.shared<SharedRoundedInput>().reserve(rows * kernels::bf16_packed_cols(in_width_));
    }
  }

  // Matrix-vector products, bound by reading the weights once for every row (a sequence's token,
  // or a prompt's row on the batch GEMV), each row the bits it gets decoded alone: the rows
  // prepared as `input` says, then each thread's range of output columns.
  template <class Split>
  void products(const ExecContext& ctx, const kernels::WeightMatrix& w, Input input,
                const Tensor& in, const float* residual, const Tensor& out,
                const Split& split) const {
    // Prepared by the node before (ExecContext::input_prepared), or here.
    const QuantizedInput* quantized = nullptr;
    const RoundedInput* rounded = nullptr;
    if (input == Input::Quantized) {
      SharedQuantizedInput& x = ctx.scratch.shared<SharedQuantizedInput>();
      if (!ctx.input_prepared) {
        split.ranges(
            out.rows, 1, in_width_ * kPrepareWorkPerValue, [&](std::size_t begin, std::size_t end) {
              ctx.kernels.quantize_q8_0(
                  (end - begin) * in_width_, in.row(begin), x.values.data() + begin * in_width_,
                  x.scales.data() + begin * in_width_ / kernels::kQ8BlockSize);
            });
        split.sync();
      }
      quantized = &x;
    } else if (input == Input::Rounded) {
      SharedRoundedInput& x = ctx.scratch.shared<SharedRoundedInput>();
      if (!ctx.input_prepared) {
        split.ranges(out.rows, 1, in_width_ * kPrepareWorkPerValue,
                     [&](std::size_t begin, std::size_t end) {
                       round_rows_to_bf16(ctx.kernels, in, begin, end, x.values.data());
                     });
        split.sync();
      }
      rounded = &x;
    }
    split.grid(out.rows, kVectorAlign, input_row_bytes(input), out_width_, kRowAlign,
               row_bytes(w.type), kVectorsPerPass, in_width_,
               [&](std::size_t r0, std::size_t r1, std::size_t begin, std::size_t end) {
                 gemv_rows(ctx, w, in, quantized, rounded, residual, out, r0, r1, begin, end);
               });
  }

  // What a part of products() reads again for each other part: a row of its input, as `input`
  // has it, and a column of its weights (a weight row of in_width_ values), each row_bytes.
  std::size_t input_row_bytes(Input input) const {
    if (input == Input::Quantized) return row_bytes(kernels::WeightType::Q8_0);
    return row_bytes(input == Input::Rounded ? kernels::WeightType::BF16
                                             : kernels::WeightType::F32);
  }
  std::size_t row_bytes(kernels::WeightType type) const {
    if (type == kernels::WeightType::Q8_0) return in_width_ + in_width_ / kernels::kQ8BlockSize * 4;
    return in_width_ * (type == kernels::WeightType::BF16 ? 2 : 4);
  }

  // The weights of a prompt on the tiles: bf16 ones as they are, f32 ones rounded to bf16 into a
  // copy that the first such prompt makes (as the Matmul made its copy for oneDNN: a model that
  // only decodes holds none).
  const kernels::WeightMatrix& bf16_prompt_weights(const ExecContext& ctx) const {
    if (w_.type == kernels::WeightType::BF16) return w_;
    std::call_once(bf16_copy_once_, [&] {
      std::vector<uint16_t> rows(out_width_ * in_width_);
      kernels::unpack_f32_rounded_to_bf16(out_width_, in_width_, w_.f32_rows(0, in_width_),
                                          rows.data());
      bf16_copy_ = kernels::PackedWeights(kernels::PackedWeights::bf16_bytes(out_width_, in_width_),
                                          ctx.n_threads);
      bf16_copy_matrix_ = bf16_copy_.add_bf16(out_width_, in_width_, rows.data());
    });
    return bf16_copy_matrix_;
  }

  // Output columns [begin, end) of rows [r0, r1), each row alone: bias, activation and residual
  // while they are cached. w: w_, or the bf16 weights of a prompt on the tiles; quantized: q8_0
  // weights, the rows of `in` in 8-bit blocks already, or null; rounded: bf16 weights on the
  // units, or a q8_0 prompt on the bf16 tiles, the rows of `in` rounded to bf16 already, or null.
  void gemv_rows(const ExecContext& ctx, const kernels::WeightMatrix& w_in, const Tensor& in,
                 const QuantizedInput* quantized, const RoundedInput* rounded,
                 const float* residual, const Tensor& out, std::size_t r0, std::size_t r1,
                 std::size_t begin, std::size_t end) const {
    const std::size_t n = end - begin;
    const std::size_t m = r1 - r0;
    const float* bias = bias_ ? bias_ + begin : nullptr;
    float* y = out.row(r0) + begin;
    const kernels::KernelTable& k = ctx.kernels;
    switch (w_in.type) {
      case kernels::WeightType::F32: {
        const float* w = w_in.f32_rows(begin, in_width_);
        if (out.rows == 1) {
          k.gemv_f32(n, in_width_, w, in.data, bias, y);
          break;
        }
        for (std::size_t r = r0; r < r1; r += kVectorsPerPass) {
          const std::size_t rows = std::min(kVectorsPerPass, r1 - r);
          k.gemv_batch_f32(n, in_width_, w, rows, in.row(r), in_width_, bias, out.row(r) + begin,
                           out_width_);
        }
        break;
      }
      case kernels::WeightType::BF16: {
        const uint16_t* w = w_in.bf16_rows(begin, in_width_);
        if (rounds_to_bf16_ || rounded != nullptr) {
          // One token's row each thread rounds itself, as q8_0 quantizes it.
          const std::size_t stride = kernels::bf16_packed_cols(in_width_);
          if (rounded == nullptr) {
            RoundedInput& own = ctx.scratch.local<RoundedInput>();
            own.reserve(out.rows * stride);
            round_rows_to_bf16(k, in, 0, out.rows, own.values.data());
            rounded = &own;
          }
          const uint16_t* xb = rounded->values.data() + r0 * stride;
          if (out.rows == 1) {
            k.gemv_bf16_bf16(n, in_width_, w, xb, bias, y);
          } else {
            k.gemv_batch_bf16_bf16(n, in_width_, w, m, xb, stride, bias, y, out_width_);
          }
          break;
        }
        if (out.rows == 1) {
          k.gemv_bf16(n, in_width_, w, in.data, bias, y);
        } else {
          k.gemv_batch_bf16(n, in_width_, w, m, in.row(r0), in_width_, bias, y, out_width_);
        }
        break;
      }
      case kernels::WeightType::Q8_0: {
        const int8_t* wq = w_in.q8_rows(begin, in_width_);
        const float* wd = w_in.q8_scales(begin, in_width_);
        if (rounded != nullptr) {  // a prompt on the bf16 tiles
          const std::size_t stride = kernels::bf16_packed_cols(in_width_);
          k.gemv_prompt_q8_0_bf16(n, in_width_, wq, wd, m, rounded->values.data() + r0 * stride,
                                  stride, bias, y, out_width_);
          break;
        }
        // Integer dot products need the activations in 8-bit blocks too: one token's row each
        // thread quantizes itself rather than wait for one that does.
        if (quantized == nullptr) {
          QuantizedInput& own = ctx.scratch.local<QuantizedInput>();
          own.reserve(out.rows * in_width_);
          k.quantize_q8_0(out.rows * in_width_, in.data, own.values.data(), own.scales.data());
          quantized = &own;
        }
        const std::size_t blocks = in_width_ / kernels::kQ8BlockSize;
        for (std::size_t r = r0; r < r1; r += kVectorsPerPass) {
          const std::size_t rows = std::min(kVectorsPerPass, r1 - r);
          const int8_t* xq = quantized->values.data() + r * in_width_;
          const float* xd = quantized->scales.data() + r * blocks;
          if (rows == 1) {
            k.gemv_q8_0(n, in_width_, wq, wd, xq, xd, bias, out.row(r) + begin);
          } else {
            k.gemv_batch_q8_0(n, in_width_, wq, wd, rows, xq, xd, bias, out.row(r) + begin,
                              out_width_);
          }
        }
        break;
      }
    }
    for (std::size_t r = r0; r < r1; ++r) {
      float* y = out.row(r) + begin;
      if (post_ == kernels::PostOp::Relu) ctx.kernels.relu_f32(n, y);
      if (post_ == kernels::PostOp::Gelu) ctx.kernels.gelu_f32(n, y);
      if (post_ == kernels::PostOp::ReluSquared) ctx.kernels.relu_squared_f32(n, y);
      if (residual) ctx.kernels.add_f32(n, residual + r * out_width_ + begin, y);
    }
  }

  std::size_t in_width_, out_width_;
  kernels::WeightMatrix w_;
  const float* bias_;
  kernels::PostOp post_;
  // bf16 weights where prompts run on the matrix units (kernels::matrix_units()): every product
  // takes its input rounded to bf16, decode and batches too (KernelTable::gemv_bf16_bf16), so
  // that a token's logits do not depend on whether it came in a prompt.
  bool rounds_to_bf16_;
  // Prompts of bf16 weights, and of f32 ones at MatmulPrecision::BF16, take the batch GEMV on
  // tiles (KernelTable::bf16_batch_on_tiles) where the CPU has them.
  bool tile_prompts_;
  // Prompts of q8_0 weights from kQ8TilePromptRows rows on take KernelTable::
  // gemv_prompt_q8_0_bf16 where the table has it and the matrix units are not switched off.
  bool q8_tile_prompts_;
  // Prompts of f32 weights multiplied in f32 take the f32 batch GEMV
  // (KernelTable::f32_prompts_on_batch_gemv) where the table says so.
  bool f32_prompts_on_gemv_;
  mutable std::once_flag bf16_copy_once_;
  mutable kernels::PackedWeights bf16_copy_;  // f32 weights' copy for tile_prompts_
  mutable kernels::WeightMatrix bf16_copy_matrix_;
  std::optional<kernels::Matmul> matmul_;  // the other prompts of f32 and bf16 weights
};

}  // namespace

std::unique_ptr<Op> make_linear_op(std::size_t in_width, std::size_t out_width,
                                   kernels::WeightMatrix w, const float* bias, kernels::PostOp post,
                                   kernels::MatmulPrecision precision) {
  return std::make_unique<LinearOp>(in_width, out_width, w, bias, post, precision);
}

}  // namespace aft
