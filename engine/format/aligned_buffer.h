// Float (and double) arrays aligned to 64 bytes (a cache line, an AVX-512 register). Arrays that
// threads split into channel blocks need it: with malloc's 16-byte alignment the line at each block
// boundary would be written by two threads.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace aft {

constexpr std::size_t kCacheLine = 64;

// Through the replaceable aligned operator new: it throws std::bad_alloc when memory runs out, and
// a test that replaces it can make any allocation fail.
inline void* allocate_cache_aligned(std::size_t bytes) {
  return ::operator new (bytes, std::align_val_t{kCacheLine});
}
inline void free_cache_aligned(void* p) noexcept {
  ::operator delete (p, std::align_val_t{kCacheLine});
}

// For std::vector: a growable, copyable array with the same alignment.
template <class T>
struct CacheAlignedAllocator {
  using value_type = T;
  CacheAlignedAllocator() = default;
  template <class U>
  CacheAlignedAllocator(const CacheAlignedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_cache_aligned(n * sizeof(T))); }
  void deallocate(T* p, std::size_t) noexcept { free_cache_aligned(p); }
  template <class U>
  bool operator==(const CacheAlignedAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const CacheAlignedAllocator<U>&) const noexcept {
    return false;
  }
};

using AlignedFloats = std::vector<float, CacheAlignedAllocator<float>>;
using AlignedDoubles = std::vector<double, CacheAlignedAllocator<double>>;

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t floats) : size_(floats) {
    if (floats == 0) return;
    data_.reset(static_cast<float*>(allocate_cache_aligned(floats * sizeof(float))));
  }
  float* data() const { return data_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(float* p) const { free_cache_aligned(p); }
  };
  std::unique_ptr<float, Free> data_;
  std::size_t size_ = 0;
};

}  // namespace aft
