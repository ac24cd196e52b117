//===- ModelExtract.h - hpc IR -> layer sequence ------------------*- C++ -*-===//
//
// Turns `func.func @main` of hpc ops into the layer sequence the cost model
// and the search work on:
//
//  1. Activations are the values that depend on a function argument; weights,
//     constants and what is computed from them only are not.
//  2. The op sequence is cut after every op where exactly one activation is
//     live (the residual stream between transformer half-blocks, the output
//     of an embedding, ...). The pieces are segments.
//  3. Segments get a signature (op kinds, result types, operand structure;
//     not weight names). The longest periodic run of signatures becomes a
//     sequence of repeated layers (one period each); the stretches before
//     and after are searched the same way, and a stretch without repetition
//     becomes one layer (or, in a model with no repetition at all, each
//     segment is a layer).
//  4. Each layer gets its figures (CostModel.h's Layer): GEMMs, traffic of the
//     other kernels, parameters, saved activations, and a tensor-parallel
//     layout found by propagation: a weight GEMM on a replicated activation is
//     column-parallel (output sharded, its input's gradient all-reduced in
//     backward), on a sharded one row-parallel (output all-reduced in
//     forward); an embedding gather is vocabulary-parallel. A layer with
//     top_k gating and expert-batched weights is a mixture-of-experts layer.
//
// docs/cost-model.md explains the rules and their limits.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_COSTMODEL_MODELEXTRACT_H
#define HPC_COSTMODEL_MODELEXTRACT_H

#include "hpc/CostModel/CostModel.h"

#include <string>
#include <utility>
#include <vector>

namespace mlir {
class Operation;
namespace func {
class FuncOp;
} // namespace func
} // namespace mlir

namespace hpc {
namespace cost {

/// The model of a function, and which layer each op belongs to.
struct ExtractedModel {
  Model model;
  int64_t irBatch = 1; ///< samples the IR computes (first input's leading dim)
  /// Every op of the function body except the terminator, with its layer.
  /// Weights and constants belong to the layer of their first user.
  std::vector<std::pair<mlir::Operation *, int>> opLayers;
};

/// Extracts the layers of `func`. False, with a one-line reason in `error`,
/// when the function has no activation ops or non-static shapes.
bool extractModel(mlir::func::FuncOp func, ExtractedModel &out,
                  std::string &error);

} // namespace cost
} // namespace hpc

#endif // HPC_COSTMODEL_MODELEXTRACT_H
