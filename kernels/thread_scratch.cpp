#include "kernels/thread_scratch.h"

#include <memory>
#include <new>

namespace aft::kernels {
namespace {

constexpr std::align_val_t kAlignment{64};

struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete[](p, kAlignment); }
};

struct Scratch {
  std::unique_ptr<std::byte[], AlignedDelete> memory;
  std::size_t bytes = 0;
};

}  // namespace

void* thread_scratch(std::size_t bytes) {
  thread_local Scratch scratch;
  if (scratch.bytes < bytes) {
    scratch.memory.reset();  // the old buffer goes before the new one is asked for
    scratch.memory.reset(static_cast<std::byte*>(::operator new[](bytes, kAlignment)));
    scratch.bytes = bytes;
  }
  return scratch.memory.get();
}

}  // namespace aft::kernels
