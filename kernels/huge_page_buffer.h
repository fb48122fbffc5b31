// Memory for data read end to end on every token (packed weights, and the read probe that measures
// the limit such a read can reach), on 2 MiB pages where the system gives them: madvise
// (MADV_HUGEPAGE) before the first touch, which transparent huge pages honour in the "always" and
// "madvise" modes. On 4 KiB pages a stream takes a TLB miss every 4 KiB: measured on a Zen 4, one
// thread decoded enwik8 1.2x faster in q8_0 and bf16, and read memory 1.2x faster, on 2 MiB pages
// (docs/benchmarks.md). Buffers under 2 MiB, or systems without transparent huge pages, get
// ordinary pages, 64-byte aligned.
//
// HugePageAllocator: the same for arrays that grow (a session's AFT-full rows). There the reason is
// the first touch: a 4 KiB page costs a fault each, measured at 3.5 us on a paravirtual guest (36
// MB of new rows: 125 ms on 4 KiB pages, 4-6 ms on 2 MiB ones; docs/benchmarks.md). Freed arrays of
// 2 MiB and more serve the next allocation of their size (huge_page_buffer.cpp: KeptArrays).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace aft::kernels {

constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  // Uninitialised; throws std::bad_alloc.
  explicit HugePageBuffer(std::size_t bytes);
  char* data() const { return memory_.get(); }
  std::size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> memory_;
  std::size_t size_ = 0;
};

// A kept array of that size, else through the replaceable aligned operator new (it throws
// std::bad_alloc; a test can make it fail): 2 MiB-aligned from 2 MiB on, the whole 2 MiB pages of
// it advised to be huge ones (the tail, under 2 MiB, stays on 4 KiB pages: nothing is rounded up),
// else 64-byte aligned.
void* allocate_on_huge_pages(std::size_t bytes);
void free_on_huge_pages(void* p, std::size_t bytes) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(allocate_on_huge_pages(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { free_on_huge_pages(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const HugePageAllocator<U>&) const noexcept {
    return false;
  }
};

}  // namespace aft::kernels
