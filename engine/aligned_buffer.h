// An owned float array aligned to 64 bytes (a cache line, an AVX-512 register).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace aft {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t floats) : size_(floats) {
    if (floats == 0) return;
    const std::size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    if (!data_) throw std::bad_alloc();
  }
  float* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace aft
