//===- hpc-opt.cpp - the HPC-Opt driver -----------------------------------===//
//
// mlir-opt with every upstream dialect and pass plus HPC-Opt's own. An input
// ending in .onnx or .onnxtxt is imported first (--input-shape fixes dynamic
// dimensions, --shapes-only skips weight data); passes and printing then work
// on the imported module exactly as on a .mlir file.
//
//===----------------------------------------------------------------------===//

#include "hpc/Import/ONNXImporter.h"
#include "hpc/InitAll.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Support/FileUtilities.h"

using namespace mlir;

static llvm::cl::OptionCategory importCategory("ONNX import options");

static llvm::cl::list<std::string> inputShapes(
    "input-shape",
    llvm::cl::desc("Fix the dimensions of a graph input: NAME=D0,D1,... "
                   "(repeatable)"),
    llvm::cl::cat(importCategory));

static llvm::cl::opt<bool> shapesOnly(
    "shapes-only",
    llvm::cl::desc("Read no weight data (plan a model without its weights)"),
    llvm::cl::init(false), llvm::cl::cat(importCategory));

static llvm::cl::opt<std::string> bindInputs(
    "bind-inputs",
    llvm::cl::desc("Directory of input_K.pb files binding graph inputs that "
                   "an op needs as constants (ONNX backend test layout)"),
    llvm::cl::init(""), llvm::cl::cat(importCategory));

/// Imports an ONNX file and hands it to MlirOptMain as an in-memory buffer,
/// so every mlir-opt flag (passes, printing) applies unchanged.
static int runOnONNX(const std::string &inputFile, const std::string &outputFile,
                     DialectRegistry &registry) {
  hpc::ImportOptions options;
  std::string error;
  for (const std::string &s : inputShapes) {
    if (!hpc::parseInputShape(s, options, error)) {
      llvm::errs() << "hpc-opt: error: " << error << "\n";
      return 1;
    }
  }
  options.shapesOnly = shapesOnly;
  options.bindInputsDir = bindInputs;

  MLIRContext context(registry);
  context.disableMultithreading(); // the import is sequential; skip the pool
  auto module = hpc::importONNXFile(context, inputFile, options, error);
  if (!module) {
    llvm::errs() << "hpc-opt: error: " << error << "\n";
    return 1;
  }
  std::string bytecode;
  llvm::raw_string_ostream os(bytecode);
  if (failed(writeBytecodeToFile(*module, os))) {
    llvm::errs() << "hpc-opt: error: cannot serialize the imported module\n";
    return 1;
  }
  module = nullptr;

  auto output = openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "hpc-opt: error: " << error << "\n";
    return 1;
  }
  auto config = MlirOptMainConfig::createFromCLOptions();
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(bytecode, inputFile);
  if (failed(MlirOptMain(output->os(), std::move(buffer), registry, config)))
    return 1;
  output->keep();
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllPasses();
  hpc::registerAllDialects(registry);
  hpc::registerAllPasses();

  auto [inputFile, outputFile] = registerAndParseCLIOptions(
      argc, argv, "HPC-Opt: hybrid-parallel compiler driver\n", registry);
  if (hpc::isONNXPath(inputFile))
    return runOnONNX(inputFile, outputFile, registry);
  return asMainReturnCode(MlirOptMain(argc, argv, inputFile, outputFile, registry));
}
