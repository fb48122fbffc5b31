#include "kernels/huge_page_buffer.h"

#include <new>

#include <sys/mman.h>

namespace aft::kernels {
namespace {

constexpr std::size_t kCacheLine = 64;
constexpr std::size_t kHugePage = kHugePageBytes;

std::align_val_t alignment_for(std::size_t bytes) {
  return std::align_val_t{bytes >= kHugePage ? kHugePage : kCacheLine};
}

}  // namespace

void* allocate_on_huge_pages(std::size_t bytes) {
  void* p = ::operator new(bytes, alignment_for(bytes));
#if defined(MADV_HUGEPAGE)
  // Advice only, as below.
  if (bytes >= kHugePage) ::madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
#endif
  return p;
}

void free_on_huge_pages(void* p, std::size_t bytes) noexcept {
  ::operator delete(p, alignment_for(bytes));
}

HugePageBuffer::HugePageBuffer(std::size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  const std::size_t alignment = bytes >= kHugePage ? kHugePage : kCacheLine;
  const std::size_t allocated = (bytes + alignment - 1) / alignment * alignment;
  memory_.reset(static_cast<char*>(std::aligned_alloc(alignment, allocated)));
  if (!memory_) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  // Advice only: refused (no transparent huge pages), the pages are 4 KiB ones as before.
  if (alignment == kHugePage) ::madvise(memory_.get(), allocated, MADV_HUGEPAGE);
#endif
}

}  // namespace aft::kernels
