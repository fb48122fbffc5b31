#include "kernels/thread_scratch.h"

#include <memory>
#include <new>

namespace aft::kernels {
namespace {

constexpr std::align_val_t kScratchAlignment{64};

struct ScratchDelete {
  void operator()(std::byte* p) const { ::operator delete[](p, kScratchAlignment); }
};

struct ScratchMemory {
  std::unique_ptr<std::byte[], ScratchDelete> memory;
  std::size_t bytes = 0;
};

}  // namespace

void* thread_scratch(std::size_t bytes) {
  thread_local ScratchMemory scratch;
  if (scratch.bytes < bytes) {
    // The old buffer goes before the new one is asked for, and a failed request leaves none: a
    // size kept beside a null buffer would hand the next, smaller call that null.
    scratch.memory.reset();
    scratch.bytes = 0;
    scratch.memory.reset(static_cast<std::byte*>(::operator new[](bytes, kScratchAlignment)));
    scratch.bytes = bytes;
  }
  return scratch.memory.get();
}

}  // namespace aft::kernels
