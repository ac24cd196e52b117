//===- embed.c - HPC-Opt through its C API --------------------------------===//
//
// What a compiler written against MLIR's C API does to hand a model to
// HPC-Opt: a context with HPC-Opt's dialects (and upstream's), the ONNX
// model imported, upstream passes run on it through a textual pipeline, and
// an executable written for a mesh, which every rank of `mpirun -n N` runs.
//
//   usage: embed-c MODEL.onnx INPUT_SHAPES OUT.bin OPTIONS
//     INPUT_SHAPES  "NAME=D0,D1;..." or "" (the model's own shapes)
//     OPTIONS       the hpc-compile pipeline's options, e.g. "mesh=dp=2"
//
// Errors are MLIR diagnostics (printed to stderr by the context) and exit
// status 1.
//
//===----------------------------------------------------------------------===//

#include "hpc-c/Compile.h"
#include "hpc-c/Import.h"
#include "hpc-c/Registration.h"

#include "mlir-c/IR.h"
#include "mlir-c/Pass.h"
#include "mlir-c/RegisterEverything.h"
#include "mlir-c/Support.h"
#include "mlir-c/Transforms.h"

#include <stdio.h>

/// Appends a pipeline parser's message to stderr.
static void printToStderr(MlirStringRef text, void *userData) {
  (void)userData;
  fwrite(text.data, 1, text.length, stderr);
}

/// Runs upstream's canonicalizer and CSE on the module through the textual
/// pipeline syntax (what a user's --pass-pipeline would hold).
static int runUpstreamPasses(MlirContext context, MlirModule module) {
  MlirPassManager pm = mlirPassManagerCreate(context);
  MlirOpPassManager opm = mlirPassManagerGetAsOpPassManager(pm);
  int ok = mlirLogicalResultIsSuccess(mlirParsePassPipeline(
      opm, mlirStringRefCreateFromCString("builtin.module(canonicalize,cse)"),
      printToStderr, NULL));
  if (!ok)
    fprintf(stderr, "\nembed-c: cannot parse the pass pipeline\n");
  else if (mlirLogicalResultIsFailure(
               mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)))) {
    fprintf(stderr, "embed-c: the upstream passes failed\n");
    ok = 0;
  }
  mlirPassManagerDestroy(pm);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s MODEL.onnx INPUT_SHAPES OUT.bin OPTIONS\n"
                    "  e.g. %s mlp.onnx x=4,784 mlp.bin mesh=dp=2\n",
            argv[0], argv[0]);
    return 1;
  }
  printf("embed-c: HPC-Opt %s\n", hpcGetVersion());

  // Upstream's dialects and passes beside HPC-Opt's, as in a compiler that
  // has its own use for them.
  MlirDialectRegistry registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  hpcRegisterAllDialects(registry);
  MlirContext context = mlirContextCreateWithRegistry(registry, false);
  mlirDialectRegistryDestroy(registry);
  mlirRegisterTransformsPasses();
  hpcRegisterAllPasses();

  int status = 1;
  MlirModule module = hpcImportONNXFile(
      context, mlirStringRefCreateFromCString(argv[1]),
      mlirStringRefCreateFromCString(argv[2]), /*shapesOnly=*/false);
  if (mlirModuleIsNull(module)) {
    fprintf(stderr, "embed-c: cannot import '%s'\n", argv[1]);
  } else {
    if (runUpstreamPasses(context, module)) {
      if (mlirLogicalResultIsSuccess(hpcCompileToExecutable(
              module, mlirStringRefCreateFromCString(argv[3]),
              mlirStringRefCreateFromCString(argv[4])))) {
        printf("embed-c: wrote %s (%s)\n", argv[3], argv[4]);
        status = 0;
      } else {
        fprintf(stderr, "embed-c: cannot compile '%s' (%s)\n", argv[1], argv[4]);
      }
    }
    mlirModuleDestroy(module);
  }
  mlirContextDestroy(context);
  return status;
}
