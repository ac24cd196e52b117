//===- Emit.h - LLVM IR, object files and executables ------------*- C++ -*-===//
//
// The last steps of compilation: a module of LLVM dialect (after
// hpc-lower-to-runtime) becomes LLVM IR, an object file for the host, and an
// executable linked with libhpcrt.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_TARGET_EMIT_H
#define HPC_TARGET_EMIT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace hpc {

/// Registers the translations of the dialects a lowered module holds.
void registerTargetTranslations(mlir::DialectRegistry &registry);

/// A pipelined step's lowered stage modules (dist-pipeline's @stageK, in
/// stage order); empty for a module of one program.
llvm::SmallVector<mlir::ModuleOp> pipelineStageModules(mlir::ModuleOp module);

/// The manifest (JSON text) of a lowered module of one program ("" when it
/// has none).
std::string programManifest(mlir::ModuleOp module);

/// Whether two programs' manifests lay out the same inputs, state and
/// weights (a program can take over the other's state bytes as they are);
/// otherwise `why` says what differs.
bool sameStateLayout(llvm::StringRef manifestA, llvm::StringRef manifestB, std::string &why);

/// Prints the module as LLVM IR. `conservative`, when given, is a second
/// lowered program of the same train step (the stability guard's
/// conservative plan), emitted beside it as hpc_conservative_manifest and
/// hpc_conservative_run (hpcrt.h).
mlir::LogicalResult emitLLVMIR(mlir::ModuleOp module, llvm::raw_ostream &os,
                               std::string &error, mlir::ModuleOp conservative = {});

/// Writes a host object file (position independent); `conservative` as
/// for emitLLVMIR.
mlir::LogicalResult emitObjectFile(mlir::ModuleOp module, const std::string &path,
                                   std::string &error, mlir::ModuleOp conservative = {});

/// Links an object file with libhpcrt into an executable.
mlir::LogicalResult linkExecutable(const std::string &objectPath,
                                   const std::string &outputPath,
                                   std::string &error);

} // namespace hpc

#endif // HPC_TARGET_EMIT_H
