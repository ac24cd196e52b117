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

} // namespace comm
} // namespace hpcrt
