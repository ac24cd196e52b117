//===- TensorIO.h - .npy and ONNX TensorProto (.pb) files -------*- C++ -*-===//
//
// Readers for the inputs of `./model run` (.npy v1/v2/v3, little-endian, C
// order; ONNX TensorProto parsed from its protobuf wire format by hand) and
// the .npy writer for its outputs. Every malformed file is an hpcrt::Error
// naming the file and the reason.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_IO_TENSORIO_H
#define HPCRT_IO_TENSORIO_H

#include <cstdint>
#include <string>
#include <vector>

namespace hpcrt {

/// A tensor in host memory: dtype code (hpcrt.h), shape, raw little-endian
/// bytes (numel * element size).
struct HostTensor {
  int dtype = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

/// Where the data of a .npy file is: dtype, shape and the byte range of
/// the data (C order, little-endian) after the header.
struct NpyLayout {
  int dtype = 0;
  std::vector<int64_t> shape;
  size_t dataOffset = 0;
  size_t dataBytes = 0;
};

/// Parses the header of .npy bytes (the data itself stays where it is, so
/// that a mapped file can be read in place); checks the data is complete.
NpyLayout parseNpyHeader(const uint8_t *bytes, size_t size, const std::string &what);
/// Parses .npy bytes; `what` names the source in errors.
HostTensor parseNpy(const uint8_t *bytes, size_t size, const std::string &what);
/// Parses a serialized onnx.TensorProto.
HostTensor parseTensorProto(const uint8_t *bytes, size_t size, const std::string &what);
/// Reads a .npy or .pb file (by extension; other names by content).
HostTensor readTensorFile(const std::string &path);

/// The bytes of a .npy (v1.0) file. bf16 is written as raw 2-byte void ('|V2').
std::vector<uint8_t> npyBytes(int dtype, const std::vector<int64_t> &shape,
                              const void *data);
void writeNpy(const std::string &path, int dtype, const std::vector<int64_t> &shape,
              const void *data);

} // namespace hpcrt

#endif // HPCRT_IO_TENSORIO_H
