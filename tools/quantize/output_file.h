// A file that appears at its path complete or not at all: written under path + ".tmp", renamed
// into place by commit(); the temporary file is removed if commit() is never reached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace aft::quantize {

class OutputFile {
 public:
  // Creates (or truncates) path + ".tmp". Errors throw std::runtime_error naming the file.
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  static std::string temporary_path(const std::string& path) { return path + ".tmp"; }

  // Bytes never written read as zeros.
  void write_at(uint64_t offset, const void* data, std::size_t n);
  // Sets the size to `size` bytes, flushes to disk and renames the file to its path.
  void commit(uint64_t size);

 private:
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  std::string temporary_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace aft::quantize
