//===- FuseEpilogues.cpp - bias, residual, activation into gemm and conv --===//
//
// The compiler decides which elementwise work a contraction kernel does in
// its epilogue; the runtime only obeys the ops' attributes. The rewrites, in
// this order, on every function:
//
// 0. hpc.matmul(A, hpc.transpose(W)) with W 2-D (a tied LM head reads the
//    embedding this way, as does the backward product of a linear layer,
//    also through a tensor-parallel rank's all_slice of it) becomes
//    hpc.gemm(A, W) with trans_b, between reshapes: the kernel reads W's
//    rows as columns, and the transposed copy of W (a 154 MB copy per run
//    for GPT-2 small's head) is never made.
//    And a linear layer's weight gradient, reduce_sum over the batch of
//    matmul(transpose(A), D), becomes one hpc.gemm with trans_a over all the
//    rows (no transposed copy of A, no partial products to add up).
//    And the transpose of a plain gemm's result (a tied LM head's weight
//    gradient, [vocab, d] transposed once per micro-batch) becomes the gemm
//    of the swapped operands (rewrite 0c).
// 1. hpc.add(hpc.matmul(A, W), b) with W 2-D and b a vector over the output
//    features becomes one hpc.gemm with C = b, between reshapes (views) that
//    flatten A's leading dimensions and restore them.
// 2. hpc.add(hpc.conv(x, w, b), r) without broadcast becomes the conv with
//    `residual` r (oneDNN's binary post-op; a ResNet block's shortcut).
// 2b. hpc.add(s, gemm) with s of the result's shape, made before the gemm,
//    becomes the gemm with c = s (rewrite 6; oneDNN adds it as a binary
//    post-op): a micro-batch's weight gradient is added to the sum so far as
//    it is written.
//    Before it, a scatter-add into zeros added to s scatters into s, and
//    s + scatter_add(x) becomes scatter_add(s + x) (rewrites 7 and 8): an
//    embedding's rows go into the running sum of its gradient, and a tied
//    embedding's sum then goes into the head's gemm.
// 3. An activation (hpc.relu, hpc.gelu, hpc.sigmoid, hpc.tanh, hpc.silu) of
//    an hpc.gemm or hpc.conv, directly or through one hpc.reshape, becomes
//    the product's `activation`.
//
// 1 and 3 look through the cast back to f32 that hpc-autocast puts after a bf16
// product: add(cast_f32(matmul_bf16), b) becomes cast_f32(gemm_bf16) with
// the bias read as bf16 (the kernel adds it in f32 and rounds once, as
// PyTorch's autocast linear layer with its bf16 bias), and act(cast_f32(p))
// becomes cast_f32(p {activation}), the activation applied before the
// rounding to bf16.
//
// 4. A cast back to f32 whose value only moves (reshapes, transposes, splits,
//    ...) on the way to casts to bf16 again (the attention's q, k and v
//    split from the QKV gemm's result once its bias is fused) moves bf16
//    data instead: the round trip is exact, and both casts go.
// 5. A bf16 gemm or matmul whose result nothing but its cast back to f32
//    reads (directly or through reshapes only that cast reads) writes the
//    f32 sum itself: the cast kernel, a pass over the result, goes, and so
//    does the rounding to bf16 (one rounding fewer than PyTorch's autocast,
//    whose linear layer returns bf16). A result another bf16 product reads
//    stays bf16.
//
// An intermediate value is fused away only when its one use is the op that
// absorbs it, so values another op still reads (a backward pass reads the
// pre-activation) keep their own storage; rewrite 0's transposes are
// removed once no product reads them.
//
//===----------------------------------------------------------------------===//

#include "Bf16Data.h"

#include "Dist/DistOps.h"

#include "hpc/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseMap.h"

namespace hpc {
#define GEN_PASS_DEF_HPCFUSEEPILOGUES
#include "passes/Passes.h.inc"
} // namespace hpc

using namespace mlir;

namespace {

RankedTensorType rankedOf(Value v) { return dyn_cast<RankedTensorType>(v.getType()); }

/// Whether `v` is a static float tensor.
bool isStaticFloat(Value v) {
  RankedTensorType t = rankedOf(v);
  return t && t.hasStaticShape() && isa<FloatType>(t.getElementType());
}

/// Whether `bias` is a vector over the last dimension, of size `n`: shape [n]
/// or [1, ..., 1, n].
bool isFeatureVector(Value bias, int64_t n) {
  ArrayRef<int64_t> shape = rankedOf(bias).getShape();
  return !shape.empty() && shape.back() == n &&
         llvm::all_of(shape.drop_back(), [](int64_t d) { return d == 1; });
}

/// `v` reshaped to `shape` (itself when it has that shape already).
Value reshapeTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  RankedTensorType t = rankedOf(v);
  if (t.getShape() == shape)
    return v;
  auto type = RankedTensorType::get(shape, t.getElementType());
  return hpc::ReshapeOp::create(b, loc, type, v, b.getDenseI64ArrayAttr(shape));
}

/// The hpc-autocast cast back of a bf16 product's result to f32 that
/// defines `v`; null when `v` is no such cast.
hpc::CastOp castBack(Value v) {
  auto cast = v.getDefiningOp<hpc::CastOp>();
  if (!cast)
    return {};
  RankedTensorType in = rankedOf(cast.getInput()), out = rankedOf(v);
  if (!in || !out || !in.getElementType().isBF16() || !out.getElementType().isF32())
    return {};
  return cast;
}

/// Lets the ops that cast `v`, a cast back of a bf16 product's result, to
/// bf16 again (hpc-autocast's operands of the next products, cast before the
/// epilogue moved into the product) read the product's bf16 result: the
/// round trip is exact. The cast back goes when nothing else reads it.
void readBf16Directly(Value v) {
  hpc::CastOp back = castBack(v);
  if (!back)
    return;
  for (Operation *user : llvm::make_early_inc_range(v.getUsers())) {
    auto again = dyn_cast<hpc::CastOp>(user);
    if (again && again.getType() == back.getInput().getType()) {
      again.getResult().replaceAllUsesWith(back.getInput());
      again.erase();
    }
  }
  if (back.getResult().use_empty())
    back.erase();
}

/// A bias add the gemm epilogue can do: the matmul, the bias and, for a
/// bf16 matmul, the cast of its result back to f32 that the add reads.
struct MatMulBias {
  hpc::MatMulOp mm;
  Value bias;
  hpc::CastOp back;
};

/// The bias add `add` is when the gemm epilogue can do it: `add(matmul(A,
/// W), b)` or `add(cast_f32(matmul(A, W)), b)` in either operand order, the
/// matmul's result (and the cast's) used only here, W 2-D, A at least 2-D, b
/// a vector over W's columns of the add's element type, and the add's
/// result type the matmul's (or the cast's).
std::optional<MatMulBias> matchMatMulBias(hpc::AddOp add) {
  for (auto [product, bias] : {std::pair(add.getLhs(), add.getRhs()),
                               std::pair(add.getRhs(), add.getLhs())}) {
    if (!product.hasOneUse() || add.getType() != product.getType())
      continue;
    hpc::CastOp back = castBack(product);
    if (back) {
      product = back.getInput();
      if (!product.hasOneUse())
        continue;
    }
    auto mm = product.getDefiningOp<hpc::MatMulOp>();
    if (!mm)
      continue;
    Value a = mm.getLhs(), w = mm.getRhs();
    if (!isStaticFloat(a) || !isStaticFloat(w) || !isStaticFloat(bias) ||
        !isStaticFloat(mm.getResult()))
      continue;
    if (rankedOf(w).getRank() != 2 || rankedOf(a).getRank() < 2 ||
        rankedOf(bias).getElementType() != rankedOf(add.getResult()).getElementType())
      continue;
    if (!isFeatureVector(bias, rankedOf(w).getDimSize(1)))
      continue;
    return MatMulBias{mm, bias, back};
  }
  return std::nullopt;
}

/// The bf16 biases of one function's bf16 gemms, each value converted once:
/// a weight or constant becomes bf16 data, a value cast back from bf16 is
/// read before the cast, anything else gets one hpc.cast.
class Bf16Biases {
public:
  /// The bf16 of the f32 `v`, valid where `user` is.
  Value of(Value v, Operation *user);
  /// Erases the f32 weights and constants that no op reads any more.
  void eraseUnread();

private:
  llvm::DenseMap<Value, Value> cache;
  SmallVector<Operation *> replaced;
};

Value Bf16Biases::of(Value v, Operation *user) {
  if (Value known = cache.lookup(v))
    return known;
  Operation *def = v.getDefiningOp();
  Value made;
  if (hpc::CastOp back = castBack(v)) {
    made = back.getInput();
  } else if (isa_and_nonnull<hpc::WeightOp, hpc::ConstantOp>(def) &&
             (made = hpc::storeAsBf16(def))) {
    replaced.push_back(def);
  } else {
    // Before the op of v's block that holds the first user, so it dominates
    // every later one.
    OpBuilder b(v.getParentBlock()->findAncestorOpInBlock(*user));
    auto type = rankedOf(v).clone(b.getBF16Type());
    made = hpc::CastOp::create(b, v.getLoc(), type, v, TypeAttr::get(b.getBF16Type()));
  }
  cache[v] = made;
  return made;
}

void Bf16Biases::eraseUnread() {
  for (Operation *op : replaced)
    if (op->use_empty())
      op->erase();
  replaced.clear();
}

/// add(matmul(A, W), b) -> reshape(gemm(reshape(A), W, reshape(b))), and
/// add(cast_f32(matmul(A, W)), b) -> cast_f32(reshape(gemm(reshape(A), W,
/// reshape(bf16 b)))).
void fuseMatMulBias(hpc::AddOp add, MatMulBias match, Bf16Biases &bf16) {
  hpc::MatMulOp mm = match.mm;
  OpBuilder b(add);
  Location loc = match.back ? b.getFusedLoc({mm.getLoc(), match.back.getLoc(), add.getLoc()})
                            : b.getFusedLoc({mm.getLoc(), add.getLoc()});
  Value a = mm.getLhs(), w = mm.getRhs();
  ArrayRef<int64_t> aShape = rankedOf(a).getShape();
  int64_t rows = 1;
  for (int64_t d : aShape.drop_back())
    rows *= d;
  int64_t n = rankedOf(w).getDimSize(1);
  Value bias = match.back ? bf16.of(match.bias, add) : match.bias;
  Value a2 = reshapeTo(b, loc, a, {rows, aShape.back()});
  Value c = reshapeTo(b, loc, bias, {n});
  auto gemm = hpc::GemmOp::create(b, loc, a2, w, c, APFloat(1.0), APFloat(1.0),
                                  /*trans_a=*/false, /*trans_b=*/false, "none");
  Value out = reshapeTo(b, loc, gemm.getResult(), mm.getType().getShape());
  if (match.back)
    out = hpc::CastOp::create(b, match.back.getLoc(), add.getType(), out,
                              match.back.getToAttr());
  add.getResult().replaceAllUsesWith(out);
  add.erase();
  if (match.back)
    match.back.erase();
  mm.erase();
  readBf16Directly(out);
}

/// Rewrite 0: `mm` = matmul(A, transpose(W)) with W 2-D, A at least 2-D and
/// static float types; also matmul(A, all_slice(transpose(W), d)), a tensor
/// parallel rank's piece of the transposed weight (the backward product of
/// a column- or row-parallel projection), which becomes the gemm of W's
/// piece along the other dimension.
bool fuseTransposedWeight(hpc::MatMulOp mm) {
  auto slice = mm.getRhs().getDefiningOp<hpc::dist::AllSliceOp>();
  auto tr = (slice ? slice.getInput() : mm.getRhs()).getDefiningOp<hpc::TransposeOp>();
  if (!tr || !isStaticFloat(mm.getLhs()) ||
      !isStaticFloat(tr.getInput()) || !isStaticFloat(mm.getResult()))
    return false;
  Value a = mm.getLhs(), w = tr.getInput();
  ArrayRef<int64_t> aShape = rankedOf(a).getShape();
  if (rankedOf(w).getRank() != 2 || aShape.size() < 2 || tr.getPerm() != ArrayRef<int64_t>{1, 0})
    return false;
  OpBuilder b(mm);
  Location loc = b.getFusedLoc({tr.getLoc(), mm.getLoc()});
  if (slice) {
    ArrayRef<int64_t> piece = rankedOf(slice.getResult()).getShape();
    auto type = RankedTensorType::get({piece[1], piece[0]}, rankedOf(w).getElementType());
    w = hpc::dist::AllSliceOp::create(b, slice.getLoc(), type, w, slice.getAxes(),
                                      1 - slice.getDim());
  }
  int64_t rows = 1;
  for (int64_t d : aShape.drop_back())
    rows *= d;
  Value a2 = reshapeTo(b, loc, a, {rows, aShape.back()});
  auto gemm = hpc::GemmOp::create(b, loc, a2, w, Value(), APFloat(1.0), APFloat(0.0),
                                  /*trans_a=*/false, /*trans_b=*/true, "none");
  Value out = reshapeTo(b, loc, gemm.getResult(), mm.getType().getShape());
  mm.getResult().replaceAllUsesWith(out);
  mm.erase();
  // Another product may still read them (CSE merged equal transposes).
  if (slice && slice.use_empty())
    slice.erase();
  if (tr.use_empty())
    tr.erase();
  return true;
}

/// A transpose under a tensor-parallel gather: `v` = all_gather(transpose(x))
/// (or its started form and wait), each value read only by the next op.
/// Sequence parallelism gathers a column-parallel product's input again
/// for its weight gradient, and the partitioner gathers the transposed
/// copy that the backward product reads.
struct GatheredTranspose {
  hpc::TransposeOp tr;
  Operation *gather = nullptr; ///< dist.all_gather, or dist.all_gather_start
  hpc::dist::WaitOp wait;      ///< with a started gather
};

std::optional<GatheredTranspose> matchGatheredTranspose(Value v) {
  GatheredTranspose m;
  Value in;
  if (auto wait = v.getDefiningOp<hpc::dist::WaitOp>()) {
    auto start = wait.getToken().getDefiningOp<hpc::dist::AllGatherStartOp>();
    if (!start || !wait.getToken().hasOneUse() || start.getCompressionAttr())
      return std::nullopt;
    m.wait = wait;
    m.gather = start;
    in = start.getInput();
  } else if (auto gather = v.getDefiningOp<hpc::dist::AllGatherOp>()) {
    if (gather.getCompressionAttr())
      return std::nullopt;
    m.gather = gather;
    in = gather.getInput();
  } else {
    return std::nullopt;
  }
  m.tr = in.getDefiningOp<hpc::TransposeOp>();
  if (!m.tr || !in.hasOneUse() || !v.hasOneUse())
    return std::nullopt;
  return m;
}

/// all_gather(transpose(x, perm), dim d) -> transpose(all_gather(x, dim
/// perm[d]), perm): the same values, with the transpose where a product can
/// read it (rewrite 0b). Returns the new transpose.
hpc::TransposeOp gatherBeforeTranspose(GatheredTranspose m) {
  Operation *gather = m.gather;
  Value result = m.wait ? Value(m.wait.getResult()) : gather->getResult(0);
  ArrayRef<int64_t> perm = m.tr.getPerm();
  auto start = dyn_cast<hpc::dist::AllGatherStartOp>(gather);
  auto sync = dyn_cast<hpc::dist::AllGatherOp>(gather);
  int64_t dim = start ? start.getDim() : sync.getDim();
  ArrayAttr axes = start ? start.getAxes() : sync.getAxes();
  // The gathered x: its dimension perm[dim] grows as the result's dim did.
  SmallVector<int64_t> shape = llvm::to_vector(rankedOf(m.tr.getInput()).getShape());
  shape[perm[dim]] = rankedOf(result).getDimSize(dim);
  auto gatheredType = rankedOf(m.tr.getInput()).clone(shape);
  OpBuilder b(gather);
  IntegerAttr newDim = b.getI64IntegerAttr(perm[dim]);
  Value gathered;
  if (start) {
    auto token = hpc::dist::TokenType::get(b.getContext(), gatheredType);
    auto newStart = hpc::dist::AllGatherStartOp::create(b, start.getLoc(), token,
                                                        m.tr.getInput(), axes, newDim,
                                                        /*compression=*/nullptr);
    b.setInsertionPoint(m.wait);
    gathered = hpc::dist::WaitOp::create(b, m.wait.getLoc(), gatheredType,
                                         newStart.getToken())
                   .getResult();
  } else {
    gathered = hpc::dist::AllGatherOp::create(b, sync.getLoc(), gatheredType,
                                              m.tr.getInput(), axes, newDim,
                                              /*compression=*/nullptr)
                   .getResult();
  }
  auto tr = hpc::TransposeOp::create(b, m.tr.getLoc(), result.getType(), gathered,
                                     m.tr.getPermAttr());
  result.replaceAllUsesWith(tr.getResult());
  if (m.wait)
    m.wait.erase();
  gather->erase();
  m.tr.erase();
  return tr;
}

/// Rewrite 0b: `sum` = reduce_sum(matmul(transpose(A), D)) over exactly the
/// batch dimensions, A [B..., M, K] with its last two dimensions swapped,
/// D [B..., M, N], optionally with a cast back from bf16 between the
/// matmul and the sum; every value on the way read only by the next op.
/// The transpose may be under a gather over tensor-parallel ranks
/// (matchGatheredTranspose), which then gathers A instead.
bool fuseBatchSummedProduct(hpc::ReduceSumOp sum) {
  Value in = sum.getInput();
  hpc::CastOp back = castBack(in);
  Value product = back ? back.getInput() : in;
  auto mm = product.getDefiningOp<hpc::MatMulOp>();
  if (!mm || !in.hasOneUse() || !product.hasOneUse())
    return false;
  // The transpose may have other readers: the three weight gradients of
  // an unfused QKV projection share their input's (CSE).
  auto tr = mm.getLhs().getDefiningOp<hpc::TransposeOp>();
  std::optional<GatheredTranspose> gathered;
  if (!tr) {
    gathered = matchGatheredTranspose(mm.getLhs());
    if (!gathered)
      return false;
    tr = gathered->tr;
  }
  // A [B..., M, K], the gathered one under a gather: the left operand is
  // A transposed, so A's dimension perm[i] is the operand's i.
  Value d = mm.getRhs();
  if (!isStaticFloat(tr.getInput()) || !isStaticFloat(mm.getLhs()) || !isStaticFloat(d) ||
      !isStaticFloat(sum.getResult()))
    return false;
  ArrayRef<int64_t> lhsShape = rankedOf(mm.getLhs()).getShape();
  SmallVector<int64_t> aShape(lhsShape.size());
  for (auto [i, p] : llvm::enumerate(tr.getPerm()))
    aShape[p] = lhsShape[i];
  ArrayRef<int64_t> as = aShape, ds = rankedOf(d).getShape();
  int64_t rank = static_cast<int64_t>(as.size());
  if (rank < 3 || ds.size() != as.size() || as.drop_back() != ds.drop_back())
    return false;
  SmallVector<int64_t> swap = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(swap[rank - 1], swap[rank - 2]);
  SmallVector<int64_t> batch = llvm::to_vector(llvm::seq<int64_t>(0, rank - 2));
  if (tr.getPerm() != ArrayRef<int64_t>(swap) || sum.getAxes() != ArrayRef<int64_t>(batch))
    return false;
  if (gathered)
    tr = gatherBeforeTranspose(*gathered);
  Value a = tr.getInput();
  int64_t rows = 1;
  for (int64_t dim : as.drop_back())
    rows *= dim;
  OpBuilder b(sum);
  Location loc = b.getFusedLoc({tr.getLoc(), mm.getLoc(), sum.getLoc()});
  Value a2 = reshapeTo(b, loc, a, {rows, as.back()});
  Value d2 = reshapeTo(b, loc, d, {rows, ds.back()});
  auto gemm = hpc::GemmOp::create(b, loc, a2, d2, Value(), APFloat(1.0), APFloat(0.0),
                                  /*trans_a=*/true, /*trans_b=*/false, "none");
  Value out = gemm.getResult();
  if (back) {
    auto f32 = RankedTensorType::get(rankedOf(out).getShape(),
                                     rankedOf(in).getElementType());
    out = hpc::CastOp::create(b, back.getLoc(), f32, out, back.getToAttr());
  }
  out = reshapeTo(b, loc, out, rankedOf(sum.getResult()).getShape());
  sum.getResult().replaceAllUsesWith(out);
  sum.erase();
  if (back)
    back.erase();
  mm.erase();
  if (tr.use_empty())
    tr.erase();
  return true;
}

/// The plain gemm (no `c`, alpha 1, no activation) whose result `v` is,
/// directly or through reshapes, each value on the way read only by the
/// next op; null otherwise.
hpc::GemmOp plainProductBehind(Value v) {
  while (v.hasOneUse()) {
    if (auto reshape = v.getDefiningOp<hpc::ReshapeOp>()) {
      v = reshape.getInput();
      continue;
    }
    auto gemm = v.getDefiningOp<hpc::GemmOp>();
    if (!gemm || gemm.getC() || gemm.getAlpha().convertToDouble() != 1.0 ||
        gemm.getActivation() != "none" || !isStaticFloat(gemm.getResult()))
      return {};
    return gemm;
  }
  return {};
}

/// Erases `user`, then what plainProductBehind walked from `v` (the
/// reshapes, each read only by the next) down to `gemm`: all unread once
/// `user` is gone.
void eraseWithProduct(Operation *user, Value v, hpc::GemmOp gemm) {
  user->erase();
  while (Operation *def = v.getDefiningOp()) {
    bool last = def == gemm.getOperation();
    v = last ? Value() : def->getOperand(0);
    def->erase();
    if (last)
      return;
  }
}

/// Rewrite 0c: transpose(gemm(A, B)) with perm [1, 0], the gemm plain and
/// read only by the transpose (through reshapes to its own shape) ->
/// gemm(B, A) with the operands' transposes swapped and flipped:
/// (op(A) op(B))^T = op(B)^T op(A)^T. A tied LM head's weight gradient is
/// the product transposed (the head reads the embedding transposed), a
/// pass over [vocab, d] per micro-batch that the kernel's strides replace.
bool fuseTransposedProduct(hpc::TransposeOp tr) {
  hpc::GemmOp gemm = plainProductBehind(tr.getInput());
  if (!gemm || tr.getPerm() != ArrayRef<int64_t>{1, 0} ||
      rankedOf(tr.getInput()).getShape() != rankedOf(gemm.getResult()).getShape())
    return false;
  OpBuilder b(tr);
  auto swapped = hpc::GemmOp::create(
      b, b.getFusedLoc({gemm.getLoc(), tr.getLoc()}), tr.getType(), gemm.getB(), gemm.getA(),
      Value(), gemm.getAlphaAttr(), gemm.getBetaAttr(), b.getBoolAttr(!gemm.getTransB()),
      b.getBoolAttr(!gemm.getTransA()), gemm.getActivationAttr());
  tr.getResult().replaceAllUsesWith(swapped.getResult());
  eraseWithProduct(tr, tr.getInput(), gemm);
  return true;
}

/// Whether `v` is available where `op` is: an argument of op's block or made
/// before op in it.
bool madeBefore(Value v, Operation *op) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == op->getBlock();
  Operation *def = v.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

/// Rewrite 6 (2b): add(s, gemm(A, B)) or add(gemm(A, B), s), the gemm plain
/// and read only by the add (through reshapes), s of the add's type and the
/// gemm operands' element type, made before the gemm -> gemm(A, B, s) where
/// the gemm was: the kernel adds s as its `c` (a binary post-op of the
/// result's shape) while it writes the product. The gradients of
/// micro-batches are accumulated this way (hpc-micro-batches' running sums:
/// each micro-batch's product adds the sum so far), so a weight gradient's
/// sum costs no pass of its own; so does an input gradient summed over
/// products (the unfused Q, K and V projections' of their input). The gemm
/// stays where it is (a pipeline stage's order is final): a product made
/// before s (the sum's first term) is not the one fused.
bool fuseAccumulation(hpc::AddOp add) {
  Type type = add.getType();
  if (add.getLhs().getType() != type || add.getRhs().getType() != type || !isStaticFloat(add))
    return false;
  for (unsigned i : {0u, 1u}) {
    Value product = add->getOperand(i), s = add->getOperand(1 - i);
    hpc::GemmOp gemm = plainProductBehind(product);
    if (!gemm || product == s || !madeBefore(s, gemm) ||
        rankedOf(gemm.getA()).getElementType() != rankedOf(s).getElementType() ||
        rankedOf(gemm.getResult()).getElementType() != rankedOf(s).getElementType())
      continue;
    OpBuilder b(gemm);
    Location loc = b.getFusedLoc({gemm.getLoc(), add.getLoc()});
    Value c = reshapeTo(b, loc, s, rankedOf(gemm.getResult()).getShape());
    auto fused = hpc::GemmOp::create(b, loc, gemm.getType(), gemm.getA(), gemm.getB(), c,
                                     gemm.getAlphaAttr(), b.getF64FloatAttr(1.0),
                                     gemm.getTransAAttr(), gemm.getTransBAttr(),
                                     gemm.getActivationAttr());
    add.getResult().replaceAllUsesWith(
        reshapeTo(b, loc, fused.getResult(), rankedOf(add).getShape()));
    eraseWithProduct(add, product, gemm);
    return true;
  }
  return false;
}

/// Whether `v` is a float constant of zeros.
bool isZeros(Value v) {
  DenseElementsAttr attr;
  return matchPattern(v, m_Constant(&attr)) && attr.isSplat() &&
         isa<FloatType>(attr.getElementType()) && attr.getSplatValue<APFloat>().isZero();
}

/// The scatter-add of `v` (its reduction "add", read only by this use), else null.
hpc::ScatterElementsOp scatterAddOf(Value v) {
  auto scatter = v.getDefiningOp<hpc::ScatterElementsOp>();
  return scatter && scatter.getReduction() == "add" && v.hasOneUse() ? scatter
                                                                     : hpc::ScatterElementsOp();
}

/// Rewrite 7: add(s, scatter_add(zeros, i, u)) or add(scatter_add(zeros,
/// i, u), s), of one type -> scatter_add(s, i, u) where the add was: the
/// updates go into s instead of into a tensor of zeros added to it after.
/// An embedding's gradient is the case (the lookup's rows scattered into
/// [vocab, d]), added to the tied head's part and to the micro-batches'
/// running sum: a zero fill and an add over [vocab, d] less.
/// Rewrite 8: add(s, scatter_add(x, i, u)), x read only by the scatter ->
/// scatter_add(add(s, x), i, u), so that s + x can go into x's gemm
/// (rewrite 6): a tied embedding's running sum plus the head's part plus
/// the lookup's rows is the head's gemm with c = the sum, then the scatter.
bool fuseScatterAdd(hpc::AddOp add) {
  Type type = add.getType();
  if (add.getLhs().getType() != type || add.getRhs().getType() != type || !isStaticFloat(add))
    return false;
  for (unsigned i : {0u, 1u}) {
    Value s = add->getOperand(1 - i);
    hpc::ScatterElementsOp scatter = scatterAddOf(add->getOperand(i));
    if (!scatter || scatter.getInput() == s || scatter.getInput().getType() != type)
      continue;
    Value x = scatter.getInput();
    OpBuilder b(add);
    Value into = s;
    if (!isZeros(x)) {
      if (!x.hasOneUse())
        continue;
      into = hpc::AddOp::create(b, add.getLoc(), type, s, x);
    }
    auto moved = hpc::ScatterElementsOp::create(
        b, b.getFusedLoc({scatter.getLoc(), add.getLoc()}), type, into, scatter.getIndices(),
        scatter.getUpdates(), scatter.getAxisAttr(), scatter.getReductionAttr());
    add.getResult().replaceAllUsesWith(moved.getResult());
    add.erase();
    scatter.erase();
    if (Operation *zeros = x.getDefiningOp(); zeros && into == s && zeros->use_empty())
      zeros->erase();
    return true;
  }
  return false;
}

/// add(conv(x, w, b), r) or add(r, conv(...)), no broadcast, the conv's
/// result read only by the add, no activation or residual yet ->
/// conv(x, w, b) residual(r) in the add's place. The add's own position is
/// where r and every conv operand are defined (in one block), so the conv
/// moves there.
bool fuseResidual(hpc::AddOp add) {
  Type type = add.getType();
  if (add.getLhs().getType() != type || add.getRhs().getType() != type)
    return false;
  for (unsigned i : {0u, 1u}) {
    Value product = add->getOperand(i), residual = add->getOperand(1 - i);
    auto conv = product.getDefiningOp<hpc::ConvOp>();
    if (!conv || !product.hasOneUse() || conv.getActivation() != "none" ||
        conv.getResidual() || product == residual || conv->getBlock() != add->getBlock())
      continue;
    conv->moveBefore(add);
    conv.getResidualMutable().assign(residual);
    Builder b(add.getContext());
    conv->setLoc(b.getFusedLoc({conv->getLoc(), add->getLoc()}));
    add.getResult().replaceAllUsesWith(product);
    add.erase();
    return true;
  }
  return false;
}

/// The gemm or conv with no activation yet whose result `v` is, directly or
/// through at most one hpc.reshape and one cast back from bf16 (in either
/// order), each value on the way read only by the next op; null otherwise.
Operation *unactivatedProduct(Value v) {
  bool reshaped = false, cast = false;
  while (v.hasOneUse()) {
    Operation *def = v.getDefiningOp();
    if (auto gemm = dyn_cast_or_null<hpc::GemmOp>(def))
      return gemm.getActivation() == "none" ? def : nullptr;
    if (auto conv = dyn_cast_or_null<hpc::ConvOp>(def))
      return conv.getActivation() == "none" ? def : nullptr;
    if (auto reshape = dyn_cast_or_null<hpc::ReshapeOp>(def); reshape && !reshaped) {
      reshaped = true;
      v = reshape.getInput();
    } else if (hpc::CastOp back = castBack(v); back && !cast) {
      cast = true;
      v = back.getInput();
    } else {
      return nullptr;
    }
  }
  return nullptr;
}

/// act(product), act(reshape(product)), act(cast_f32(product)) or both
/// around it -> product {activation}; false when `act` does not have that
/// form.
bool fuseActivation(Operation *act, StringRef activation) {
  Value x = act->getOperand(0);
  if (act->getResult(0).getType() != x.getType())
    return false;
  Operation *product = unactivatedProduct(x);
  if (!product)
    return false;
  Builder b(act->getContext());
  product->setAttr("activation", b.getStringAttr(activation));
  product->setLoc(b.getFusedLoc({product->getLoc(), act->getLoc()}));
  act->getResult(0).replaceAllUsesWith(x);
  act->erase();
  readBf16Directly(x);
  return true;
}

/// Whether `v` only moves on the way to casts to bf16 (rewrite 4): every
/// user is such a cast, or a move whose results do the same (or are unread).
bool feedsOnlyBf16Casts(Value v) {
  for (Operation *user : v.getUsers()) {
    if (auto cast = dyn_cast<hpc::CastOp>(user)) {
      if (!rankedOf(cast.getResult()).getElementType().isBF16())
        return false;
      continue;
    }
    if (!hpc::movesDataOnly(user) || user->getOperand(0) != v)
      return false;
    for (Value r : user->getResults())
      if (!feedsOnlyBf16Casts(r))
        return false;
  }
  return true;
}

/// Rewrite 4 below `v`: the moves after it are made again on `bf16`, its
/// bf16 value, and the casts to bf16 read that; the f32 ops go.
void moveInBf16(Value v, Value bf16) {
  for (Operation *user : llvm::make_early_inc_range(v.getUsers())) {
    if (auto cast = dyn_cast<hpc::CastOp>(user)) {
      cast.getResult().replaceAllUsesWith(bf16);
      cast.erase();
      continue;
    }
    OpBuilder b(user);
    Operation *moved = b.clone(*user);
    moved->setOperand(0, bf16);
    Type elt = rankedOf(bf16).getElementType();
    for (auto [from, to] : llvm::zip(user->getResults(), moved->getResults())) {
      to.setType(rankedOf(from).clone(elt));
      moveInBf16(from, to);
    }
    user->erase();
  }
}

/// Rewrite 4 on `back`, a cast back to f32.
bool moveBf16(hpc::CastOp back) {
  if (!castBack(back.getResult()) || back.getResult().use_empty() ||
      !feedsOnlyBf16Casts(back.getResult()))
    return false;
  moveInBf16(back.getResult(), back.getInput());
  back.erase();
  return true;
}

/// Rewrite 5 on `back`, a cast back to f32: the product before it (through
/// reshapes) writes f32 when the cast is its result's only reader.
bool widenProductResult(hpc::CastOp back) {
  if (!castBack(back.getResult()))
    return false;
  SmallVector<Operation *> reshapes;
  Value v = back.getInput();
  while (auto reshape = v.getDefiningOp<hpc::ReshapeOp>()) {
    if (!v.hasOneUse())
      return false;
    reshapes.push_back(reshape);
    v = reshape.getInput();
  }
  Operation *product = v.getDefiningOp();
  if (!product || !isa<hpc::MatMulOp, hpc::GemmOp>(product) || !v.hasOneUse())
    return false;
  Type f32 = Float32Type::get(back.getContext());
  v.setType(rankedOf(v).clone(f32));
  for (Operation *reshape : llvm::reverse(reshapes))
    reshape->getResult(0).setType(rankedOf(reshape->getResult(0)).clone(f32));
  back.getResult().replaceAllUsesWith(back.getInput());
  back.erase();
  return true;
}

struct FuseEpilogues : hpc::impl::HPCFuseEpiloguesBase<FuseEpilogues> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      SmallVector<hpc::MatMulOp> mms;
      func.walk([&](hpc::MatMulOp mm) { mms.push_back(mm); });
      for (hpc::MatMulOp mm : mms)
        if (fuseTransposedWeight(mm))
          ++numTransposes;
      SmallVector<hpc::ReduceSumOp> sums;
      func.walk([&](hpc::ReduceSumOp sum) { sums.push_back(sum); });
      for (hpc::ReduceSumOp sum : sums)
        if (fuseBatchSummedProduct(sum))
          ++numWeightGradients;
      SmallVector<hpc::TransposeOp> transposes;
      func.walk([&](hpc::TransposeOp tr) { transposes.push_back(tr); });
      for (hpc::TransposeOp tr : transposes)
        if (fuseTransposedProduct(tr))
          ++numTransposedProducts;
      SmallVector<hpc::AddOp> adds;
      func.walk([&](hpc::AddOp add) { adds.push_back(add); });
      Bf16Biases bf16;
      for (hpc::AddOp add : adds) {
        if (std::optional<MatMulBias> match = matchMatMulBias(add)) {
          fuseMatMulBias(add, *match, bf16);
          ++numBiases;
        }
      }
      bf16.eraseUnread();
      SmallVector<hpc::AddOp> residualAdds;
      func.walk([&](hpc::AddOp add) { residualAdds.push_back(add); });
      for (hpc::AddOp add : residualAdds)
        if (fuseResidual(add))
          ++numResiduals;
      // Scatter-adds first: they leave the sums they were in as s + x for
      // the accumulation below. Until none is left (a scatter moved out of
      // one add may meet the next).
      for (bool changed = true; changed;) {
        changed = false;
        SmallVector<hpc::AddOp> scatterSums;
        func.walk([&](hpc::AddOp add) { scatterSums.push_back(add); });
        for (hpc::AddOp add : scatterSums)
          if (fuseScatterAdd(add)) {
            ++numScatterAdds;
            changed = true;
          }
      }
      // After the bias adds (a gemm with its bias is not plain) and before
      // the activations (act(s + gemm) is act's of the fused gemm).
      SmallVector<hpc::AddOp> accumulations;
      func.walk([&](hpc::AddOp add) { accumulations.push_back(add); });
      for (hpc::AddOp add : accumulations)
        if (fuseAccumulation(add))
          ++numAccumulations;
      // After the bias and residual adds, so act(add(matmul)) becomes one
      // gemm and relu(add(conv, r)) one conv.
      SmallVector<std::pair<Operation *, StringRef>> acts;
      func.walk([&](Operation *op) {
        if (std::optional<StringRef> activation = hpc::epilogueActivationOf(op))
          acts.push_back({op, *activation});
      });
      for (auto [act, activation] : acts)
        if (fuseActivation(act, activation))
          ++numActivations;
      // Last: the casts the rewrites above looked through are settled.
      SmallVector<hpc::CastOp> backs;
      func.walk([&](hpc::CastOp cast) {
        if (castBack(cast.getResult()))
          backs.push_back(cast);
      });
      SmallVector<hpc::CastOp> kept;
      for (hpc::CastOp back : backs) {
        if (moveBf16(back))
          ++numMovedBf16;
        else
          kept.push_back(back);
      }
      for (hpc::CastOp back : kept)
        if (widenProductResult(back))
          ++numWidened;
    }
  }
};

} // namespace
