//===- LowerToRuntime.cpp - hpc program to LLVM dialect runtime calls -----===//
//
// The compiler decides, the runtime obeys: this pass fixes every buffer and
// the kernel order (hpc/Target/ProgramPlan.h) and spells the program as a
// straight line of calls into libhpcrt's C ABI (runtime/include/hpcrt.h),
// plus the JSON manifest the runtime reads at start.
//
//===----------------------------------------------------------------------===//

#include "hpc/Passes.h"
#include "hpc/Target/ProgramPlan.h"

#include "Dist/DistOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

namespace hpc {
#define GEN_PASS_DEF_HPCLOWERTORUNTIME
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

std::string hpc::locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (auto n = locationName(l); !n.empty())
        return n;
  return "";
}

namespace {

/// Attributes that may be absent (encoded with a presence flag).
bool isOptionalAttr(StringRef op, StringRef attr) {
  return op == "hpc.clip" && (attr == "min" || attr == "max");
}

/// An op's attributes in the runtime's encoding (hpcrt.h).
struct EncodedAttrs {
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  SmallVector<std::string> strings;
};

/// The mesh axis index of an axis name (dist ops name axes; the runtime
/// numbers them as the manifest's mesh does).
FailureOr<int64_t> axisIndex(Operation *op, StringRef name) {
  hpc::dist::MeshAttr mesh = hpc::dist::lookupMesh(op);
  int64_t index = mesh ? mesh.axisIndex(name) : -1;
  if (index < 0)
    return op->emitOpError("mesh axis '") << name << "' is not in the module's mesh",
           failure();
  return index;
}

/// A codec the runtime's reductions run (hpcrt.h): a string,
/// "int8_block:B", "topk:RATIO" or "powersgd:R[:no_feedback]", and for
/// PowerSGD its pieces and chunk bounds as two integer vectors.
LogicalResult encodeCompression(Operation *op, Attribute codec, EncodedAttrs &out) {
  using namespace hpc::dist;
  if (auto int8 = dyn_cast<Int8BlockAttr>(codec)) {
    out.strings.push_back("int8_block:" + std::to_string(int8.getBlock()));
    return success();
  }
  if (auto topk = dyn_cast<TopKAttr>(codec)) {
    // 17 significant digits: strtod reads back the same double.
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::format("%.17g", topk.getShare());
    out.strings.push_back("topk:" + text);
    return success();
  }
  auto psgd = dyn_cast<PowerSgdAttr>(codec);
  if (!psgd)
    return op->emitOpError("has a compression the runtime lacks: ") << codec;
  out.strings.push_back("powersgd:" + std::to_string(psgd.getRank()) +
                        (psgd.getErrorFeedback() ? "" : ":no_feedback"));
  SmallVector<CodecPiece> pieces =
      powerSgdPieces(psgd, cast<RankedTensorType>(op->getOperand(0).getType()));
  out.ints.push_back(2 * int64_t(pieces.size()));
  for (const CodecPiece &p : pieces)
    llvm::append_range(out.ints, ArrayRef<int64_t>{p.rows, p.cols});
  // The chunks of a node's members in two levels (else one).
  int64_t members = 1;
  if (auto perNode = op->getAttrOfType<IntegerAttr>("ranks_per_node"))
    if (auto levels = twoLevels(lookupMesh(op), axisNames(op->getAttrOfType<ArrayAttr>("axes")),
                                perNode.getInt()))
      members = levels->perNode;
  SmallVector<int64_t> bounds = powerSgdChunks(pieces, members);
  out.ints.push_back(int64_t(bounds.size()));
  llvm::append_range(out.ints, bounds);
  return success();
}

FailureOr<EncodedAttrs> encodeAttributes(Operation *op) {
  EncodedAttrs out;
  bool isDist = isa<hpc::dist::DistDialect>(op->getDialect());
  NamedAttrList attrs;
  for (StringAttr name : op->getName().getAttributeNames())
    if (std::optional<Attribute> a = op->getInherentAttr(name.getValue()); a && *a)
      attrs.set(name, *a);
  op->getName().populateDefaultAttrs(attrs);
  SmallVector<StringRef> names;
  for (StringAttr name : op->getName().getAttributeNames())
    names.push_back(name.getValue());
  llvm::sort(names);
  StringRef opName = op->getName().getStringRef();
  for (StringRef name : names) {
    Attribute a = attrs.get(name);
    if (isDist && name == "compression") {
      if (a && failed(encodeCompression(op, a, out)))
        return failure();
      continue;
    }
    if (name == "operandSegmentSizes")
      continue; // the operand ids keep every optional operand's place
    if (isDist && name == "axes") {
      auto axes = cast<ArrayAttr>(a);
      out.ints.push_back(axes.size());
      for (Attribute axis : axes) {
        auto index = axisIndex(op, cast<StringAttr>(axis).getValue());
        if (failed(index))
          return failure();
        out.ints.push_back(*index);
      }
      continue;
    }
    if (isDist && name == "ranks_per_node") {
      // 0: the flat collective.
      out.ints.push_back(a ? cast<IntegerAttr>(a).getInt() : 0);
      continue;
    }
    if (isDist && name == "axis") {
      auto index = axisIndex(op, cast<StringAttr>(a).getValue());
      if (failed(index))
        return failure();
      out.ints.push_back(*index);
      continue;
    }
    if (auto kind = dyn_cast_or_null<hpc::dist::ReductionKindAttr>(a)) {
      out.ints.push_back(static_cast<int64_t>(kind.getValue()));
      continue;
    }
    if (isOptionalAttr(opName, name)) {
      out.ints.push_back(a ? 1 : 0);
      if (!a)
        continue;
    }
    if (!a)
      return op->emitOpError("has no value for attribute '") << name << "'",
             failure();
    if (auto b = dyn_cast<BoolAttr>(a)) {
      out.ints.push_back(b.getValue());
    } else if (auto i = dyn_cast<IntegerAttr>(a)) {
      out.ints.push_back(i.getInt());
    } else if (auto f = dyn_cast<FloatAttr>(a)) {
      out.floats.push_back(f.getValueAsDouble());
    } else if (auto arr = dyn_cast<DenseI64ArrayAttr>(a)) {
      out.ints.push_back(arr.size());
      llvm::append_range(out.ints, arr.asArrayRef());
    } else if (auto arr = dyn_cast<DenseF64ArrayAttr>(a)) {
      out.ints.push_back(arr.size());
      llvm::append_range(out.floats, arr.asArrayRef());
    } else if (auto s = dyn_cast<StringAttr>(a)) {
      out.strings.push_back(s.str());
    } else if (auto t = dyn_cast<TypeAttr>(a)) {
      out.ints.push_back(hpc::runtimeDType(t.getValue()));
    } else {
      return op->emitOpError("has attribute '") << name
                                                << "' of a kind the runtime ABI lacks",
             failure();
    }
  }
  return out;
}

/// Operand ids in ODS order with -1 for absent optional operands.
SmallVector<int32_t> encodeIds(Operation *op, const hpc::ProgramPlan &plan) {
  SmallVector<int32_t> ids{int32_t(op->getNumResults())};
  for (Value r : op->getResults())
    ids.push_back(plan.tensorIds.lookup(r));
  // Ops with optional operands (gemm, conv, conv_transpose, layer_norm,
  // sgd_update) keep a fixed operand count: a missing operand is -1.
  if (auto conv = dyn_cast<hpc::ConvOp>(op)) {
    // Two optional operands: each keeps its place.
    ids.push_back(4);
    for (Value v : {conv.getInput(), conv.getWeight(), conv.getBias(), conv.getResidual()})
      ids.push_back(v ? plan.tensorIds.lookup(v) : -1);
    return ids;
  }
  int32_t expected = op->getNumOperands();
  if (isa<hpc::GemmOp, hpc::ConvTransposeOp, hpc::LayerNormOp>(op))
    expected = 3;
  // The updates' optional operands each keep their place: the momentum
  // buffer, the guard, the clip's norm and max norm.
  auto clipOperand = [](ValueRange clip, size_t i) { return clip.empty() ? Value() : clip[i]; };
  if (auto sgd = dyn_cast<hpc::SGDUpdateOp>(op)) {
    ids.push_back(7);
    for (Value v : std::initializer_list<Value>{
             sgd.getParam(), sgd.getGrad(), sgd.getLr(), sgd.getMomentumBuffer(),
                    sgd.getUnlessNonfinite(), clipOperand(sgd.getClip(), 0),
                    clipOperand(sgd.getClip(), 1)})
      ids.push_back(v ? plan.tensorIds.lookup(v) : -1);
    return ids;
  }
  if (auto adamw = dyn_cast<hpc::AdamWUpdateOp>(op)) {
    ids.push_back(9);
    for (Value v : std::initializer_list<Value>{
             adamw.getParam(), adamw.getGrad(), adamw.getExpAvg(), adamw.getExpAvgSq(),
                    adamw.getLr(), adamw.getStep(), adamw.getUnlessNonfinite(),
                    clipOperand(adamw.getClip(), 0), clipOperand(adamw.getClip(), 1)})
      ids.push_back(v ? plan.tensorIds.lookup(v) : -1);
    return ids;
  }
  ids.push_back(expected);
  for (Value v : op->getOperands())
    ids.push_back(plan.tensorIds.lookup(v));
  for (int32_t i = op->getNumOperands(); i < expected; ++i)
    ids.push_back(-1);
  return ids;
}

/// A dictionary of plain attributes (strings, numbers, booleans, nested
/// dictionaries) as JSON.
llvm::json::Value attributeJson(Attribute a) {
  if (auto d = dyn_cast<DictionaryAttr>(a)) {
    llvm::json::Object o;
    for (NamedAttribute n : d)
      o[n.getName().getValue()] = attributeJson(n.getValue());
    return o;
  }
  if (auto b = dyn_cast<BoolAttr>(a))
    return b.getValue();
  if (auto i = dyn_cast<IntegerAttr>(a))
    return i.getInt();
  if (auto f = dyn_cast<FloatAttr>(a))
    return f.getValueAsDouble();
  if (auto s = dyn_cast<StringAttr>(a))
    return s.getValue();
  if (auto list = dyn_cast<ArrayAttr>(a)) {
    llvm::json::Array out;
    for (Attribute e : list)
      out.push_back(attributeJson(e));
    return out;
  }
  return nullptr;
}

std::string manifestJson(ModuleOp module, const hpc::ProgramPlan &plan, StringRef model,
                         StringRef modelPath, StringRef weightsName) {
  using llvm::json::Array;
  using llvm::json::Object;
  Object m;
  m["version"] = 1;
  // A partitioned program runs on every rank of its mesh.
  if (auto mesh = module->getAttrOfType<hpc::dist::MeshAttr>("dist.mesh")) {
    Array axes;
    for (auto [name, size, level] :
         llvm::zip(mesh.getNames(), mesh.getSizes(), mesh.getLevels()))
      axes.push_back(Object{{"name", name.getValue()},
                            {"size", size},
                            {"level", hpc::dist::stringifyTopologyLevel(level)}});
    m["mesh"] = Object{{"axes", std::move(axes)}};
    if (auto bytes = module->getAttrOfType<IntegerAttr>("dist.bytes_per_rank"))
      m["bytes_per_rank"] = bytes.getInt();
    // The ZeRO stage the training state is sharded by (dist-zero).
    if (auto zero = module->getAttrOfType<IntegerAttr>("dist.zero"))
      m["zero"] = zero.getInt();
    // The node size the ranks were laid on, node-major (dist-propagate).
    if (auto perNode = module->getAttrOfType<IntegerAttr>("dist.ranks_per_node"))
      m["ranks_per_node"] = perNode.getInt();
    for (const char *level : {"bytes_within_nodes", "bytes_across_nodes"})
      if (auto bytes = module->getAttrOfType<IntegerAttr>(std::string("dist.") + level))
        m[level] = bytes.getInt();
  }
  // A pipeline stage's program: which stage, of how many, in which schedule.
  if (auto pipeline = module->getAttrOfType<DictionaryAttr>("hpc.pipeline")) {
    llvm::json::Value info = attributeJson(pipeline);
    if (auto stage = module->getAttrOfType<IntegerAttr>(hpc::kStageAttr))
      (*info.getAsObject())["stage"] = stage.getInt();
    m["pipeline"] = std::move(info);
  }
  m["model"] = model;
  // Where the source model was (`train --save-onnx` rewrites it).
  if (!modelPath.empty())
    m["model_path"] = modelPath;
  // What the products compute in (hpc-autocast); absent: fp32.
  if (auto precision = module->getAttrOfType<StringAttr>("hpc.precision"))
    m["precision"] = precision.getValue();
  // How the train step trades compute for activation memory (hpc-autodiff).
  if (auto recompute = module->getAttrOfType<StringAttr>("hpc.recompute"))
    m["recompute"] = recompute.getValue();
  // The cost model's prediction of this plan's step (the compile flow sets
  // it with a cluster): the runtime writes it beside what it measures.
  if (auto prediction = module->getAttrOfType<DictionaryAttr>("hpc.prediction"))
    m["prediction"] = attributeJson(prediction);
  m["arena_bytes"] = plan.arenaBytes;
  // The weights file's entries by name and offset: the runtime refuses a
  // file whose entries were renamed (the hash covers only the data).
  Array weightNames;
  for (auto [w, key] : llvm::zip(plan.weightEntries, hpc::weightKeys(plan)))
    weightNames.push_back(Object{{"name", key}, {"offset", w.dataOffset}});
  m["weights"] = Object{{"file", weightsName},
                        {"bytes", int64_t(plan.weightsData.size())},
                        {"hash", hpc::weightsHashHex(plan.weightsData)},
                        {"entries", std::move(weightNames)}};
  auto named = [](const std::vector<std::pair<std::string, int32_t>> &list) {
    Array a;
    for (auto &[name, id] : list)
      a.push_back(Object{{"name", name}, {"tensor", id}});
    return a;
  };
  m["inputs"] = named(plan.inputs);
  m["outputs"] = named(plan.outputs);
  Array tensors;
  for (const hpc::TensorSlot &t : plan.tensors) {
    Array shape;
    for (int64_t d : t.type.getShape())
      shape.push_back(d);
    const char *region = t.region == hpc::Region::Input   ? "input"
                         : t.region == hpc::Region::Arena ? "arena"
                         : t.region == hpc::Region::State ? "state"
                                                          : "weights";
    Object tensor{{"dtype", hpc::runtimeDType(t.type.getElementType())},
                  {"shape", std::move(shape)},
                  {"region", region},
                  {"index", t.index},
                  {"offset", t.offset}};
    // Activations are plain unless the plan says otherwise (hpc-plan-layouts);
    // the runtime picks the block size for its CPU.
    if (t.blocked)
      tensor["layout"] = "blocked";
    if (!t.rankAxes.empty()) {
      tensor["rank_axes"] = Array(t.rankAxes);
      tensor["rank_stride"] = t.rankStride;
    }
    tensors.push_back(std::move(tensor));
  }
  m["tensors"] = std::move(tensors);
  if (!plan.stateEntries.empty()) {
    m["state_bytes"] = plan.stateBytes;
    Array state;
    for (const hpc::ProgramPlan::StateEntry &e : plan.stateEntries) {
      Object entry{{"name", e.name}, {"tensor", e.tensor}, {"role", e.role},
                   {"init", e.initOffset < 0 ? "zeros" : "weights"}};
      if (e.initOffset >= 0)
        entry["weights_offset"] = e.initOffset;
      if (!e.rankAxes.empty()) {
        entry["rank_axes"] = Array(e.rankAxes);
        entry["rank_stride"] = e.rankStride;
      }
      if (!e.split.empty()) {
        Array split;
        for (const std::vector<int64_t> &axes : e.split)
          split.push_back(Array(axes));
        entry["split"] = std::move(split);
      }
      state.push_back(std::move(entry));
    }
    m["state"] = std::move(state);
  }
  if (auto train = module->getAttrOfType<DictionaryAttr>("hpc.train")) {
    llvm::json::Value info = attributeJson(train);
    Object &o = *info.getAsObject();
    o["lr_input"] = "hpc.lr";
    o["step_input"] = "hpc.step";
    o["loss_output"] = "loss";
    o["grad_norm_output"] = "grad_norm";
    // hpc-autodiff's loss-scale-input (the train pipeline's) and
    // hpc-optimizer's clipping threshold, when the step has them.
    for (const auto &input : plan.inputs) {
      if (input.first == "hpc.loss_scale")
        o["loss_scale_input"] = "hpc.loss_scale";
      if (input.first == "hpc.clip_norm")
        o["clip_norm_input"] = "hpc.clip_norm";
    }
    m["train"] = std::move(info);
  }
  // The stability guard's conservative program says what it changes
  // (hpc-opt sets it on the module it compiles as such).
  if (auto conservative = module->getAttrOfType<DictionaryAttr>("hpc.conservative"))
    m["conservative"] = attributeJson(conservative);
  Array ops;
  std::string block; // the block of the ops before (a rewrite may drop the tag)
  for (Operation *op : plan.kernels) {
    Object entry{{"name", op->getName().getStringRef()},
                 {"loc", hpc::locationName(op->getLoc())}};
    // A pipeline stage's blocks and its waits on a neighbour (dist-pipeline).
    if (auto tag = op->getAttrOfType<StringAttr>("hpc.block"))
      block = tag.getValue().str();
    if (!block.empty())
      entry["block"] = block;
    if (op->hasAttr("hpc.recv"))
      entry["recv"] = true;
    ops.push_back(std::move(entry));
  }
  m["ops"] = std::move(ops);
  std::string out;
  llvm::raw_string_ostream(out) << llvm::json::Value(std::move(m));
  return out;
}

struct LowerToRuntime : hpc::impl::HPCLowerToRuntimeBase<LowerToRuntime> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func) {
      module.emitError("no func.func @main to compile");
      return signalPassFailure();
    }
    auto plan = hpc::planProgram(func);
    if (failed(plan))
      return signalPassFailure();
    // A pipeline stage's program has its own weights file: PATH.stageK.safetensors.
    auto perStage = [&](std::string path) {
      auto stage = module->getAttrOfType<IntegerAttr>(hpc::kStageAttr);
      if (!stage || path.empty())
        return path;
      StringRef ext = llvm::sys::path::extension(path);
      return path.substr(0, path.size() - ext.size()) + ".stage" +
             std::to_string(stage.getInt()) + ext.str();
    };
    std::string file = perStage(weightsFile);
    if (!file.empty()) {
      std::string error;
      if (failed(hpc::writeWeightsFile(*plan, file, error))) {
        module.emitError(error);
        return signalPassFailure();
      }
    }
    std::string name =
        weightsName.empty()
            ? llvm::sys::path::filename(file.empty() ? "weights.safetensors" : StringRef(file))
                  .str()
            : perStage(weightsName);
    if (failed(emit(module, *plan, name)))
      return signalPassFailure();
    func.erase();
    // The planned peak, for the driver's report and for tests.
    module->setAttr("hpc.arena_bytes",
                    IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                     plan->arenaBytes));
  }

  LogicalResult emit(ModuleOp module, const hpc::ProgramPlan &plan,
                     StringRef weightsName) {
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    Type i32 = b.getI32Type(), i64 = b.getI64Type(), f64 = b.getF64Type();
    auto i8 = b.getI8Type();

    // The manifest, NUL-terminated, with external linkage for the runtime.
    std::string manifest = manifestJson(module, plan, modelName, modelPath, weightsName);
    manifest.push_back('\0');
    LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(i8, manifest.size()),
                           /*isConstant=*/true, LLVM::Linkage::External,
                           "hpc_manifest", b.getStringAttr(manifest));

    auto kernelType = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                                  {ptr, i32, ptr, ptr, ptr, ptr});
    llvm::StringMap<LLVM::LLVMFuncOp> callees;
    int counter = 0;
    auto constantArray = [&](StringRef prefix, Type elt, Attribute values,
                             int64_t n) -> LLVM::GlobalOp {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToEnd(module.getBody());
      return LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(elt, n), true,
                                    LLVM::Linkage::Internal,
                                    (prefix + std::to_string(counter++)).str(), values);
    };

    // Encode everything first so a failure leaves the module unchanged.
    struct Call {
      std::string callee;
      SmallVector<int32_t> ids;
      EncodedAttrs attrs;
    };
    std::vector<Call> calls;
    for (Operation *op : plan.kernels) {
      auto attrs = encodeAttributes(op);
      if (failed(attrs))
        return failure();
      std::string callee = "hpcrt_" + op->getName().stripDialect().str();
      calls.push_back({callee, encodeIds(op, plan), std::move(*attrs)});
    }

    auto run = LLVM::LLVMFuncOp::create(
        b, loc, "hpc_program_run",
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptr}));
    Block *entry = run.addEntryBlock(b);
    Value context = entry->getArgument(0);
    for (auto [index, call] : llvm::enumerate(calls)) {
      LLVM::LLVMFuncOp &callee = callees[call.callee];
      if (!callee) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(run);
        callee = LLVM::LLVMFuncOp::create(b, loc, call.callee, kernelType);
      }
      b.setInsertionPointToEnd(entry);
      Value null = LLVM::ZeroOp::create(b, loc, ptr);
      auto address = [&](LLVM::GlobalOp g) -> Value {
        return LLVM::AddressOfOp::create(b, loc, g);
      };
      auto idsType = RankedTensorType::get({int64_t(call.ids.size())}, i32);
      Value ids = address(constantArray("ids", i32,
                                        DenseElementsAttr::get(idsType, ArrayRef(call.ids)),
                                        call.ids.size()));
      Value ints = null, floats = null, strings = null;
      if (!call.attrs.ints.empty()) {
        auto t = RankedTensorType::get({int64_t(call.attrs.ints.size())}, i64);
        ints = address(constantArray("iattrs", i64,
                                     DenseElementsAttr::get(t, ArrayRef(call.attrs.ints)),
                                     call.attrs.ints.size()));
      }
      if (!call.attrs.floats.empty()) {
        auto t = RankedTensorType::get({int64_t(call.attrs.floats.size())}, f64);
        floats = address(constantArray("fattrs", f64,
                                       DenseElementsAttr::get(t, ArrayRef(call.attrs.floats)),
                                       call.attrs.floats.size()));
      }
      if (!call.attrs.strings.empty())
        strings = address(stringTable(b, module, call.attrs.strings, counter));
      Value opIndex = LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(index));
      LLVM::CallOp::create(b, loc, callee, ValueRange{context, opIndex, ids, ints, floats, strings});
    }
    b.setInsertionPointToEnd(entry);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
    return success();
  }

  /// A constant array of pointers to NUL-terminated strings.
  LLVM::GlobalOp stringTable(OpBuilder &b, ModuleOp module,
                             ArrayRef<std::string> strings, int &counter) {
    OpBuilder::InsertionGuard guard(b);
    Location loc = module.getLoc();
    MLIRContext *ctx = module.getContext();
    auto ptr = LLVM::LLVMPointerType::get(ctx);
    SmallVector<LLVM::GlobalOp> globals;
    for (const std::string &s : strings) {
      b.setInsertionPointToEnd(module.getBody());
      std::string z = s + '\0';
      globals.push_back(LLVM::GlobalOp::create(
          b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), z.size()), true,
          LLVM::Linkage::Internal, "str" + std::to_string(counter++),
          b.getStringAttr(z)));
    }
    b.setInsertionPointToEnd(module.getBody());
    auto arrayType = LLVM::LLVMArrayType::get(ptr, strings.size());
    auto table = LLVM::GlobalOp::create(b, loc, arrayType, true, LLVM::Linkage::Internal,
                                        "sattrs" + std::to_string(counter++), Attribute());
    Block *init = b.createBlock(&table.getInitializerRegion());
    b.setInsertionPointToStart(init);
    Value array = LLVM::UndefOp::create(b, loc, arrayType);
    for (auto [i, g] : llvm::enumerate(globals)) {
      Value p = LLVM::AddressOfOp::create(b, loc, g);
      array = LLVM::InsertValueOp::create(b, loc, array, p, ArrayRef<int64_t>{int64_t(i)});
    }
    LLVM::ReturnOp::create(b, loc, array);
    return table;
  }
};

} // namespace
