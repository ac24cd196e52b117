//===- FuzzRuntimeReaders.cpp - libFuzzer targets of the runtime's readers ===//
//
// One target per reader of runtime/io, chosen by HPC_FUZZ_READER at compile
// time (one executable each, so that each has a corpus of its own format):
//   1 parseNpy            (.npy inputs of `./model run`),
//   2 parseTensorProto    (.pb inputs),
//   3 parseSafetensors    (weights, checkpoints, --init-weights),
//   4 replaceInitializers (the ModelProto rewrite of `train --save-onnx`).
// A reader must return a value that keeps its promises or throw
// hpcrt::Error with one line; a crash, a sanitizer report, another
// exception or a broken promise (data of the wrong size, a record outside
// the data section) is a finding.
//
//===----------------------------------------------------------------------===//

#include "core/Context.h"
#include "io/OnnxInitializers.h"
#include "io/Safetensors.h"
#include "io/TensorIO.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#ifndef HPC_FUZZ_READER
#error "build with -DHPC_FUZZ_READER=1..4 (see the file's header)"
#endif

namespace {

[[noreturn]] void finding(const std::string &what) {
  std::fprintf(stderr, "FuzzRuntimeReaders: %s\n", what.c_str());
  std::abort();
}

/// numel * element size, or false when a dim is negative or it overflows
/// (a zero dim makes it 0, whatever the other dims are).
bool expectedBytes(int dtype, const std::vector<int64_t> &shape, uint64_t &bytes) {
  bytes = hpcrt::dtypeSize(dtype);
  for (int64_t d : shape)
    if (d < 0)
      return false;
    else if (d == 0)
      bytes = 0;
  for (int64_t d : shape) {
    if (bytes != 0 && uint64_t(d) > UINT64_MAX / bytes)
      return false;
    bytes *= uint64_t(d);
  }
  return true;
}

void checkTensor(const hpcrt::HostTensor &t) {
  uint64_t bytes = 0;
  if (hpcrt::dtypeSize(t.dtype) == 0)
    finding("accepted a tensor of unknown dtype " + std::to_string(t.dtype));
  if (!expectedBytes(t.dtype, t.shape, bytes) || bytes != t.data.size())
    finding("accepted a tensor of " + hpcrt::dtypeName(t.dtype) + " " +
            hpcrt::shapeString(t.shape) + " with " + std::to_string(t.data.size()) +
            " bytes of data");
}

void checkSafetensors(const hpcrt::SafetensorsFile &f, size_t size) {
  if (f.dataOffset > size || f.dataBytes != size - f.dataOffset)
    finding("data section does not match the file size");
  for (const auto &r : f.records) {
    uint64_t bytes = 0;
    if (r.begin > r.end || r.end > f.dataBytes)
      finding("record '" + r.name + "' lies outside the data section");
    if (r.dtype != 0 && (!expectedBytes(r.dtype, r.shape, bytes) ||
                         bytes != r.end - r.begin))
      finding("record '" + r.name + "' has the wrong number of bytes");
  }
}

void readOne(const uint8_t *data, size_t size) {
  const std::string what = "fuzz-input";
#if HPC_FUZZ_READER == 1
  checkTensor(hpcrt::parseNpy(data, size, what));
#elif HPC_FUZZ_READER == 2
  checkTensor(hpcrt::parseTensorProto(data, size, what));
#elif HPC_FUZZ_READER == 3
  checkSafetensors(hpcrt::parseSafetensors(data, size, what), size);
#elif HPC_FUZZ_READER == 4
  // No replacements, and a directory without files: external data can only
  // fail to resolve.
  (void)hpcrt::replaceInitializers(data, size, {}, "/nonexistent-hpc-fuzz", what);
#else
#error "HPC_FUZZ_READER must be 1..4"
#endif
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    readOne(data, size);
  } catch (const hpcrt::Error &e) {
    std::string message = e.what();
    if (message.empty() || message.find('\n') != std::string::npos)
      finding("bad error text: '" + message + "'");
  } catch (const std::exception &e) {
    finding(std::string("not an hpcrt::Error: ") + e.what());
  }
  return 0;
}
