#include "kernels/huge_page_buffer.h"

#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <sys/mman.h>

namespace aft::kernels {
namespace {

constexpr std::size_t kCacheLine = 64;
constexpr std::size_t kHugePage = kHugePageBytes;

std::align_val_t alignment_for(std::size_t bytes) {
  return std::align_val_t{bytes >= kHugePage ? kHugePage : kCacheLine};
}

// Freed arrays of 2 MiB and more, kept for the next allocation of the same size (a new session's
// rows take the sizes the last one's had): their pages are in memory already, where new ones cost
// a fault and the kernel's zeroing each, 2 MiB pages too (a fresh enwik8-full session's 72 MB took
// about a fifth of its pp512 on the Zen 5 guest). At most kKeptBytes are kept, until the process
// exits.
class KeptArrays {
 public:
  static constexpr std::size_t kKeptBytes = std::size_t{256} << 20;

  void* take(std::size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = arrays_.begin(); it != arrays_.end(); ++it) {
      if (it->second != bytes) continue;
      void* p = it->first;
      arrays_.erase(it);
      kept_ -= bytes;
      return p;
    }
    return nullptr;
  }
  bool keep(void* p, std::size_t bytes) noexcept {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (kept_ + bytes > kKeptBytes || arrays_.size() == arrays_.capacity()) return false;
    arrays_.emplace_back(p, bytes);
    kept_ += bytes;
    return true;
  }
  KeptArrays() { arrays_.reserve(kKeptBytes / kHugePage); }

 private:
  std::mutex mutex_;
  std::vector<std::pair<void*, std::size_t>> arrays_;  // reserved: keep() allocates nothing
  std::size_t kept_ = 0;
};

// Never destroyed: an object of static storage built before its first use (a global vector of
// sessions) may free an array after every destructor of this file's statics has run.
KeptArrays& kept_arrays() {
  static KeptArrays& kept = *new KeptArrays;
  return kept;
}

}  // namespace

void* allocate_on_huge_pages(std::size_t bytes) {
  if (bytes >= kHugePage) {
    if (void* p = kept_arrays().take(bytes)) return p;
  }
  void* p = ::operator new(bytes, alignment_for(bytes));
#if defined(MADV_HUGEPAGE)
  // Advice only, as below.
  if (bytes >= kHugePage) ::madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  return p;
}

void free_on_huge_pages(void* p, std::size_t bytes) noexcept {
  if (bytes >= kHugePage && kept_arrays().keep(p, bytes)) return;
  ::operator delete(p, alignment_for(bytes));
}

HugePageBuffer::HugePageBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const auto alignment = static_cast<std::size_t>(alignment_for(bytes));
  const std::size_t allocated = (bytes + alignment - 1) / alignment * alignment;
  memory_.reset(static_cast<char*>(std::aligned_alloc(alignment, allocated)));
  if (!memory_) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  // Advice only: refused (no transparent huge pages), the pages are 4 KiB ones as before.
  if (alignment == kHugePage) ::madvise(memory_.get(), allocated, MADV_HUGEPAGE);
#endif
}

}  // namespace aft::kernels
