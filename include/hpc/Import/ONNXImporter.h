//===- ONNXImporter.h - ONNX model to hpc dialect ----------------*- C++ -*-===//
//
// Imports an ONNX model (binary .onnx with optional external data, or the
// ONNX text format .onnxtxt) into a module holding one `func.func @main` of
// hpc ops with fully static shapes.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_IMPORT_ONNXIMPORTER_H
#define HPC_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hpc {

/// What the importer may assume beyond the model file.
struct ImportOptions {
  /// Static shapes for graph inputs with dynamic dimensions (NAME -> dims).
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Read no weight data: parameters come out as `hpc.weight` without value.
  /// Small integer constants (shapes, axes) are still read.
  bool shapesOnly = false;
  /// Directory with `input_K.pb` files (ONNX backend test layout): a graph
  /// input that an op needs as a compile-time constant (a shape, axes, pads)
  /// is bound to the value in the file of its index.
  std::string bindInputsDir;
  /// Tensors of the graph (any node output or initializer) to return as
  /// extra results of @main under their names, after the graph outputs that
  /// are not already among them (a loss reads logits that are not a graph
  /// output). An unknown name is an import error.
  std::vector<std::string> extraOutputs;
};

/// True for paths the importer reads (.onnx, .onnxtxt).
bool isONNXPath(const std::string &path);

/// Imports the model at `path`. On failure returns null and sets `error` to
/// one line naming the file, node or tensor and the reason.
mlir::OwningOpRef<mlir::ModuleOp> importONNXFile(mlir::MLIRContext &context,
                                                 const std::string &path,
                                                 const ImportOptions &options,
                                                 std::string &error);

/// Parses "NAME=D0,D1,..." into `options.inputShapes`; false with `error` set
/// when the text is malformed.
bool parseInputShape(const std::string &text, ImportOptions &options,
                     std::string &error);

} // namespace hpc

#endif // HPC_IMPORT_ONNXIMPORTER_H
