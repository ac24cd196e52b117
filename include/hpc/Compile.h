//===- Compile.h - the compile flow as a library -----------------*- C++ -*-===//
//
// What `hpc-opt model.onnx -o model.bin` does, as one call an embedding
// compiler makes on a module it holds: search the plan (with `cluster`) or
// take the given mesh, build the train step, partition, lower, emit, and link
// with the runtime. hpc-opt is a thin driver on it; the C API's
// hpcCompileToExecutable (hpc-c/Compile.h) calls it with options parsed from
// the hpc-compile pipeline's textual form. docs/embedding.md.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_COMPILE_H
#define HPC_COMPILE_H

#include "hpc/Passes.h"
#include "hpc/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LogicalResult.h"

#include <functional>
#include <string>

namespace hpc {

/// What compileToExecutable writes at its output path.
enum class EmitKind {
  LLVMIR,     ///< LLVM IR text (the weights file is written too)
  Object,     ///< a host object file
  Executable, ///< an executable linked with libhpcrt
};

/// The flow's settings beyond the pipeline's options.
struct FlowOptions {
  EmitKind emit = EmitKind::Executable;
  /// A searched plan (`cluster` with `auto-parallel`, or `micro-batches`
  /// with `cluster`) plans the whole batch, so `module` holds it; a step of
  /// M > 1 micro-batches is then compiled from the model imported for one
  /// micro-batch, which this returns (null after reporting an error). Without
  /// it such a plan is an error that says so.
  std::function<mlir::OwningOpRef<mlir::ModuleOp>(int64_t microBatches)> reimport;
  /// Receives the flow's messages that are not errors, one line each without
  /// a newline: "wrote OUT and WEIGHTS (arena N bytes)", "note: ..."; unset:
  /// they are dropped. Errors are diagnostics.
  std::function<void(llvm::StringRef line)> log;
};

/// The project's version ("MAJOR.MINOR.PATCH"), as CMake's project() says.
const char *version();

/// `value` as printf's %g writes it ("0.5", "-1"), for messages.
std::string shortNumber(double value);

/// Checks the combinations of `options` the pipeline cannot run (a ZeRO
/// stage without a dp axis, a loss without train, ...); false with the
/// reason, in the pipeline's option names, in `error`.
bool verifyCompileOptions(const CompileOptions &options, std::string &error);

/// Makes a strategy search (dist-search) plan what `options` compile: in
/// their precision (with train, or when given; else the search's default
/// dtype), and for a train step with the same optimizer, ZeRO stage and
/// recomputation: the ones given, or under auto-parallel the ones the flow
/// builds for the search to choose from (ZeRO 0 to 2; recomputation full or
/// none, selective costed as none), its collectives as this compiler lays
/// the step out (dist-search layout=compiled).
void matchSearchToStep(DistSearchOptions &search, const CompileOptions &options);

/// Compiles `module` (an imported hpc module; without `cluster`, imported
/// for one micro-batch) with `options` and writes `outputPath` as
/// `flow.emit` says, the weights beside it (`weights-file`, default
/// OUTPUT.safetensors). Errors are MLIR diagnostics on the module's context,
/// never an exit. The module is lowered in place. Passes keep no state
/// between runs, so a caller may compile many modules in one context.
mlir::LogicalResult compileToExecutable(mlir::ModuleOp module, const CompileOptions &options,
                                        llvm::StringRef outputPath,
                                        const FlowOptions &flow = {});

} // namespace hpc

#endif // HPC_COMPILE_H
