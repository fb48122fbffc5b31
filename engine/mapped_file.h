// A whole file mapped read-only into memory, unmapped when the owner goes away.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aft {

class MappedFile {
 public:
  MappedFile() = default;  // maps nothing
  // Throws Error(AFT_ERR_IO) "<path>: cannot open: <reason>" (or stat, map; or not a regular file).
  // An empty file maps to data() == nullptr, size() == 0 (mmap cannot map 0 bytes).
  static MappedFile open(const std::string& path);

  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  MappedFile(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  void unmap() noexcept;

  const uint8_t* data_ = nullptr;  // the mapping, owned: released by munmap
  std::size_t size_ = 0;
};

}  // namespace aft
