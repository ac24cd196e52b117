//===- InputFile.cpp - bounded, exact reads of regular files --------------===//
//
// open(2) with O_NONBLOCK, fstat(2) of the descriptor, fcntl(2) to clear
// O_NONBLOCK again (a regular file never blocks; clearing it keeps later
// reads ordinary), pread(2) loops that retry EINTR and treat end-of-file
// before the requested range as an error.
//
//===----------------------------------------------------------------------===//

#include "InputFile.h"

#include "../core/Context.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hpcrt {

InputFile::InputFile(const std::string &path, const std::string &cannotOpen) : path_(path) {
  fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0)
    fail(path + ": " + cannotOpen + ": " + strerror(errno));
  struct stat st;
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0) {
    close(fd_);
    fd_ = -1;
    fail(path + ": not a regular file");
  }
  int flags = fcntl(fd_, F_GETFL);
  if (flags >= 0)
    fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0)
    close(fd_);
}

void InputFile::readAt(uint64_t offset, void *dst, size_t bytes) const {
  if (offset > size_ || bytes > size_ - offset)
    fail(path_ + ": bytes " + std::to_string(offset) + ".." + std::to_string(offset + bytes) +
         " are past its end (" + std::to_string(size_) + " bytes)");
  uint8_t *p = static_cast<uint8_t *>(dst);
  while (bytes > 0) {
    ssize_t n = pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      fail(path_ + ": read error: " + strerror(errno));
    if (n == 0)
      fail(path_ + ": shorter than its size when opened (changed while read?)");
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

std::vector<uint8_t> InputFile::readAll(uint64_t maxBytes, const std::string &why) const {
  if (size_ > maxBytes)
    fail(path_ + ": " + std::to_string(size_) + " bytes, more than " + why);
  std::vector<uint8_t> data(static_cast<size_t>(size_));
  readAt(0, data.data(), data.size());
  return data;
}

bool checkedTensorBytes(const std::vector<int64_t> &shape, size_t esize, uint64_t &bytes,
                        uint64_t *numel) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n) || n > kMaxTensorBytes)
      return false;
  }
  uint64_t b;
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(esize), &b) || b > kMaxTensorBytes)
    return false;
  bytes = b;
  if (numel)
    *numel = n;
  return true;
}

} // namespace hpcrt
