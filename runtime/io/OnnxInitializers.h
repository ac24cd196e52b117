//===- OnnxInitializers.h - new initializers for an ONNX model --*- C++ -*-===//
//
// `train --save-onnx` writes the model it was compiled from with its trained
// parameters in place of their initializers. The runtime has no protobuf
// library: this rewrites the wire format directly. Every field of the
// ModelProto is copied byte for byte except the graph (field 7), and of the
// graph every field except the initializers (field 5) that change: an
// initializer (TensorProto) named by a replacement keeps its other fields
// (dims, data_type, name, doc_string, ...) and gets the new bytes as
// raw_data (field 9), its float_data/int32_data/.../external_data and
// data_location dropped. Initializers stored in external files that are not
// replaced are read (location relative to the model's directory, offset,
// length) and inlined as raw_data too, so the result stands alone.
// Malformed input and every mismatch are one hpcrt::Error naming the file.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_IO_ONNXINITIALIZERS_H
#define HPCRT_IO_ONNXINITIALIZERS_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hpcrt {

/// The new value of an initializer: dtype code (the ONNX data_type), shape
/// and little-endian bytes (numel * element size).
struct InitializerData {
  int dtype = 0;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
};

/// What a rewrite did.
struct InitializerRewrite {
  std::vector<uint8_t> model; ///< the serialized ModelProto
  size_t replaced = 0;        ///< initializers given new data
  size_t inlined = 0;         ///< external initializers made inline
};

/// Rewrites the serialized ModelProto `model` (`size` bytes) so that every
/// initializer named in `values` holds that value. Each name must be an
/// initializer of the main graph with the same data_type and dims. External
/// data is resolved against `modelDir`; `what` names the model in errors.
InitializerRewrite replaceInitializers(const uint8_t *model, size_t size,
                                       const std::map<std::string, InitializerData> &values,
                                       const std::string &modelDir, const std::string &what);

} // namespace hpcrt

#endif // HPCRT_IO_ONNXINITIALIZERS_H
