// oneDNN matmul with W read in place: PyTorch's [N, K] row-major weights are the {K, N} matrix with
// strides {1, K} (format tag ba), and a block of output columns [c, c + width) is the contiguous
// slab of rows c.. of W. Measured with oneDNN 2.6 on AVX-512, K x N of a d = 512 model: a
// primitive with a runtime M runs gemm:jit, ~2x faster than the alternative at M = 1 and even at
// M = 4; a primitive built for a fixed M runs brgemm (brg:avx512_core), 1.3-2.3x faster at M =
// 16..64 and 1.1-1.2x from 128 on. Building one costs 0.15-0.8 ms (JIT), ~10 us when oneDNN's
// primitive cache has it. So: the runtime-M primitive for small M, and a small LRU cache of
// fixed-M primitives for larger M.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <dnnl.hpp>

#include "kernels/bf16.h"
#include "kernels/first_exception.h"
#include "kernels/kernels.h"
#include "kernels/onednn_engine.h"
#include "kernels/packed_weights.h"
#include "kernels/single_threaded_onednn.h"
#include "kernels/thread_team.h"

namespace aft::kernels {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;
constexpr memory::data_type kBf16 = memory::data_type::bf16;

constexpr std::size_t kMaxDim = 0x7fffffff;
// Fixed-M primitives kept per Matmul (prefill lengths vary; older ones are evicted).
constexpr std::size_t kCacheCapacity = 8;
// Below this many multiply-adds per thread, waking another thread costs more than it saves.
constexpr std::size_t kMinMultiplyAddsPerThread = 1 << 16;

[[noreturn]] void rethrow(const dnnl::error& e, const char* what, std::size_t k, std::size_t n) {
  if (e.status == dnnl_out_of_memory) throw std::bad_alloc();
  throw std::runtime_error("aft matmul (K=" + std::to_string(k) + ", N=" + std::to_string(n) +
                           "): oneDNN failed to " + what + ": " + e.what() + " (status " +
                           std::to_string(static_cast<int>(e.status)) + ")");
}

memory::dim dim(std::size_t v) { return static_cast<memory::dim>(v); }

struct Primitive {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
  bool bf16 = false;  // bf16 x bf16 -> f32 on the matrix units, weights in pd's layout
};

// A bf16 x bf16 -> f32 product of M = rows and N = width; weights in `layout`, or (a zero desc) in
// the layout oneDNN prefers. Throws dnnl::error where oneDNN has no implementation.
Primitive create_bf16_product(std::size_t rows, std::size_t k, std::size_t width, bool bias,
                              const dnnl::primitive_attr& attr, const memory::desc& layout = {}) {
  const memory::desc src({dim(rows), dim(k)}, kBf16, Tag::ab);
  const memory::desc weights =
      layout.is_zero() ? memory::desc({dim(k), dim(width)}, kBf16, Tag::any) : layout;
  const memory::desc dst({dim(rows), dim(width)}, kF32, Tag::ab);
  const dnnl::matmul::desc desc =
      bias ? dnnl::matmul::desc(src, weights, memory::desc({1, dim(width)}, kF32, Tag::ab), dst)
           : dnnl::matmul::desc(src, weights, dst);
  SingleThreadedOneDnn single;
  dnnl::matmul::primitive_desc pd(desc, attr, onednn_cpu_engine());
  return Primitive{pd, dnnl::matmul(pd), true};
}

// oneDNN's implementation of a bf16 product on this CPU, or "" where it has none.
std::string onednn_bf16_product() {
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return create_bf16_product(64, 512, kMatmulBlockColumns, true, attr).pd.impl_info_str();
  } catch (const dnnl::error&) {
    return "";
  }
}

// The primitives of one M: full blocks, and the narrower last block when N is not a multiple of
// the block width.
struct BlockPrimitives {
  Primitive full;
  Primitive tail;
};

// xb[begin, end) = x[begin, end) rounded to bf16: the SIMD table's round_bf16 (the same bits as
// f32_to_bf16) over whole chunks, which it pads with nothing, the tail one value at a time: a
// scalar loop over the rows took 6.6% of a bf16 pp512 (docs/benchmarks.md).
void round_share_to_bf16(const float* x, uint16_t* xb, std::size_t begin, std::size_t end) {
  const std::size_t whole = (end - begin) / kBf16ChunkCols * kBf16ChunkCols;
  if (whole > 0) active_kernels().round_bf16(whole, x + begin, xb + begin);
  for (std::size_t i = begin + whole; i < end; ++i) xb[i] = f32_to_bf16(x[i]);
}

}  // namespace

struct Matmul::Impl {
  std::size_t k;
  std::size_t n;
  WeightMatrix w;
  float* bias;         // oneDNN takes non-const handles; it never writes inputs.
  std::size_t blocks;  // threads the work is cut for
  dnnl::primitive_attr attr;
  BlockPrimitives runtime_m;
  // bf16 weights (and f32 ones at MatmulPrecision::BF16): products of more than kMatmulRuntimeRows
  // rows run on the matrix units, every row block of them, from a copy of W in oneDNN's bf16
  // layout made at the first such product.
  bool units = false;
  std::mutex packing;               // held while the copy is made
  std::atomic<bool> packed{false};  // the copy is complete
  std::vector<char> packed_bytes;   // column block c at c * full layout's size
  memory::desc full_layout, tail_layout;

  std::mutex mutex;            // guards the cache below
  std::list<std::size_t> lru;  // most recently used M first
  std::unordered_map<std::size_t, std::pair<BlockPrimitives, std::list<std::size_t>::iterator>>
      cache;

  std::size_t full_width() const { return std::min(n, kMatmulBlockColumns); }
  std::size_t tail_width() const { return n % kMatmulBlockColumns; }

  // rows == 0 builds a runtime-M primitive. The destination is a dense [M, width] block: with
  // rows n apart (the block's columns of the whole output) oneDNN 2.6 gives up brgemm for gemm.
  Primitive create(std::size_t rows, std::size_t width) const {
    const memory::dim m = rows == 0 ? DNNL_RUNTIME_DIM_VAL : dim(rows);
    const memory::desc src({m, dim(k)}, kF32, Tag::ab);
    const memory::desc weights({dim(k), dim(width)}, kF32, Tag::ab);
    const memory::desc dst({m, dim(width)}, kF32, Tag::ab);
    const dnnl::matmul::desc desc =
        bias ? dnnl::matmul::desc(src, weights, memory::desc({1, dim(width)}, kF32, Tag::ab), dst)
             : dnnl::matmul::desc(src, weights, dst);
    SingleThreadedOneDnn single;
    dnnl::matmul::primitive_desc pd(desc, attr, onednn_cpu_engine());
    return Primitive{pd, dnnl::matmul(pd)};
  }

  // A bf16 product reading the copy of W (the layouts of the copy, set before), or where oneDNN
  // has no good implementation for that layout and this M, one that reorders its block per call.
  Primitive create_on_units(std::size_t rows, std::size_t width) const {
    try {
      Primitive p = create_bf16_product(rows, k, width, bias != nullptr, attr,
                                        width == full_width() ? full_layout : tail_layout);
      if (std::string(p.pd.impl_info_str()).rfind("ref", 0) != 0) return p;
    } catch (const dnnl::error&) {
    }
    return create_bf16_product(rows, k, width, bias != nullptr, attr);
  }

  BlockPrimitives create_blocks(std::size_t rows) const {
    if (units && rows != 0) {
      BlockPrimitives p{create_on_units(rows, full_width()), {}};
      if (n > kMatmulBlockColumns && tail_width() != 0)
        p.tail = create_on_units(rows, tail_width());
      return p;
    }
    BlockPrimitives p{create(rows, full_width()), {}};
    if (n > kMatmulBlockColumns && tail_width() != 0) p.tail = create(rows, tail_width());
    return p;
  }

  // on_units: a row block of a product on the matrix units (every row count a fixed-M primitive).
  BlockPrimitives get(std::size_t m, bool on_units) {
    if (m <= kMatmulRuntimeRows && !on_units) return runtime_m;
    std::lock_guard<std::mutex> lock(mutex);
    auto found = cache.find(m);
    if (found != cache.end()) {
      lru.splice(lru.begin(), lru, found->second.second);
      return found->second.first;
    }
    BlockPrimitives p = create_blocks(m);
    if (cache.size() == kCacheCapacity) {
      cache.erase(lru.back());
      lru.pop_back();
    }
    lru.push_front(m);
    cache.emplace(m, std::make_pair(p, lru.begin()));
    return p;  // handles: stay valid even if evicted while another thread runs them
  }

  static_assert(kMatmulBlockColumns % kBf16GroupRows == 0 &&
                    kMatmulBlockColumns % kF32GroupRows == 0,
                "a column block is whole groups of packed weights");
  // Rows [column, column + width) of W as f32 in `widened`, [K, width] row-major, unless it holds
  // them already: packed f32 and bf16 unpacked as columns (exact, the same bits on every ISA; a
  // group's column is a copy, or a pair's line widened). Where the previous block's widening
  // failed (out of memory), the call fails: what `widened` holds then only has to be in bounds.
  float* f32_weights(std::size_t column, std::size_t width, std::vector<float>& widened,
                     bool already_widened) const {
    if (already_widened && widened.size() >= width * k) return widened.data();
    if (widened.size() < width * k) widened.resize(width * k);
    if (w.type == WeightType::F32) {
      unpack_f32_columns(column, width, k, w.f32_rows(0, k), widened.data());
    } else {
      unpack_bf16_columns(column, width, k, w.bf16_rows(0, k), widened.data());
    }
    return widened.data();
  }

  // Rows [column, column + width) of W as bf16 in p's layout, in scratch.packed: widened, then
  // reordered (exact both ways), unless the slot holds them in that layout already.
  memory bf16_weights(const Primitive& p, std::size_t column, std::size_t width,
                      MatmulScratch::Slot& scratch, bool already_widened) const {
    dnnl::engine& engine = onednn_cpu_engine();
    const memory::desc layout = p.pd.weights_desc();
    const bool tail = width != full_width();
    if (layout == (tail ? tail_layout : full_layout)) {
      return memory(layout, engine,
                    const_cast<char*>(packed_bytes.data()) +
                        column / kMatmulBlockColumns * full_layout.get_size());
    }
    if (scratch.packed.size() < layout.get_size()) scratch.packed.resize(layout.get_size());
    const memory packed(layout, engine, scratch.packed.data());
    if (already_widened && scratch.packed_for == p.pd.get()) return packed;
    dnnl::stream stream(engine);
    reorder_into(column, width, scratch.widened, packed, stream);
    stream.wait();
    scratch.packed_for = p.pd.get();
    return packed;
  }

  // Rows [column, column + width) of W as f32 values that bf16 holds exactly, in `widened`: bf16
  // weights widened, f32 ones rounded (the engine's rounding, not oneDNN's, which may flush
  // subnormals), then reordered into `to`, bf16 in oneDNN's layout (exact).
  void reorder_into(std::size_t column, std::size_t width, std::vector<float>& widened,
                    const memory& to, const dnnl::stream& stream) const {
    float* rows = f32_weights(column, width, widened, false);
    if (w.type == WeightType::F32) {
      for (std::size_t i = 0; i < width * k; ++i) rows[i] = bf16_to_float(f32_to_bf16(rows[i]));
    }
    memory from({{dim(k), dim(width)}, kF32, Tag::ab}, onednn_cpu_engine(), rows);
    dnnl::reorder(from, to).execute(stream, from, const_cast<memory&>(to));
  }

  // The layouts of the copy of W (those of an M = 64 product; the primitives of other M are
  // created with them) and its storage. Under `packing`, before the copy is made.
  void plan_copy() {
    full_layout = create_bf16_product(64, k, full_width(), bias != nullptr, attr).pd.weights_desc();
    if (n > kMatmulBlockColumns && tail_width() != 0) {
      tail_layout =
          create_bf16_product(64, k, tail_width(), bias != nullptr, attr).pd.weights_desc();
    }
    const std::size_t column_blocks = (n + kMatmulBlockColumns - 1) / kMatmulBlockColumns;
    packed_bytes.resize(column_blocks * full_layout.get_size());
  }

  // The copy of W in the layouts plan_copy chose, by the threads of `member`'s team.
  void pack(TeamMember member, MatmulScratch::Slot& scratch) {
    const std::size_t column_blocks = (n + kMatmulBlockColumns - 1) / kMatmulBlockColumns;
    dnnl::engine& engine = onednn_cpu_engine();
    dnnl::stream stream(engine);
    for (std::size_t c = member.share_begin(column_blocks); c < member.share_end(column_blocks);
         ++c) {
      const std::size_t column = c * kMatmulBlockColumns;
      const std::size_t width = std::min(kMatmulBlockColumns, n - column);
      const memory::desc& layout = width == full_width() ? full_layout : tail_layout;
      reorder_into(column, width, scratch.widened,
                   memory(layout, engine, packed_bytes.data() + c * full_layout.get_size()),
                   stream);
    }
    stream.wait();
  }

  // Output columns [column, column + width) of rows [0, m): one single-threaded oneDNN call into
  // the thread's scratch, then copied (or added to the residual) to its place in y. x_bf16: x's
  // rows rounded to bf16, for a bf16 primitive.
  void run_block(const Primitive& p, std::size_t m, std::size_t column, std::size_t width,
                 const float* x, const uint16_t* x_bf16, float* y, const float* residual,
                 MatmulScratch::Slot& scratch, bool already_widened) const {
    std::vector<float>& block = scratch.block;
    if (block.size() < m * width) block.resize(m * width);
    dnnl::engine& engine = onednn_cpu_engine();
    const memory src =
        p.bf16 ? memory({{dim(m), dim(k)}, kBf16, Tag::ab}, engine, const_cast<uint16_t*>(x_bf16))
               : memory({{dim(m), dim(k)}, kF32, Tag::ab}, engine, const_cast<float*>(x));
    const memory weights =
        p.bf16 ? bf16_weights(p, column, width, scratch, already_widened)
               : memory({{dim(k), dim(width)}, kF32, Tag::ab}, engine,
                        f32_weights(column, width, scratch.widened, already_widened));
    const memory dst({{dim(m), dim(width)}, kF32, Tag::ab}, engine, block.data());
    const memory scratchpad(p.pd.scratchpad_desc(), engine);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_WEIGHTS, weights},
                                         {DNNL_ARG_DST, dst},
                                         {DNNL_ARG_SCRATCHPAD, scratchpad}};
    if (bias) {
      args.emplace(DNNL_ARG_BIAS, memory({{1, dim(width)}, kF32, Tag::ab}, engine, bias + column));
    }
    dnnl::stream stream(engine);
    p.matmul.execute(stream, args);
    stream.wait();
    for (std::size_t r = 0; r < m; ++r) {
      const float* from = block.data() + r * width;
      float* to = y + r * n + column;
      if (residual == nullptr) {
        std::memcpy(to, from, width * sizeof(float));
        continue;
      }
      const float* skip = residual + r * n + column;
      for (std::size_t c = 0; c < width; ++c) to[c] = skip[c] + from[c];
    }
  }
};

Matmul::Matmul(std::size_t k, std::size_t n, WeightMatrix w, const float* bias, PostOp post,
               std::size_t blocks, MatmulPrecision precision) {
  // oneDNN 2.6 crashes (SIGFPE) rather than failing on absurd sizes such as K = 2^40.
  if (k == 0 || n == 0 || k > kMaxDim || n > kMaxDim || w.data == nullptr ||
      w.type == WeightType::Q8_0) {
    throw std::invalid_argument(
        "aft matmul: K and N must be in [1, 2^31), W non-null, f32 or bf16 (q8_0 products are the "
        "integer GEMV kernels') (K=" +
        std::to_string(k) + ", N=" + std::to_string(n) + ")");
  }
  impl_ = std::make_unique<Impl>();
  impl_->k = k;
  impl_->n = n;
  impl_->w = w;
  impl_->bias = const_cast<float*>(bias);
  impl_->blocks = std::max<std::size_t>(blocks, 1);
  impl_->units = (w.type == WeightType::BF16 ||
                  (w.type == WeightType::F32 && precision == MatmulPrecision::BF16)) &&
                 !matrix_units().empty();
  try {
    dnnl::post_ops ops;
    if (post == PostOp::Relu || post == PostOp::ReluSquared)
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    if (post == PostOp::ReluSquared)
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_square, 0.0f, 0.0f);
    if (post == PostOp::Gelu) {
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    }
    impl_->attr.set_post_ops(ops);
    // A scratchpad per call instead of the library's shared one: concurrent blocks stay
    // independent.
    impl_->attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    impl_->runtime_m = impl_->create_blocks(0);
  } catch (const dnnl::error& e) {
    rethrow(e, "create the primitive", k, n);
  }
}

Matmul::~Matmul() = default;
Matmul::Matmul(Matmul&&) noexcept = default;
Matmul& Matmul::operator=(Matmul&&) noexcept = default;

void Matmul::run(std::size_t m, const float* x, float* y, int n_threads,
                 const float* residual) const {
  MatmulScratch scratch;
  run(m, x, y, n_threads, residual, scratch);
}

void Matmul::run(std::size_t m, const float* x, float* y, int n_threads, const float* residual,
                 MatmulScratch& scratch) const {
  if (m == 0) return;
  Impl& impl = *impl_;
  if (m > kMaxDim) {
    throw std::runtime_error("aft matmul (K=" + std::to_string(impl.k) +
                             ", N=" + std::to_string(impl.n) + "): M=" + std::to_string(m) +
                             " is beyond oneDNN's dimension limit (2^31 - 1)");
  }
  const std::string what = "run with M=" + std::to_string(m);
  const bool on_units = impl.units && m > kMatmulRuntimeRows;
  std::unique_lock<std::mutex> pack_lock(impl.packing, std::defer_lock);  // held while packing
  const std::size_t column_blocks = (impl.n + kMatmulBlockColumns - 1) / kMatmulBlockColumns;
  const std::size_t block_rows = matmul_block_rows(m, impl.n, impl.blocks);
  const std::size_t row_blocks = (m + block_rows - 1) / block_rows;
  const std::size_t last_rows = m - (row_blocks - 1) * block_rows;
  BlockPrimitives whole, last;
  try {
    if (on_units && !impl.packed.load(std::memory_order_acquire)) pack_lock.lock();
    if (pack_lock.owns_lock() && !impl.packed.load(std::memory_order_relaxed)) {
      impl.plan_copy();
    } else if (pack_lock.owns_lock()) {
      pack_lock.unlock();
    }
    whole = impl.get(block_rows, on_units);
    last = last_rows == block_rows ? whole : impl.get(last_rows, on_units);
  } catch (const dnnl::error& e) {
    rethrow(e, what.c_str(), impl.k, impl.n);
  }
  const std::size_t blocks = row_blocks * column_blocks;
  const std::size_t worth =
      std::max<std::size_t>(1, m * impl.k * impl.n / kMinMultiplyAddsPerThread);
  const int threads =
      static_cast<int>(std::min({static_cast<std::size_t>(std::max(n_threads, 1)), blocks, worth}));
  scratch.reserve_threads(static_cast<std::size_t>(threads));
  // x rounded to bf16 (to nearest even), shared by the blocks that run on the matrix units.
  const bool any_bf16 = whole.full.bf16 || last.full.bf16;
  std::vector<uint16_t>& x_bf16 = scratch.x_bf16;
  if (any_bf16 && x_bf16.size() < m * impl.k) x_bf16.resize(m * impl.k);
  FirstException error;
  ThreadTeam& team = ThreadTeam::of_this_thread();
  const bool packing = pack_lock.owns_lock();
  team.run(threads, [&](TeamMember member) {
    // Each block is one thread's: keep oneDNN from starting threads of its own.
    const SingleThreadedOneDnn single;
    if (packing) {
      error.run([&] { impl.pack(member, scratch.slot(static_cast<std::size_t>(member.id))); });
      team.barrier(member);
    }
    if (any_bf16) {
      round_share_to_bf16(x, x_bf16.data(), member.share_begin(m) * impl.k,
                          member.share_end(m) * impl.k);
      team.barrier(member);
    }
    MatmulScratch::Slot& slot = scratch.slot(static_cast<std::size_t>(member.id));
    // Column-major order: a thread's share runs down a column block's rows, so it reads its
    // slab of W while it is still in cache (and widens it once), and the threads share W rather
    // than each read it all.
    const std::size_t first = member.share_begin(blocks);
    for (std::size_t b = first; b < member.share_end(blocks); ++b) {
      const std::size_t row = b % row_blocks * block_rows;
      const std::size_t rows = std::min(block_rows, m - row);
      const std::size_t column = b / row_blocks * kMatmulBlockColumns;
      const std::size_t width = std::min(kMatmulBlockColumns, impl.n - column);
      const BlockPrimitives& p = rows == block_rows ? whole : last;
      error.run([&] {
        // x's bf16 rows exist only when some block runs in bf16 (else x_bf16's data may be null).
        const uint16_t* rows_bf16 = any_bf16 ? x_bf16.data() + row * impl.k : nullptr;
        impl.run_block(width == impl.full_width() ? p.full : p.tail, rows, column, width,
                       x + row * impl.k, rows_bf16, y + row * impl.n,
                       residual ? residual + row * impl.n : nullptr, slot, b != first && row != 0);
      });
    }
  });
  if (packing) impl.packed.store(!error.failed(), std::memory_order_release);
  try {
    error.rethrow();
  } catch (const dnnl::error& e) {
    rethrow(e, what.c_str(), impl.k, impl.n);
  }
}

MatrixUnitChoice choose_matrix_units(const char* setting, const std::string& onednn_bf16,
                                     bool bf16_outpaces_fma) {
  const std::string asked = setting == nullptr ? "" : setting;
  const bool off = asked == "off" || asked == "0";
  const bool on = asked == "on" || asked == "1";
  std::string warning;
  if (!off && !on && !asked.empty() && asked != "auto") {
    warning = "AFT_MATRIX_UNITS=" + asked + " is unknown (expected on, off or auto); using auto";
  }
  // A reference loop, or a conversion to f32 inside oneDNN, is slower than the engine's widening.
  const bool amx = onednn_bf16.find("amx") != std::string::npos;
  const bool avx512_bf16 = onednn_bf16.find("avx512_core_bf16") != std::string::npos;
  const bool units = (amx || avx512_bf16) && onednn_bf16.rfind("ref", 0) != 0;
  if (off || !units) {
    if (on) warning = "AFT_MATRIX_UNITS=on: this CPU has no AMX or AVX512-BF16; using f32";
    return {"", warning, ""};
  }
  if (!amx && !on && !bf16_outpaces_fma) return {"", warning, onednn_bf16};
  return {onednn_bf16, warning, ""};
}

const MatrixUnitChoice& active_matrix_unit_choice() {
  static const MatrixUnitChoice choice = choose_matrix_units(
      std::getenv("AFT_MATRIX_UNITS"), onednn_bf16_product(), bf16_dot_outpaces_fma());
  return choice;
}

const std::string& matrix_units() { return active_matrix_unit_choice().units; }

const std::string& matrix_unit_kernels() {
  static const std::string name = matrix_units().empty() ? std::string()
                                  : active_kernels().bf16_batch_on_tiles
                                      ? std::string("aft's AMX tile kernels (amx_bf16, amx_int8)")
                                      : matrix_units() + " (oneDNN)";
  return name;
}

std::size_t matmul_machine_blocks() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return std::clamp<std::size_t>(cpus, 1, 256);
}

std::size_t matmul_block_rows(std::size_t m, std::size_t n, std::size_t blocks) {
  const std::size_t column_blocks = (n + kMatmulBlockColumns - 1) / kMatmulBlockColumns;
  if (column_blocks < kNarrowBelowColumnBlocks) return std::min(m, kMatmulBlockRows);
  if (column_blocks >= blocks) return m;
  // Each block's oneDNN call prepares its slab of W anew: measured at 1 thread on AVX2, 64-row
  // blocks cost a 512-wide layer 3%, 128-row blocks nothing measurable.
  const std::size_t unit = 2 * kMatmulBlockRows;
  const std::size_t row_blocks = (blocks + column_blocks - 1) / column_blocks;
  const std::size_t units = (m + row_blocks * unit - 1) / (row_blocks * unit);
  return std::min(m, std::max<std::size_t>(units, 1) * unit);
}

std::string Matmul::implementation() const {
  // A representative prefill M for the fixed-M path, made for this query (left out of the cache:
  // before the first product on the units its layouts are not planned yet). On the units the
  // layouts are read as run() reads them: under the packing lock until the copy is complete.
  constexpr std::size_t kLargeM = 64;
  std::unique_lock<std::mutex> pack_lock(impl_->packing, std::defer_lock);
  if (impl_->units && !impl_->packed.load(std::memory_order_acquire)) pack_lock.lock();
  try {
    const std::string small = impl_->runtime_m.full.pd.impl_info_str();
    const std::string large = impl_->create_blocks(kLargeM).full.pd.impl_info_str();
    const std::string small_part = small + " (M <= " + std::to_string(kMatmulRuntimeRows) + ")";
    const std::string large_part = large + " (M > " + std::to_string(kMatmulRuntimeRows) + ")";
    // A reference implementation is listed first, so that a prefix check for "ref" sees it.
    const bool large_first = large.rfind("ref", 0) == 0 && small.rfind("ref", 0) != 0;
    return large_first ? large_part + ", " + small_part : small_part + ", " + large_part;
  } catch (const dnnl::error& e) {
    rethrow(e, "query the implementation", impl_->k, impl_->n);
  }
}

std::string matmul_description() {
  constexpr std::size_t kWidth = 512;
  const std::vector<float> w(kWidth * kWidth, 0.0f);
  const dnnl_version_t* v = dnnl_version();
  const std::string f32 = active_kernels().f32_prompts_on_batch_gemv
                              ? "f32 weights on aft's batch GEMV instead"
                              : "f32 weights on it";
  const std::string units_take =
      active_kernels().bf16_batch_on_tiles
          ? ": prompts and batches; q8_0 prompts dequantized onto the bf16 tiles, q8_0 batches "
            "on the int8 tiles"
          : " (M > " + std::to_string(kMatmulRuntimeRows) + ")";
  const std::string& passed_over = active_matrix_unit_choice().passed_over;
  const std::string widened =
      passed_over.empty() ? "bf16 weights widened to f32"
                          : "bf16 weights widened to f32 (" + passed_over +
                                " runs at half the FMA rate on Intel's cores; AFT_MATRIX_UNITS=on "
                                "takes it)";
  const std::string bf16 =
      matrix_units().empty() ? widened : "bf16 weights on " + matrix_unit_kernels() + units_take;
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + ", " + std::to_string(kMatmulBlockColumns) +
         "-column blocks, one thread each: " +
         Matmul(kWidth, kWidth, WeightMatrix(WeightType::F32, w.data(), nullptr), nullptr,
                PostOp::None)
             .implementation() +
         "; " + f32 + "; " + bf16;
}

}  // namespace aft::kernels
