#include "mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <system_error>
#include <utility>

#include "error.h"

namespace aft {
namespace {

std::string reason(int err) { return std::generic_category().message(err); }

// Closes the descriptor on every path out of open(); the mapping outlives it.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

MappedFile MappedFile::open(const std::string& path) {
  int raw_fd;
  do {
    // O_NONBLOCK: a FIFO would otherwise block here until a writer came, before the check below
    // could refuse it; it changes nothing for a regular file.
    raw_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (raw_fd < 0 && errno == EINTR);
  if (raw_fd < 0) throw Error(AFT_ERR_IO, path + ": cannot open: " + reason(errno));
  const FileDescriptor fd(raw_fd);

  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw Error(AFT_ERR_IO, path + ": cannot stat: " + reason(errno));
  // A directory opens fine read-only; say what is wrong instead of mmap's "No such device".
  if (!S_ISREG(st.st_mode)) throw Error(AFT_ERR_IO, path + ": cannot open: not a regular file");
  if (st.st_size <= 0) return MappedFile();
  if (static_cast<uint64_t>(st.st_size) > std::numeric_limits<std::size_t>::max()) {
    throw Error(AFT_ERR_IO, path + ": cannot map: file too large for the address space");
  }
  const auto size = static_cast<std::size_t>(st.st_size);

  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (addr == MAP_FAILED) {
    throw Error(AFT_ERR_IO,
                path + ": cannot map " + std::to_string(size) + " bytes: " + reason(errno));
  }
  return MappedFile(static_cast<const uint8_t*>(addr), size);
}

MappedFile MappedFile::copy_of(const void* data, std::size_t size) {
  if (size == 0) return MappedFile();
  kernels::HugePageBuffer copy(size);
  std::memcpy(copy.data(), data, size);
  return MappedFile(std::move(copy));
}

MappedFile::MappedFile(kernels::HugePageBuffer copy)
    : data_(reinterpret_cast<const uint8_t*>(copy.data())),
      size_(copy.size()),
      copy_(std::move(copy)) {}

MappedFile::~MappedFile() { unmap(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      copy_(std::move(other.copy_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    copy_ = std::move(other.copy_);
  }
  return *this;
}

void MappedFile::release(std::size_t offset, std::size_t size) const noexcept {
  if (!mapped() || offset >= size_) return;
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t end = std::min(size_, offset + std::min(size, size_ - offset));
  const std::size_t first = (offset + page - 1) / page * page, last = end / page * page;
  // Advice only: a failure leaves the pages where they are.
  if (first < last) ::madvise(const_cast<uint8_t*>(data_) + first, last - first, MADV_DONTNEED);
}

void MappedFile::unmap() noexcept {
  if (mapped()) ::munmap(const_cast<uint8_t*>(data_), size_);
  copy_ = kernels::HugePageBuffer();
  data_ = nullptr;
  size_ = 0;
}

}  // namespace aft
