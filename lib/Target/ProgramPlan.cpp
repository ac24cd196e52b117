//===- ProgramPlan.cpp - tensor slots, arena plan and weights file --------===//
//
// The arena plan is an offline interval packing: each intermediate is live
// from the op that writes it to its last reader (function results to the end;
// views extend their root's range), and tensors are placed largest first at
// the lowest offset that no tensor with an overlapping live range occupies.
// An op's result never shares bytes with its operands (their ranges overlap
// at that op), so kernels need not support in-place execution.
//
//===----------------------------------------------------------------------===//

#include "hpc/Target/ProgramPlan.h"

#include "Dist/DistOps.h"
#include "HPC/HPCOps.h"
#include "hpcrt.h"

#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;

static constexpr int64_t kAlign = 64;

static int64_t alignUp(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

int32_t hpc::runtimeDType(Type t) {
  if (t.isF32()) return 1;
  if (t.isF64()) return 11;
  if (t.isF16()) return 10;
  if (t.isBF16()) return 16;
  if (t.isInteger(1)) return 9;
  if (auto it = dyn_cast<IntegerType>(t)) {
    bool u = it.isUnsigned();
    switch (it.getWidth()) {
    case 8: return u ? 2 : 3;
    case 16: return u ? 4 : 5;
    case 32: return u ? 12 : 6;
    case 64: return u ? 13 : 7;
    default: break;
    }
  }
  return -1;
}

static int64_t elementBytes(Type t) {
  return t.isInteger(1) ? 1 : t.getIntOrFloatBitWidth() / 8;
}

std::string hpc::weightsHashHex(StringRef data) {
  char hex[17];
  snprintf(hex, sizeof(hex), "%016llx",
           (unsigned long long)hpcrt_hash64(data.data(), data.size()));
  return hex;
}

FailureOr<std::string> hpc::elementBytesOf(ElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  int64_t n = type.getNumElements();
  Type elt = type.getElementType();
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    auto *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return failure();
    ArrayRef<char> data = blob->getData();
    return std::string(data.begin(), data.end());
  }
  auto dense = dyn_cast<DenseElementsAttr>(attr);
  if (!dense)
    return failure();
  if (elt.isInteger(1)) {
    std::string out;
    out.reserve(n);
    for (bool b : dense.getValues<bool>())
      out.push_back(b ? 1 : 0);
    return out;
  }
  ArrayRef<char> raw = dense.getRawData();
  if (dense.isSplat()) {
    std::string out;
    out.reserve(n * raw.size());
    for (int64_t i = 0; i < n; ++i)
      out.append(raw.begin(), raw.end());
    return out;
  }
  return std::string(raw.begin(), raw.end());
}

/// Ops whose result is the operand's storage with another shape.
static bool isView(Operation *op) { return hpc::isViewOp(op); }

bool hpc::isBlockableType(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.hasStaticShape() && t.getRank() == 4 &&
         (t.getElementType().isF32() || t.getElementType().isBF16()) &&
         t.getDimSize(1) % kBlockedChannelMultiple == 0;
}

/// The f32 blockable types: relu, add and the pools read and write blocked
/// tensors only in f32 (under --precision=bf16 they run in f32 between the
/// casts, so only convolutions and casts meet blocked bf16 tensors).
static bool isBlockableF32(Type type) {
  return hpc::isBlockableType(type) && cast<RankedTensorType>(type).getElementType().isF32();
}

bool hpc::propagatesLayout(Operation *op) {
  return isa<hpc::ReluOp, hpc::AddOp, hpc::MaxPoolOp, hpc::CastOp>(op);
}

/// Whether `use` is hpc.conv's residual operand (the last one, when present:
/// the input may be the same value).
static bool isConvResidual(OpOperand &use) {
  auto conv = dyn_cast<hpc::ConvOp>(use.getOwner());
  return conv && conv.getResidual() &&
         use.getOperandNumber() == conv->getNumOperands() - 1;
}

bool hpc::readsInResultLayout(OpOperand &use) {
  return propagatesLayout(use.getOwner()) || isConvResidual(use);
}

bool hpc::convLayoutsFit(Operation *conv, bool inputBlocked, bool resultBlocked) {
  if (inputBlocked == resultBlocked)
    return true;
  auto input = dyn_cast<RankedTensorType>(conv->getOperand(0).getType());
  return !inputBlocked && input && input.getRank() >= 2 && input.getDimSize(1) <= 4;
}

bool hpc::mayWriteBlocked(Operation *op) {
  if (op->getNumResults() == 0 || !isBlockableType(op->getResult(0).getType()))
    return false;
  Type result = op->getResult(0).getType();
  if (isa<hpc::ConvOp>(op))
    return true;
  // A cast between f32 and bf16 of a blockable tensor: one element order.
  if (isa<hpc::CastOp>(op))
    return isBlockableType(op->getOperand(0).getType());
  if (!isBlockableF32(result))
    return false;
  if (isa<hpc::ReluOp>(op))
    return true;
  // No broadcast: both operands have the result's shape.
  if (auto add = dyn_cast<hpc::AddOp>(op))
    return add.getLhs().getType() == add.getType() &&
           add.getRhs().getType() == add.getType();
  if (auto pool = dyn_cast<hpc::MaxPoolOp>(op))
    return isBlockableF32(pool.getInput().getType()) &&
           llvm::all_of(pool.getDilations(), [](int64_t d) { return d == 1; });
  return false;
}

bool hpc::mayReadBlocked(OpOperand &use) {
  Operation *op = use.getOwner();
  if (!isBlockableType(use.get().getType()))
    return false;
  if (isa<hpc::ConvOp>(op))
    return use.getOperandNumber() == 0 || isConvResidual(use);
  if (isa<hpc::CastOp>(op))
    return mayWriteBlocked(op);
  if (isa<hpc::ReluOp, hpc::GlobalAvgPoolOp>(op))
    return isBlockableF32(use.get().getType());
  if (isa<hpc::AddOp, hpc::MaxPoolOp>(op))
    return mayWriteBlocked(op);
  return false;
}

/// Every blocked tensor is written and read by ops that can (see
/// ProgramPlan.h): anything else would see the bytes in the wrong order.
static LogicalResult checkLayouts(Block &body, const hpc::ProgramPlan &plan) {
  auto blocked = [&](Value v) {
    auto it = plan.tensorIds.find(v);
    return it != plan.tensorIds.end() && plan.tensors[it->second].blocked;
  };
  for (Operation &op : body) {
    if (op.hasAttr(hpc::kBlockedAttrName) && !hpc::mayWriteBlocked(&op))
      return op.emitOpError("cannot write its result in the blocked layout (")
                 << hpc::kBlockedAttrName << ")",
             failure();
    for (OpOperand &use : op.getOpOperands())
      if (blocked(use.get()) && !hpc::mayReadBlocked(use))
        return op.emitOpError("cannot read operand ")
                   << use.getOperandNumber() << " in the blocked layout",
               failure();
    if (isa<hpc::ConvOp>(op) &&
        !hpc::convLayoutsFit(&op, blocked(op.getOperand(0)), blocked(op.getResult(0))))
      return op.emitOpError("cannot read its input and write its result in these layouts "
                            "(oneDNN has no direct convolution for the mix)"),
             failure();
    for (OpOperand &use : op.getOpOperands())
      if (hpc::readsInResultLayout(use) && blocked(use.get()) != blocked(op.getResult(0)))
        return op.emitOpError(hpc::propagatesLayout(&op)
                                  ? "must read and write one layout (its operands and "
                                    "result all blocked or all plain)"
                                  : "must read its residual in its result's layout"),
               failure();
  }
  return success();
}

/// A state tensor: a slot in the state region; its initial value (if any)
/// goes to the weights data under its name, from where the runtime copies it.
template <typename AddTensor>
static LogicalResult planVariable(hpc::VariableOp var, hpc::ProgramPlan &plan,
                                  AddTensor &addTensor) {
  for (const hpc::ProgramPlan::StateEntry &e : plan.stateEntries)
    if (e.name == var.getName())
      return var.emitOpError("state name '") << var.getName() << "' is used twice",
             failure();
  hpc::TensorSlot slot;
  slot.region = hpc::Region::State;
  slot.offset = alignUp(plan.stateBytes);
  if (failed(addTensor(var.getResult(), slot)))
    return failure();
  int32_t id = plan.tensors.size() - 1;
  plan.stateBytes = slot.offset + plan.tensors[id].bytes;
  int64_t init = -1;
  std::vector<int64_t> rankAxes;
  if (auto value = var.getValue()) {
    auto bytes = hpc::elementBytesOf(*value);
    if (failed(bytes) || int64_t(bytes->size()) != plan.tensors[id].bytes)
      return var.emitOpError("has initial data the compiler cannot read"), failure();
    plan.weightsData.resize(alignUp(plan.weightsData.size()), '\0');
    init = plan.weightsData.size();
    plan.weightsData += *bytes;
    plan.weightEntries.push_back({var.getName().str(), id, init, nullptr, nullptr});
  } else if (auto whole = var->getAttrOfType<ElementsAttr>("dist.global_value")) {
    // A sharded parameter (dist-partition: ZeRO-3's rows, a tensor-parallel
    // piece): every rank's piece, stored once, rank-major.
    auto bytes = hpc::elementBytesOf(whole);
    hpc::dist::MeshAttr mesh = hpc::dist::lookupMesh(var);
    auto axes = var->getAttrOfType<ArrayAttr>("dist.rank_rows");
    int64_t pieces = 1;
    for (Attribute a : axes ? axes : ArrayAttr()) {
      int64_t index = mesh ? mesh.axisIndex(cast<StringAttr>(a).getValue()) : -1;
      if (index < 0)
        return var.emitOpError("names a mesh axis the module's mesh does not have"), failure();
      rankAxes.push_back(index);
      pieces *= mesh.getSizes()[index];
    }
    if (failed(bytes) || !axes || int64_t(bytes->size()) != plan.tensors[id].bytes * pieces)
      return var.emitOpError("has whole initial data the compiler cannot read"), failure();
    plan.weightsData.resize(alignUp(plan.weightsData.size()), '\0');
    init = plan.weightsData.size();
    plan.weightsData += *bytes;
    plan.weightEntries.push_back({var.getName().str(), id, init,
                                  var->getAttrOfType<DictionaryAttr>("dist.init_pieces_of"),
                                  cast<RankedTensorType>(whole.getType())});
  }
  std::vector<std::vector<int64_t>> split;
  if (auto dims = var->getAttrOfType<ArrayAttr>("dist.state_split")) {
    hpc::dist::MeshAttr mesh = hpc::dist::lookupMesh(var);
    bool any = false;
    for (Attribute d : dims) {
      std::vector<int64_t> axes;
      for (Attribute a : cast<ArrayAttr>(d)) {
        int64_t index = mesh ? mesh.axisIndex(cast<StringAttr>(a).getValue()) : -1;
        if (index < 0)
          return var.emitOpError("names a mesh axis the module's mesh does not have"),
                 failure();
        axes.push_back(index);
      }
      any |= !axes.empty();
      split.push_back(std::move(axes));
    }
    if (!any)
      split.clear();
  }
  plan.stateEntries.push_back({var.getName().str(), id, var.getRole().str(), init, rankAxes,
                               rankAxes.empty() ? 0 : plan.tensors[id].bytes,
                               std::move(split)});
  return success();
}

/// The error-feedback operand of a compressed reduction (null: none).
static Value errorFeedbackOf(Operation *op) {
  if (auto o = dyn_cast<hpc::dist::AllReduceOp>(op))
    return o.getFeedback();
  if (auto o = dyn_cast<hpc::dist::AllReduceStartOp>(op))
    return o.getFeedback();
  if (auto o = dyn_cast<hpc::dist::ReduceScatterOp>(op))
    return o.getFeedback();
  if (auto o = dyn_cast<hpc::dist::ReduceScatterStartOp>(op))
    return o.getFeedback();
  return Value();
}

/// An optimizer update (or an assign) writes its parameter and buffers in
/// place: they must
/// be state, and no later op may read them (it would see the new values).
static LogicalResult checkStateUpdate(Operation *op, const hpc::ProgramPlan &plan) {
  for (unsigned i : hpc::inPlaceOperands(op)) {
    if (i >= op->getNumOperands())
      continue;
    Value v = op->getOperand(i);
    // ZeRO (dist-zero): the update writes a copy of this rank's rows of the
    // parameter, which a gather then reads back into the parameter.
    if (i == 0 && op->hasAttr("dist.updates_shard"))
      continue;
    if (plan.tensors[plan.tensorIds.lookup(v)].region != hpc::Region::State)
      return op->emitOpError("updates operand ") << i << ", which is not a state tensor "
                                                 << "(hpc.variable)",
             failure();
    for (Operation *user : v.getUsers())
      if (user != op && op->isBeforeInBlock(user))
        return user->emitOpError("reads state that an earlier optimizer update wrote"),
               failure();
  }
  return success();
}

/// Whether the all-gather whose result `assign` copies into its target may
/// write the target directly: the result has no other reader and fills a
/// fresh arena buffer, the target is a whole state tensor of the same type,
/// and nothing touches the target after the gather starts.
static bool gathersIntoTarget(hpc::AssignOp assign, const hpc::ProgramPlan &plan,
                              const std::vector<int32_t> &root) {
  Value value = assign.getValue(), target = assign.getTarget();
  if (!value.hasOneUse() || value.getType() != target.getType())
    return false;
  Operation *origin = value.getDefiningOp();
  if (auto wait = dyn_cast_or_null<hpc::dist::WaitOp>(origin)) {
    origin = wait.getToken().getDefiningOp();
    if (!isa_and_nonnull<hpc::dist::AllGatherStartOp>(origin) || !wait.getToken().hasOneUse())
      return false;
  } else if (!isa_and_nonnull<hpc::dist::AllGatherOp>(origin)) {
    return false;
  }
  int32_t targetId = plan.tensorIds.lookup(target);
  int32_t from = root[plan.tensorIds.lookup(value)];
  if (root[targetId] != targetId || plan.tensors[targetId].region != hpc::Region::State ||
      plan.tensors[from].region != hpc::Region::Arena ||
      from != plan.tensorIds.lookup(origin->getResult(0)))
    return false;
  return llvm::all_of(target.getUsers(), [&](Operation *user) {
    return user == assign || origin->getBlock() != user->getBlock() ||
           user->isBeforeInBlock(origin);
  });
}

FailureOr<hpc::ProgramPlan> hpc::planProgram(func::FuncOp func) {
  ProgramPlan plan;
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("must have one block to be compiled"), failure();
  Block &body = func.getBody().front();

  auto addTensor = [&](Value v, TensorSlot slot) -> LogicalResult {
    // A token is the buffer its collective fills (nothing for a send).
    Type vt = v.getType();
    if (auto token = dyn_cast<hpc::dist::TokenType>(vt))
      vt = token.getPayload() ? token.getPayload()
                              : RankedTensorType::get({0}, IntegerType::get(v.getContext(), 8));
    auto type = dyn_cast<RankedTensorType>(vt);
    if (!type || !type.hasStaticShape())
      return emitError(v.getLoc(), "cannot compile a tensor of type ")
             << v.getType() << " (needs a static shape)";
    if (runtimeDType(type.getElementType()) < 0)
      return emitError(v.getLoc(), "the runtime has no element type ")
             << type.getElementType();
    slot.type = type;
    slot.bytes = type.getNumElements() * elementBytes(type.getElementType());
    plan.tensorIds[v] = plan.tensors.size();
    plan.tensors.push_back(slot);
    return success();
  };

  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    TensorSlot slot;
    slot.region = Region::Input;
    slot.index = i;
    if (failed(addTensor(arg, slot)))
      return failure();
    auto name = func.getArgAttrOfType<StringAttr>(i, "hpc.name");
    plan.inputs.push_back({name ? name.str() : "input" + std::to_string(i),
                           plan.tensorIds[arg]});
  }

  // Storage roots (a view's root is its operand's root), live ranges.
  std::vector<int32_t> root;
  std::vector<int64_t> defIndex, lastUse;
  auto grow = [&] {
    root.resize(plan.tensors.size());
    defIndex.resize(plan.tensors.size(), 0);
    lastUse.resize(plan.tensors.size(), 0);
  };

  grow();
  for (int32_t id = 0; id < int32_t(plan.tensors.size()); ++id)
    root[id] = id;

  llvm::DenseMap<Value, SmallVector<int32_t>> startInputs;
  int64_t index = 0;
  for (Operation &op : body) {
    ++index;
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        auto name = func.getResultAttrOfType<StringAttr>(i, "hpc.name");
        plan.outputs.push_back({name ? name.str() : "output" + std::to_string(i),
                                plan.tensorIds.lookup(v)});
        lastUse[root[plan.tensorIds.lookup(v)]] = INT64_MAX;
      }
      continue;
    }
    if (isa<hpc::dist::AnnotateOp, hpc::dist::ReshardOp>(op))
      return op.emitOpError("has no runtime kernel (run dist-partition first)"), failure();
    if (!isa<hpc::HPCDialect, hpc::dist::DistDialect>(op.getDialect()))
      return op.emitOpError("cannot be compiled (only hpc and dist ops are)"), failure();
    for (Value v : op.getOperands()) {
      int32_t id = plan.tensorIds.lookup(v);
      lastUse[root[id]] = std::max(lastUse[root[id]], index);
    }
    if (auto var = dyn_cast<hpc::VariableOp>(op)) {
      if (failed(planVariable(var, plan, addTensor)))
        return failure();
      grow();
      root.back() = plan.tensors.size() - 1;
      continue;
    }
    if (auto assign = dyn_cast<hpc::AssignOp>(op)) {
      // A gathered value only this assign reads is gathered straight into
      // its target (ZeRO's parameters): no buffer, no copy.
      if (gathersIntoTarget(assign, plan, root)) {
        int32_t target = plan.tensorIds.lookup(assign.getTarget());
        int32_t from = root[plan.tensorIds.lookup(assign.getValue())];
        for (int32_t &r : root)
          if (r == from)
            r = target;
        continue;
      }
    }
    if (Value feedback = errorFeedbackOf(&op)) {
      // A compressed reduction writes its error-feedback state in place.
      if (plan.tensors[plan.tensorIds.lookup(feedback)].region != hpc::Region::State ||
          !feedback.hasOneUse())
        return op.emitOpError("needs its error-feedback state to be an hpc.variable no "
                              "other op reads"),
               failure();
    }
    if (!hpc::inPlaceOperands(&op).empty()) {
      if (failed(checkStateUpdate(&op, plan)))
        return failure();
      plan.kernels.push_back(&op);
      continue;
    }
    if (isa<hpc::ConstantOp, hpc::WeightOp>(op)) {
      ElementsAttr value;
      std::string name;
      if (auto c = dyn_cast<hpc::ConstantOp>(op)) {
        value = c.getValue();
        name = "const." + std::to_string(plan.weightEntries.size());
      } else {
        auto w = cast<hpc::WeightOp>(op);
        if (!w.getValue())
          return op.emitOpError("weight '")
                     << w.getName()
                     << "' has no data (was the model imported with "
                        "--shapes-only?)",
                 failure();
        value = *w.getValue();
        name = w.getName().str();
      }
      auto bytes = hpc::elementBytesOf(value);
      if (failed(bytes))
        return op.emitOpError("has data the compiler cannot read"), failure();
      TensorSlot slot;
      slot.region = Region::Weights;
      plan.weightsData.resize(alignUp(plan.weightsData.size()), '\0');
      slot.offset = plan.weightsData.size();
      plan.weightsData += *bytes;
      if (failed(addTensor(op.getResult(0), slot)))
        return failure();
      if (int64_t(bytes->size()) != plan.tensors.back().bytes)
        return op.emitOpError("data size does not match its type"), failure();
      grow();
      root.back() = plan.tensors.size() - 1;
      plan.weightEntries.push_back({name, int32_t(plan.tensors.size() - 1), slot.offset,
                                    op.getAttrOfType<DictionaryAttr>("dist.pieces_of"),
                                    nullptr});
      continue;
    }
    // An asynchronous op reads its operands until its wait: they stay live
    // until then (to the end when nothing waits).
    if (op.getNumResults() == 1 && isa<hpc::dist::TokenType>(op.getResult(0).getType())) {
      SmallVector<int32_t> roots;
      for (Value v : op.getOperands())
        roots.push_back(root[plan.tensorIds.lookup(v)]);
      startInputs[op.getResult(0)] = roots;
    }
    if (auto wait = dyn_cast<hpc::dist::WaitOp>(op)) {
      Value token = wait.getToken();
      for (int32_t r : startInputs.lookup(token))
        lastUse[r] = std::max(lastUse[r], index);
      startInputs.erase(token);
      plan.kernels.push_back(&op);
      // The result is the token's buffer, filled by the collective.
      if (Value result = wait.getResult()) {
        int32_t src = plan.tensorIds.lookup(token);
        if (failed(addTensor(result, plan.tensors[src])))
          return failure();
        grow();
        root.back() = root[src];
      }
      continue;
    }
    // A weight's piece along its outermost split dimension is contiguous:
    // a view at a rank-dependent offset, no copy (the runtime resolves it).
    if (auto slice = dyn_cast<hpc::dist::AllSliceOp>(op)) {
      int32_t src = plan.tensorIds.lookup(slice.getInput());
      auto in = cast<RankedTensorType>(slice.getInput().getType());
      bool outermost = llvm::all_of(in.getShape().take_front(slice.getDim()),
                                    [](int64_t d) { return d == 1; });
      hpc::dist::MeshAttr mesh = hpc::dist::lookupMesh(&op);
      if (plan.tensors[root[src]].region == Region::Weights && outermost && mesh &&
          plan.tensors[src].rankAxes.empty()) {
        TensorSlot slot = plan.tensors[src];
        for (Attribute a : slice.getAxes())
          slot.rankAxes.push_back(mesh.axisIndex(cast<StringAttr>(a).getValue()));
        if (failed(addTensor(op.getResult(0), slot)))
          return failure();
        plan.tensors.back().rankStride = plan.tensors.back().bytes;
        grow();
        root.back() = root[src];
        continue;
      }
    }
    // Pieces of an outermost split of an arena tensor are contiguous: views
    // at their byte offsets, no copy (a gradient bucket split back into
    // its gradients).
    if (auto split = dyn_cast<hpc::SplitOp>(op)) {
      int32_t src = plan.tensorIds.lookup(split.getInput());
      auto in = cast<RankedTensorType>(split.getInput().getType());
      int64_t axis = static_cast<int64_t>(split.getAxis());
      if (axis < 0)
        axis += in.getRank();
      bool outermost = llvm::all_of(in.getShape().take_front(axis),
                                    [](int64_t d) { return d == 1; });
      const TensorSlot &from = plan.tensors[src];
      if (outermost && plan.tensors[root[src]].region == Region::Arena && !from.blocked &&
          from.rankAxes.empty()) {
        int64_t at = from.viewOffset;
        for (Value piece : split.getResults()) {
          TensorSlot slot = plan.tensors[src];
          slot.viewOffset = at;
          if (failed(addTensor(piece, slot)))
            return failure();
          at += plan.tensors.back().bytes;
          grow();
          root.back() = root[src];
        }
        continue;
      }
    }
    if (isView(&op)) {
      int32_t src = plan.tensorIds.lookup(op.getOperand(0));
      TensorSlot slot = plan.tensors[src];
      if (failed(addTensor(op.getResult(0), slot)))
        return failure();
      grow();
      root.back() = root[src];
      continue;
    }
    plan.kernels.push_back(&op);
    for (Value r : op.getResults()) {
      TensorSlot slot;
      slot.blocked = r == op.getResult(0) && op.hasAttr(kBlockedAttrName);
      if (failed(addTensor(r, slot)))
        return failure();
      grow();
      root.back() = plan.tensors.size() - 1;
      defIndex.back() = index;
      lastUse.back() = index; // written even if never read
    }
  }

  for (auto &[token, roots] : startInputs) {
    lastUse[root[plan.tensorIds.lookup(token)]] = INT64_MAX;
    for (int32_t r : roots)
      lastUse[r] = INT64_MAX;
  }

  // Place arena tensors, largest first, at the lowest free offset.
  std::vector<int32_t> arena;
  for (int32_t id = 0; id < int32_t(plan.tensors.size()); ++id)
    if (plan.tensors[id].region == Region::Arena && root[id] == id)
      arena.push_back(id);
  std::stable_sort(arena.begin(), arena.end(), [&](int32_t a, int32_t b) {
    return plan.tensors[a].bytes > plan.tensors[b].bytes;
  });
  std::vector<int32_t> placed;
  for (int32_t id : arena) {
    int64_t size = alignUp(plan.tensors[id].bytes);
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int32_t other : placed)
      if (defIndex[other] <= lastUse[id] && defIndex[id] <= lastUse[other])
        busy.push_back({plan.tensors[other].offset,
                        plan.tensors[other].offset + alignUp(plan.tensors[other].bytes)});
    llvm::sort(busy);
    int64_t offset = 0;
    for (auto [begin, end] : busy) {
      if (offset + size <= begin)
        break;
      offset = std::max(offset, end);
    }
    plan.tensors[id].offset = offset;
    placed.push_back(id);
    plan.arenaBytes = std::max(plan.arenaBytes, offset + plan.tensors[id].bytes);
  }
  // Views share their root's placement.
  for (int32_t id = 0; id < int32_t(plan.tensors.size()); ++id)
    if (root[id] != id) {
      plan.tensors[id].region = plan.tensors[root[id]].region;
      plan.tensors[id].index = plan.tensors[root[id]].index;
      plan.tensors[id].offset = plan.tensors[root[id]].offset + plan.tensors[id].viewOffset;
    }
  if (failed(checkLayouts(body, plan)))
    return failure();
  return plan;
}

static const char *safetensorsDType(Type t) {
  if (t.isF32()) return "F32";
  if (t.isF64()) return "F64";
  if (t.isF16()) return "F16";
  if (t.isBF16()) return "BF16";
  if (t.isInteger(1)) return "BOOL";
  auto it = cast<IntegerType>(t);
  bool u = it.isUnsigned();
  switch (it.getWidth()) {
  case 8: return u ? "U8" : "I8";
  case 16: return u ? "U16" : "I16";
  case 32: return u ? "U32" : "I32";
  default: return u ? "U64" : "I64";
  }
}

std::vector<std::string> hpc::weightKeys(const ProgramPlan &plan) {
  // Names are keys: keep them unique (an initializer used twice is one).
  llvm::StringMap<int> seen;
  std::vector<std::string> keys;
  for (const ProgramPlan::WeightEntry &w : plan.weightEntries) {
    std::string key = w.name;
    if (int n = seen[w.name]++)
      key += "#" + std::to_string(n);
    keys.push_back(std::move(key));
  }
  return keys;
}

LogicalResult hpc::writeWeightsFile(const ProgramPlan &plan, StringRef path,
                                    std::string &error) {
  llvm::json::Object header;
  llvm::json::Object meta;
  meta["hpc_hash"] = weightsHashHex(plan.weightsData);
  meta["format"] = "hpc-opt weights";
  std::vector<std::string> keys = weightKeys(plan);
  for (auto [w, key] : llvm::zip(plan.weightEntries, keys)) {
    const TensorSlot &t = plan.tensors[w.tensor];
    RankedTensorType type = w.wholeType ? w.wholeType : t.type;
    int64_t bytes = type.getNumElements() * elementBytes(type.getElementType());
    llvm::json::Object entry;
    entry["dtype"] = safetensorsDType(type.getElementType());
    llvm::json::Array shape;
    for (int64_t d : type.getShape())
      shape.push_back(d);
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = llvm::json::Array{w.dataOffset, w.dataOffset + bytes};
    // How to put a piece-major weight back into the model's shape (the
    // dist dialect verified the attribute): {"shape":[...],"dim":D}.
    if (w.piecesOf) {
      llvm::json::Array dims(w.piecesOf.getAs<DenseI64ArrayAttr>("shape").asArrayRef());
      std::string layout;
      llvm::raw_string_ostream(layout) << llvm::json::Value(llvm::json::Object{
          {"shape", std::move(dims)}, {"dim", w.piecesOf.getAs<IntegerAttr>("dim").getInt()}});
      meta["pieces_of." + key] = layout;
    }
    header[key] = std::move(entry);
  }
  header["__metadata__"] = std::move(meta);
  std::string json;
  llvm::raw_string_ostream(json) << llvm::json::Value(std::move(header));
  json.resize(alignUp(json.size() + 8) - 8, ' '); // data section 64-aligned
  SmallString<256> tmp(path);
  tmp += ".tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(tmp, ec, llvm::sys::fs::OF_None);
    if (ec) {
      error = "cannot write '" + tmp.str().str() + "': " + ec.message();
      return failure();
    }
    uint64_t size = json.size();
    char le[8];
    for (int i = 0; i < 8; ++i)
      le[i] = char((size >> (8 * i)) & 0xff);
    os.write(le, 8);
    os << json;
    os << plan.weightsData;
    os.close();
    if (os.has_error()) {
      error = "cannot write '" + tmp.str().str() + "': " + os.error().message();
      llvm::sys::fs::remove(tmp);
      return failure();
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    error = "cannot rename '" + tmp.str().str() + "': " + ec.message();
    return failure();
  }
  return success();
}
