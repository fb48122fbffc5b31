// A whole file's bytes, read-only: mapped from disk (unmapped when the owner goes away) or copied
// from a caller's buffer into memory of its own, on 2 MiB pages where the system gives them
// (aft_model_load_from_memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/huge_page_buffer.h"

namespace aft {

class MappedFile {
 public:
  MappedFile() = default;  // maps nothing
  // Throws Error(AFT_ERR_IO) "<path>: cannot open: <reason>" (or stat, map; or not a regular file).
  // An empty file maps to data() == nullptr, size() == 0 (mmap cannot map 0 bytes).
  static MappedFile open(const std::string& path);
  // A copy of size bytes at data, 64-byte aligned whatever data's alignment (tensors are read in
  // place and must be), on 2 MiB pages where the system gives them (kernels::HugePageBuffer).
  // size 0 gives data() == nullptr. Throws std::bad_alloc.
  static MappedFile copy_of(const void* data, std::size_t size);

  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  // Whether the bytes are the file's pages mapped (open), not a copy of the process's own.
  bool mapped() const { return data_ != nullptr && !copy_.data(); }
  // Tells the kernel that bytes [offset, offset + size) will not be read again soon: a mapped
  // file drops the whole pages inside the range from memory (a later read faults them in from
  // the file again, the same bytes); a copy keeps its bytes. For tensors the engine has packed
  // into a layout of its own.
  void release(std::size_t offset, std::size_t size) const noexcept;

 private:
  MappedFile(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  explicit MappedFile(kernels::HugePageBuffer copy);
  void unmap() noexcept;

  const uint8_t* data_ = nullptr;  // owned: released by munmap, unless it is copy_'s
  std::size_t size_ = 0;
  kernels::HugePageBuffer copy_;
};

}  // namespace aft
