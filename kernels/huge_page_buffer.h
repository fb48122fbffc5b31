// Memory for data read end to end on every token (packed weights, and the read probe that measures
// the limit such a read can reach), on 2 MiB pages where the system gives them: madvise
// (MADV_HUGEPAGE) before the first touch, which transparent huge pages honour in the "always" and
// "madvise" modes. On 4 KiB pages a stream takes a TLB miss every 4 KiB: measured on a Zen 4, one
// thread decoded enwik8 1.2x faster in q8_0 and bf16, and read memory 1.2x faster, on 2 MiB pages
// (docs/benchmarks.md). Buffers under 2 MiB, or systems without transparent huge pages, get
// ordinary pages, 64-byte aligned.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace aft::kernels {

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

}  // namespace aft::kernels
