// The working memory of Matmul::run, owned by its caller (a session's scratch,
// engine/runtime/scratch.h): per thread of a call, the f32 weights of the column block it computes
// (bf16 widened) and the block's result. Each grows to the largest block it has held and
// is reused: a product allocates nothing once one of its shape has run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace aft::kernels {

class MatmulScratch {
 public:
  struct Slot {
    std::vector<float> widened;  // a column block's weights as f32
    std::vector<float> block;    // a block's rows of the product, before they are written to y
    // bf16 weights on the matrix units: a column block's weights in the layout of the primitive
    // packed_for (a oneDNN primitive descriptor)
    std::vector<char> packed;
    const void* packed_for = nullptr;
  };
  std::vector<uint16_t> x_bf16;  // the call's inputs rounded to bf16, shared by its threads

  // Slots for threads [0, n): from the calling thread, before the parallel region.
  void reserve_threads(std::size_t n) {
    if (slots_.size() < n) slots_.resize(n);
  }
  // Thread `thread` of the region's slot; only that thread uses it.
  Slot& slot(std::size_t thread) { return slots_[thread]; }

 private:
  std::vector<Slot> slots_;
};

}  // namespace aft::kernels
