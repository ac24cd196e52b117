//===- InputFile.h - bounded, exact reads of regular files ------*- C++ -*-===//
//
// The one way the runtime opens a file it reads (tensor inputs, weights,
// data files, checkpoints, external initializers): the open does not block
// (O_NONBLOCK, so a FIFO cannot hang it), the descriptor must be a regular
// file (fstat on the open descriptor: no race with a rename; directories,
// devices such as /dev/zero, FIFOs and sockets are refused), its size comes
// from fstat and is checked against a limit before anything is allocated,
// and every read is exact: a file that shrinks under the reader is an
// error, never zero-filled. Also the checked size arithmetic of tensors
// that the file readers share. Failures are an hpcrt::Error naming the path.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_IO_INPUTFILE_H
#define HPCRT_IO_INPUTFILE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hpcrt {

/// An open regular file, for reading.
class InputFile {
public:
  /// Opens `path` (O_RDONLY | O_NONBLOCK | O_CLOEXEC, then O_NONBLOCK is
  /// cleared); a path that is not a regular file is the error
  /// "<path>: not a regular file". A failed open is
  /// "<path>: <cannotOpen>: <strerror>".
  explicit InputFile(const std::string &path, const std::string &cannotOpen = "cannot open");
  ~InputFile();
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::string &path() const { return path_; }

  /// Reads exactly `bytes` bytes at `offset` into `dst`; a range past the
  /// end or a short read (the file changed) is an error.
  void readAt(uint64_t offset, void *dst, size_t bytes) const;
  /// The whole file; a file of more than `maxBytes` bytes is the error
  /// "<path>: <size> bytes, more than <why>".
  std::vector<uint8_t> readAll(uint64_t maxBytes, const std::string &why) const;

private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// The largest tensor a reader accepts: 2^62 bytes (and elements), so that
/// sizes and offsets computed from it never overflow 64 bits.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 62;

/// numel(shape) * esize in checked arithmetic: false when a dimension is
/// negative or the element count or byte count passes kMaxTensorBytes.
bool checkedTensorBytes(const std::vector<int64_t> &shape, size_t esize, uint64_t &bytes,
                        uint64_t *numel = nullptr);

} // namespace hpcrt

#endif // HPCRT_IO_INPUTFILE_H
