//===- Buffer.h - an owned, 64-byte aligned block of memory -----*- C++ -*-===//
//
// The memory of the context's regions (arena, state, inputs, scratchpad) and
// of the driver's host copies. A Buffer(bytes) is host memory; a backend
// whose kernels read other memory hands out Buffers that carry their own
// release function (Backend::allocate).
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_CORE_BUFFER_H
#define HPCRT_CORE_BUFFER_H

#include <cstddef>

namespace hpcrt {

class Buffer {
public:
  using Release = void (*)(void *data);

  Buffer() = default;
  /// `bytes` of host memory, 64-byte aligned (throws Error when out of
  /// memory).
  explicit Buffer(size_t bytes);
  /// Takes `data` (`bytes` long), given back with `release` when the Buffer
  /// goes.
  Buffer(void *data, size_t bytes, Release release)
      : data_(data), size_(bytes), release_(release) {}
  Buffer(Buffer &&other) noexcept;
  Buffer &operator=(Buffer &&other) noexcept;
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer();
  void *data() const { return data_; }
  size_t size() const { return size_; }

private:
  void *data_ = nullptr;
  size_t size_ = 0;
  Release release_ = nullptr;
  void reset();
};

} // namespace hpcrt

#endif // HPCRT_CORE_BUFFER_H
