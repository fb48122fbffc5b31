#include "tools/quantize/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace aft::quantize {

OutputFile::OutputFile(std::string path)
    : path_(std::move(path)), temporary_(temporary_path(path_)) {
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create");
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) std::remove(temporary_.c_str());
}

void OutputFile::fail(const std::string& what) const {
  throw std::runtime_error(temporary_ + " (for " + path_ + "): " + what + ": " +
                           std::strerror(errno));
}

void OutputFile::write_at(uint64_t offset, const void* data, std::size_t n) {
  const auto* bytes = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t written = ::pwrite(fd_, bytes, n, static_cast<off_t>(offset));
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      if (written == 0) errno = EIO;
      fail("cannot write");
    }
    bytes += written;
    offset += static_cast<uint64_t>(written);
    n -= static_cast<std::size_t>(written);
  }
}

void OutputFile::commit(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) fail("cannot set the size");
  if (::fsync(fd_) != 0) fail("cannot write");
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail("cannot write");
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0) fail("cannot rename to " + path_);
  committed_ = true;
}

}  // namespace aft::quantize
