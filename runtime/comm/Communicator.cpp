//===- Communicator.cpp - what both communicators share -------------------===//

#include "Communicator.h"

#include "../core/Context.h"

#include <string>

namespace hpcrt {
namespace comm {

size_t payloadBytes(size_t count, int dtype) {
  size_t e = dtypeSize(dtype);
  if (e == 0)
    fail("unknown dtype " + std::to_string(dtype));
  return count * e;
}

void Communicator::allReduceCompressed(const void *, void *, size_t, int, int64_t,
                                       const Compression &) {
  fail(std::string("transport '") + transport() + "' has no compressed reductions");
}

void Communicator::reduceScatterCompressed(const void *, void *, size_t, int, int64_t,
                                           const Compression &) {
  fail(std::string("transport '") + transport() + "' has no compressed reductions");
}

} // namespace comm
} // namespace hpcrt
