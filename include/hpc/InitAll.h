//===- InitAll.h - register every HPC-Opt dialect and pass -------*- C++ -*-===//
//
// The one registration point that every tool (hpc-opt, the C API, embedding
// compilers) calls, so they all see the same dialects and passes.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_INITALL_H
#define HPC_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace hpc {

/// Adds the hpc dialect and the upstream dialects it is used with.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers every HPC-Opt pass and pass pipeline with the global registry.
void registerAllPasses();

} // namespace hpc

#endif // HPC_INITALL_H
