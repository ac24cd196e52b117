//===- FuzzImporter.cpp - libFuzzer target of the ONNX importer -----------===//
//
// Feeds each input to hpc::importONNXFile, the importer's whole path from
// bytes to a verified module (protobuf or ONNX text parsing, validation,
// every op converter, ONNX's shape inference as a cross-check). The bytes
// are written to model.onnx (model.onnxtxt when built with HPC_FUZZ_TEXT)
// in a scratch directory of this process, which holds nothing else, so that
// external data names resolve to nothing. The importer must accept an input
// or fail with one line naming the file; anything else (a crash, a
// sanitizer report, an empty or multi-line error) is a finding.
//
//===----------------------------------------------------------------------===//

#include "hpc/Import/ONNXImporter.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#ifdef HPC_FUZZ_TEXT
static const char *const ModelName = "model.onnxtxt";
#else
static const char *const ModelName = "model.onnx";
#endif

namespace {

/// The scratch directory and the model path in it; removed at exit.
struct Scratch {
  llvm::SmallString<128> dir;
  std::string model;

  Scratch() {
    if (llvm::sys::fs::createUniqueDirectory("hpc-fuzz-importer", dir)) {
      std::fprintf(stderr, "FuzzImporter: cannot create a scratch directory\n");
      std::abort();
    }
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, ModelName);
    model = path.str().str();
  }
  ~Scratch() {
    llvm::sys::fs::remove(model);
    llvm::sys::fs::remove(dir);
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Created once: loading the dialects for every input would dominate.
  // Threading is off so that a run is one thread (and deterministic).
  static mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  static Scratch scratch;

  {
    std::ofstream out(scratch.model, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(data), std::streamsize(size));
    if (!out) {
      std::fprintf(stderr, "FuzzImporter: cannot write %s\n", scratch.model.c_str());
      std::abort();
    }
  }
  hpc::ImportOptions options;
  std::string error;
  auto module = hpc::importONNXFile(context, scratch.model, options, error);
  if (module)
    return 0;
  // A rejection is one non-empty line that names the file.
  if (error.empty() || error.find('\n') != std::string::npos ||
      error.rfind(scratch.model, 0) != 0) {
    std::fprintf(stderr, "FuzzImporter: bad error text: '%s'\n", error.c_str());
    std::abort();
  }
  return 0;
}
