//===- PassManagerReuseTest.cpp - one PassManager, many modules -----------===//
//
// Passes keep no state between runs: a compiler that embeds HPC-Opt builds
// the hpc-compile pipeline once and runs it on every module it compiles.
// Each module must come out exactly as a fresh PassManager makes it, for a
// forward program partitioned over dp=2 x tp=2 (two different models) and for a
// train step (two batch sizes), in one MLIRContext.
//
//===----------------------------------------------------------------------===//

#include "hpc/Import/ONNXImporter.h"
#include "hpc/InitAll.h"
#include "hpc/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <functional>
#include <string>

using namespace mlir;

namespace {

class PassManagerReuse : public ::testing::Test {
protected:
  PassManagerReuse() {
    DialectRegistry registry;
    hpc::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.disableMultithreading();
  }

  /// Imports a bundled example with one input shape; fails the test on error.
  OwningOpRef<ModuleOp> import(const std::string &model, const std::string &shape,
                               std::vector<std::string> extraOutputs = {}) {
    hpc::ImportOptions options;
    std::string error;
    EXPECT_TRUE(hpc::parseInputShape(shape, options, error)) << error;
    options.extraOutputs = std::move(extraOutputs);
    auto module = hpc::importONNXFile(context, std::string(HPC_EXAMPLES_DIR) + "/" + model,
                                      options, error);
    EXPECT_TRUE(module) << error;
    return module;
  }

  static std::string print(ModuleOp module) {
    std::string text;
    llvm::raw_string_ostream os(text);
    module.print(os);
    return text;
  }

  /// Runs `build`'s pipeline on `a` and `b` with one PassManager and on fresh
  /// copies of each with a PassManager of their own; the outputs must agree.
  void expectReusable(const std::function<OwningOpRef<ModuleOp>()> &makeA,
                      const std::function<OwningOpRef<ModuleOp>()> &makeB,
                      const hpc::CompileOptions &options) {
    OwningOpRef<ModuleOp> a = makeA(), b = makeB();
    ASSERT_TRUE(a && b);
    PassManager shared(&context);
    hpc::buildCompilePipeline(shared, options);
    ASSERT_TRUE(succeeded(shared.run(*a)));
    ASSERT_TRUE(succeeded(shared.run(*b)));

    for (auto [make, reused] : {std::pair{makeA, print(*a)}, std::pair{makeB, print(*b)}}) {
      OwningOpRef<ModuleOp> fresh = make();
      PassManager own(&context);
      hpc::buildCompilePipeline(own, options);
      ASSERT_TRUE(succeeded(own.run(*fresh)));
      EXPECT_EQ(reused, print(*fresh));
    }
    EXPECT_NE(print(*a), print(*b)); // two modules, not one twice
  }

  MLIRContext context;
};

TEST_F(PassManagerReuse, ForwardOverDataParallelism) {
  hpc::CompileOptions options;
  options.mesh = "dp=2,tp=2";
  options.asyncCollectives = true;
  expectReusable([&] { return import("mlp.onnx", "x=4,784"); },
                 [&] { return import("gpt2.onnx", "input_ids=2,16"); }, options);
}

TEST_F(PassManagerReuse, TrainStep) {
  hpc::CompileOptions options;
  options.train = true;
  options.loss = "cross-entropy:fc2,labels";
  options.optimizer = "adamw";
  options.clipNorm = 1.0;
  options.mesh = "dp=2";
  expectReusable([&] { return import("mlp.onnx", "x=4,784", {"fc2"}); },
                 [&] { return import("mlp.onnx", "x=8,784", {"fc2"}); }, options);
}

TEST_F(PassManagerReuse, PipelinedStepWithZeroRecomputeAndBf16) {
  hpc::CompileOptions options;
  options.train = true;
  options.loss = "cross-entropy:logits,labels";
  options.optimizer = "adamw";
  options.mesh = "pp=2,dp=2";
  options.zero = 1;
  options.microBatches = 2;
  options.recompute = "full";
  options.precision = hpc::Precision::BF16;
  // Each import is one micro-batch, split over the dp ranks.
  expectReusable([&] { return import("gpt2.onnx", "input_ids=2,16", {"logits"}); },
                 [&] { return import("gpt2.onnx", "input_ids=4,8", {"logits"}); }, options);
}

} // namespace
