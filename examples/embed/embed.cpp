//===- embed.cpp - HPC-Opt through its C++ API ----------------------------===//
//
// What a compiler written in C++ on MLIR does to hand a model to HPC-Opt:
// HPC-Opt's dialects in its registry, the ONNX model imported, upstream
// passes run on it in its own PassManager, and hpc::compileToExecutable
// writing an executable for a mesh, which every rank of `mpirun -n N` runs.
//
//   usage: embed-cpp MODEL.onnx INPUT_SHAPES OUT.bin OPTIONS
//     INPUT_SHAPES  "NAME=D0,D1;..." or "" (the model's own shapes)
//     OPTIONS       the hpc-compile pipeline's options, e.g. "mesh=dp=2"
//                   (hpc::CompileOptions, include/hpc/Pipeline.h)
//
// Errors are MLIR diagnostics (printed to stderr by the context) or one
// line, and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "hpc/Compile.h"
#include "hpc/Import/ONNXImporter.h"
#include "hpc/InitAll.h"
// Unused here: what a compiler that builds its own pipeline from HPC-Opt's
// passes includes (it compiles against the installed dialect headers).
#include "hpc/Passes.h"
#include "hpc/Target/Emit.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

static int fail(const std::string &message) {
  llvm::errs() << "embed-cpp: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    llvm::errs() << "usage: " << argv[0] << " MODEL.onnx INPUT_SHAPES OUT.bin OPTIONS\n"
                 << "  e.g. " << argv[0] << " mlp.onnx x=4,784 mlp.bin mesh=dp=2\n";
    return 1;
  }
  llvm::StringRef modelPath = argv[1], shapes = argv[2], outputPath = argv[3],
                  optionsText = argv[4];
  llvm::outs() << "embed-cpp: HPC-Opt " << hpc::version() << "\n";

  mlir::DialectRegistry registry;
  hpc::registerAllDialects(registry);
  hpc::registerTargetTranslations(registry);
  mlir::MLIRContext context(registry);
  hpc::registerAllPasses();

  // The compile options: the hpc-compile pipeline's textual form, parsed
  // into the struct (a compiler may as well set fields: options.mesh = "dp=2").
  hpc::CompileOptions options;
  std::string parseError;
  llvm::raw_string_ostream parseErrors(parseError);
  if (mlir::failed(options.parseFromString(optionsText, parseErrors)))
    return fail("invalid options '" + optionsText.str() + "': " +
                llvm::StringRef(parseError).trim().str());
  std::string error;
  if (!hpc::verifyCompileOptions(options, error))
    return fail("options '" + optionsText.str() + "': " + error);

  hpc::ImportOptions importOptions;
  llvm::SmallVector<llvm::StringRef> entries;
  shapes.split(entries, ';', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef entry : entries)
    if (!hpc::parseInputShape(entry.trim().str(), importOptions, error))
      return fail("input shape '" + entry.str() + "': " + error);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      hpc::importONNXFile(context, modelPath.str(), importOptions, error);
  if (!module)
    return fail(error);

  // Upstream passes, in the embedding compiler's own pass manager.
  mlir::PassManager pm(&context);
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  if (mlir::failed(pm.run(*module)))
    return fail("the upstream passes failed on '" + modelPath.str() + "'");

  hpc::FlowOptions flow;
  flow.log = [](llvm::StringRef line) { llvm::outs() << "embed-cpp: " << line << "\n"; };
  if (mlir::failed(hpc::compileToExecutable(*module, options, outputPath, flow)))
    return fail("cannot compile '" + modelPath.str() + "' (" + optionsText.str() + ")");
  llvm::outs() << "embed-cpp: wrote " << outputPath << " (" << optionsText << ")\n";
  return 0;
}
