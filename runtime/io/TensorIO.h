//===- TensorIO.h - .npy and ONNX TensorProto (.pb) files -------*- C++ -*-===//
//
// Readers for the inputs of `./model run` (.npy v1/v2/v3, little-endian, C
// order; ONNX TensorProto parsed from its protobuf wire format by hand) and
// the .npy writer for its outputs. Files are read through InputFile
// (regular files only, bounded, exact); every malformed file is an
// hpcrt::Error naming the file and the reason.
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

/// The longest .npy header the reader accepts (numpy writes under 200
/// bytes; its own reader refuses more than 10000 by default).
constexpr uint64_t kMaxNpyHeaderBytes = 65536;
/// The most dimensions a TensorProto may have.
constexpr size_t kMaxTensorProtoDims = 64;

/// Parses the header of .npy bytes (the data itself stays where it is, so
/// that a mapped file can be read in place): exactly the keys descr,
/// fortran_order and shape; the data must be exactly numel * element size
/// bytes (short data and trailing bytes are errors).
NpyLayout parseNpyHeader(const uint8_t *bytes, size_t size, const std::string &what);
/// Parses .npy bytes; `what` names the source in errors.
HostTensor parseNpy(const uint8_t *bytes, size_t size, const std::string &what);
/// Parses a serialized onnx.TensorProto.
HostTensor parseTensorProto(const uint8_t *bytes, size_t size, const std::string &what);
/// The largest file that can hold a tensor of `bytes` bytes and `numel`
/// elements: a .npy header, or a TensorProto's typed fields (at most 16
/// bytes a value) plus its other fields.
uint64_t tensorFileLimit(uint64_t bytes, uint64_t numel);
/// Reads a .npy or .pb file (by extension; other names by content): a
/// regular file (InputFile) of at most `maxBytes` bytes.
HostTensor readTensorFile(const std::string &path, uint64_t maxBytes = UINT64_MAX);

/// Fails when a float tensor (f32, f64, f16, bf16) holds a NaN or an
/// infinity: "<what>: element K (index [i, j]) is NaN (<flag>)" for the
/// first one (or "+Inf", "-Inf"). Other dtypes always pass.
void checkFinite(const HostTensor &t, const std::string &what, const std::string &flag);
/// checkFinite of `bytes` bytes of `dtype` at `data` (a mapped file's data)
/// that make a tensor of `shape`.
void checkFinite(int dtype, const std::vector<int64_t> &shape, const uint8_t *data,
                 size_t bytes, const std::string &what, const std::string &flag);

/// The bytes of a .npy (v1.0) file. bf16 is written as raw 2-byte void ('|V2').
std::vector<uint8_t> npyBytes(int dtype, const std::vector<int64_t> &shape,
                              const void *data);
void writeNpy(const std::string &path, int dtype, const std::vector<int64_t> &shape,
              const void *data);

} // namespace hpcrt

#endif // HPCRT_IO_TENSORIO_H
