//===- HPCGradients.cpp - the GradientInterface of every differentiable op -===//
//
// Reverse-mode derivatives (hpc-autodiff), one function per op, attached to
// the ops as external models of GradientInterface. Gradients are hpc ops like
// any other, so partitioning, search and lowering treat a train step as a
// program. Most are built from forward ops; the convolution filter gradient,
// the pooling gradients, GELU's and layer normalization's input gradient are
// ops of their own (HPCTrainOps.td). The
// formulas follow PyTorch's derivatives where a choice exists (ties of max
// reductions share the gradient, max pooling sends it to the first maximum,
// relu's gradient is zero at 0).
//
//===----------------------------------------------------------------------===//

#include "HPC/HPCBuilder.h"

#include "mlir/IR/BuiltinOps.h"

#include <cmath>

using namespace mlir;
using namespace hpc;

namespace {

using Grads = SmallVectorImpl<Value>;

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
Type eltOf(Value v) { return typeOf(v).getElementType(); }
int64_t rankOf(Value v) { return typeOf(v).getRank(); }
double f(APFloat v) { return v.convertToDouble(); }

int64_t positive(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

/// `v` as x's float type (masks are i1).
Value asFloat(GraphBuilder &g, Value mask, Value like) { return g.castTo(mask, eltOf(like)); }

Value greater(GraphBuilder &g, Value a, Value c) { return g.op<GreaterOp>({a, c}); }
Value less(GraphBuilder &g, Value a, Value c) { return g.op<LessOp>({a, c}); }

//===----------------------------------------------------------------------===//
// Unary elementwise
//===----------------------------------------------------------------------===//

/// dy * factor, the shape of most unary gradients.
LogicalResult unary(Grads &dxs, GraphBuilder &g, Value dy, Value factor) {
  dxs[0] = g.mul(dy, factor);
  return success();
}

LogicalResult zeroGrad(Operation *op, GraphBuilder &g, ArrayRef<Value>, Grads &dxs) {
  dxs[0] = g.zerosLike(op->getOperand(0));
  return success();
}

LogicalResult gradNeg(NegOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  dxs[0] = g.neg(dy[0]);
  return success();
}
LogicalResult gradAbs(AbsOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return unary(dxs, g, dy[0], g.op<SignOp>({op.getInput()}));
}
LogicalResult gradExp(ExpOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return unary(dxs, g, dy[0], op.getResult());
}
LogicalResult gradLog(LogOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  dxs[0] = g.div(dy[0], op.getInput());
  return success();
}
LogicalResult gradSqrt(SqrtOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  dxs[0] = g.div(dy[0], g.scale(op.getResult(), 2.0));
  return success();
}
LogicalResult gradReciprocal(ReciprocalOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value y = op.getResult();
  dxs[0] = g.neg(g.mul(dy[0], g.mul(y, y)));
  return success();
}
LogicalResult gradRelu(ReluOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value y = op.getResult();
  dxs[0] = g.where(greater(g, y, g.scalarLike(y, 0)), dy[0], g.zerosLike(y));
  return success();
}
LogicalResult gradSigmoid(SigmoidOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value y = op.getResult();
  return unary(dxs, g, dy[0], g.mul(g.sub(g.scalarLike(y, 1), y), y));
}
LogicalResult gradTanh(TanhOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value y = op.getResult();
  return unary(dxs, g, dy[0], g.sub(g.scalarLike(y, 1), g.mul(y, y)));
}
LogicalResult gradErf(ErfOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value x = op.getInput();
  Value e = g.op<ExpOp>({g.neg(g.mul(x, x))});
  return unary(dxs, g, dy[0], g.scale(e, 2.0 / std::sqrt(M_PI)));
}
LogicalResult gradSin(SinOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return unary(dxs, g, dy[0], g.op<CosOp>({op.getInput()}));
}
LogicalResult gradCos(CosOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return unary(dxs, g, dy[0], g.neg(g.op<SinOp>({op.getInput()})));
}
LogicalResult gradSilu(SiluOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value x = op.getInput();
  Value s = g.op<SigmoidOp>({x});
  Value one = g.scalarLike(x, 1);
  return unary(dxs, g, dy[0], g.mul(s, g.add(one, g.mul(x, g.sub(one, s)))));
}
LogicalResult gradSoftplus(SoftplusOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return unary(dxs, g, dy[0], g.op<SigmoidOp>({op.getInput()}));
}
LogicalResult gradHardSwish(HardSwishOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  // PyTorch: x < -3: 0; x <= 3: dy * (x / 3 + 1/2); else dy.
  Value x = op.getInput();
  Value mid = g.mul(dy[0], g.add(g.scale(x, 1.0 / 3.0), g.scalarLike(x, 0.5)));
  Value upper = g.where(g.op<LessEqualOp>({x, g.scalarLike(x, 3)}), mid, dy[0]);
  dxs[0] = g.where(less(g, x, g.scalarLike(x, -3)), g.zerosLike(x), upper);
  return success();
}

/// Whether hpc-autodiff asked for the composed forms (kComposedGradientsAttr).
bool composedGradients(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  return module && module->hasAttr(kComposedGradientsAttr);
}

LogicalResult gradGelu(GeluOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  if (!composedGradients(op)) {
    dxs[0] = g.op<GeluGradOp>({op.getInput(), dy[0]},
                              {g.attr("approximate", op.getApproximateAttr())});
    return success();
  }
  Value x = op.getInput();
  Value half = g.scalarLike(x, 0.5), one = g.scalarLike(x, 1);
  if (op.getApproximate() == "tanh") {
    // d/dx 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
    const double beta = std::sqrt(2.0 / M_PI), kappa = 0.044715;
    Value x2 = g.mul(x, x);
    Value u = g.scale(g.add(x, g.scale(g.mul(x2, x), kappa)), beta);
    Value t = g.op<TanhOp>({u});
    Value left = g.mul(half, g.add(one, t));
    Value du = g.scale(g.add(one, g.scale(x2, 3 * kappa)), beta);
    Value right = g.mul(g.mul(g.mul(half, x), g.sub(one, g.mul(t, t))), du);
    return unary(dxs, g, dy[0], g.add(left, right));
  }
  // Phi(x) + x phi(x).
  Value cdf = g.mul(half, g.add(one, g.op<ErfOp>({g.scale(x, M_SQRT1_2)})));
  Value pdf = g.scale(g.op<ExpOp>({g.scale(g.mul(x, x), -0.5)}), 1.0 / std::sqrt(2 * M_PI));
  return unary(dxs, g, dy[0], g.add(cdf, g.mul(x, pdf)));
}
LogicalResult gradLeakyRelu(LeakyReluOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value x = op.getInput();
  dxs[0] = g.where(greater(g, x, g.scalarLike(x, 0)), dy[0], g.scale(dy[0], f(op.getAlpha())));
  return success();
}
LogicalResult gradElu(EluOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value x = op.getInput();
  Value neg = g.mul(dy[0], g.scale(g.op<ExpOp>({x}), f(op.getAlpha())));
  dxs[0] = g.where(greater(g, x, g.scalarLike(x, 0)), dy[0], neg);
  return success();
}
LogicalResult gradHardSigmoid(HardSigmoidOp op, GraphBuilder &g, ArrayRef<Value> dy,
                              Grads &dxs) {
  Value x = op.getInput();
  double alpha = f(op.getAlpha());
  Value t = g.add(g.scale(x, alpha), g.scalarLike(x, f(op.getBeta())));
  Value inside = g.op<AndOp>({greater(g, t, g.scalarLike(x, 0)), less(g, t, g.scalarLike(x, 1))});
  dxs[0] = g.where(inside, g.scale(dy[0], alpha), g.zerosLike(x));
  return success();
}
LogicalResult gradClip(ClipOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value x = op.getInput();
  Value keep;
  auto both = [&](Value m) { keep = keep ? g.op<AndOp>({keep, m}) : m; };
  if (auto lo = op.getMin())
    both(g.op<GreaterEqualOp>({x, g.scalarLike(x, f(*lo))}));
  if (auto hi = op.getMax())
    both(g.op<LessEqualOp>({x, g.scalarLike(x, f(*hi))}));
  dxs[0] = keep ? g.where(keep, dy[0], g.zerosLike(x)) : dy[0];
  return success();
}
LogicalResult gradCast(CastOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  if (isa<FloatType>(eltOf(op.getInput())) && isa<FloatType>(eltOf(op.getResult())))
    dxs[0] = g.castTo(dy[0], eltOf(op.getInput()));
  return success();
}

//===----------------------------------------------------------------------===//
// Binary elementwise (numpy broadcasting: gradients sum back to each shape)
//===----------------------------------------------------------------------===//

/// Sets the operand gradients from full-shape gradients.
LogicalResult binary(Operation *op, GraphBuilder &g, Grads &dxs, Value dl, Value dr) {
  if (dl)
    dxs[0] = g.unbroadcast(g.expand(dl, shapeOf(op->getResult(0))), shapeOf(op->getOperand(0)));
  if (dr)
    dxs[1] = g.unbroadcast(g.expand(dr, shapeOf(op->getResult(0))), shapeOf(op->getOperand(1)));
  return success();
}

LogicalResult gradAdd(AddOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return binary(op, g, dxs, dy[0], dy[0]);
}
LogicalResult gradSub(SubOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return binary(op, g, dxs, dy[0], g.neg(dy[0]));
}
LogicalResult gradMul(MulOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return binary(op, g, dxs, g.mul(dy[0], op.getRhs()), g.mul(dy[0], op.getLhs()));
}
LogicalResult gradDiv(DivOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value r = op.getRhs();
  return binary(op, g, dxs, g.div(dy[0], r), g.neg(g.div(g.mul(dy[0], op.getResult()), r)));
}
LogicalResult gradPow(PowOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value l = op.getLhs(), r = op.getRhs(), y = op.getResult();
  Value dl = g.mul(dy[0], g.mul(r, g.op<PowOp>({l, g.sub(r, g.scalarLike(r, 1))})));
  // PyTorch: the exponent's gradient is 0 where base == 0 and exponent >= 0.
  Value dr = g.mul(dy[0], g.mul(y, g.op<LogOp>({l})));
  Value zeroBase = g.op<AndOp>({g.op<EqualOp>({l, g.scalarLike(l, 0)}),
                                g.op<GreaterEqualOp>({r, g.scalarLike(r, 0)})});
  dr = g.where(zeroBase, g.scalarLike(y, 0), dr);
  return binary(op, g, dxs, dl, dr);
}
/// maximum/minimum: the gradient goes to the winner, halved on ties (PyTorch).
template <typename CmpOp>
LogicalResult extremum(Operation *op, GraphBuilder &g, Value dy, Grads &dxs) {
  Value l = op->getOperand(0), r = op->getOperand(1);
  Value half = g.scale(dy, 0.5), zero = g.scalarLike(dy, 0);
  Value tie = g.op<EqualOp>({l, r});
  Value lwins = g.op<CmpOp>({l, r}), rwins = g.op<CmpOp>({r, l});
  Value dl = g.where(tie, half, g.where(lwins, dy, zero));
  Value dr = g.where(tie, half, g.where(rwins, dy, zero));
  return binary(op, g, dxs, dl, dr);
}
LogicalResult gradMax(MaxOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return extremum<GreaterOp>(op, g, dy[0], dxs);
}
LogicalResult gradMin(MinOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return extremum<LessOp>(op, g, dy[0], dxs);
}
/// mod (Python sign) and fmod (C sign): d/dl = 1, d/dr = -floor or -trunc(l/r).
LogicalResult gradMod(ModOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value q = g.op<FloorOp>({g.div(op.getLhs(), op.getRhs())});
  return binary(op, g, dxs, dy[0], g.neg(g.mul(dy[0], q)));
}
LogicalResult gradFMod(FModOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value q = g.div(op.getLhs(), op.getRhs());
  Value trunc = g.where(less(g, q, g.scalarLike(q, 0)), g.op<CeilOp>({q}), g.op<FloorOp>({q}));
  return binary(op, g, dxs, dy[0], g.neg(g.mul(dy[0], trunc)));
}
LogicalResult gradWhere(WhereOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value zero = g.scalarLike(dy[0], 0), c = op.getCondition();
  Value y = op.getResult();
  auto full = [&](Value v) { return g.unbroadcast(v, shapeOf(y)); };
  Value dl = g.where(c, dy[0], zero), dr = g.where(c, zero, dy[0]);
  dxs[1] = g.unbroadcast(g.expand(full(dl), shapeOf(y)), shapeOf(op.getLhs()));
  dxs[2] = g.unbroadcast(g.expand(full(dr), shapeOf(y)), shapeOf(op.getRhs()));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

SmallVector<int64_t> swapLastTwo(int64_t rank) {
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

LogicalResult gradMatMul(MatMulOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  // Promote 1-D operands as numpy does, then dA = dY B^T, dB = A^T dY,
  // summed over broadcast batch dimensions.
  Value a = op.getLhs(), b = op.getRhs();
  SmallVector<int64_t> as(shapeOf(a)), bs(shapeOf(b)), ys(shapeOf(dy[0]));
  if (as.size() == 1) {
    as.insert(as.begin(), 1);
    ys.insert(ys.end() - (bs.size() == 1 ? 0 : 1), 1);
  }
  if (bs.size() == 1) {
    bs.push_back(1);
    ys.push_back(1);
  }
  Value a2 = g.reshape(a, as), b2 = g.reshape(b, bs), dy2 = g.reshape(dy[0], ys);
  Value da = g.op<MatMulOp>({dy2, g.transpose(b2, swapLastTwo(bs.size()))});
  Value db = g.op<MatMulOp>({g.transpose(a2, swapLastTwo(as.size())), dy2});
  if (!g.ok())
    return failure();
  dxs[0] = g.reshape(g.unbroadcast(da, as), shapeOf(a));
  dxs[1] = g.reshape(g.unbroadcast(db, bs), shapeOf(b));
  return success();
}

/// Autodiff runs before hpc-fuse-epilogues; a fused activation would need
/// the pre-activation value, which the op does not keep.
LogicalResult refuseActivation(Operation *op, StringRef activation) {
  if (activation == "none")
    return success();
  return op->emitOpError("has no gradient with activation \"")
         << activation << "\" (differentiate before hpc-fuse-epilogues)";
}

LogicalResult gradGemm(GemmOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  if (failed(refuseActivation(op, op.getActivation())))
    return failure();
  // Y = alpha op(A) op(B) + beta C.
  bool ta = op.getTransA(), tb = op.getTransB();
  double alpha = f(op.getAlpha());
  Value a = op.getA(), b = op.getB();
  auto gemm = [&](Value x, Value y, bool tx, bool ty) {
    return g.op<GemmOp>({x, y}, {g.f64("alpha", alpha), g.boolean("trans_a", tx),
                                 g.boolean("trans_b", ty)});
  };
  dxs[0] = ta ? gemm(b, dy[0], tb, true) : gemm(dy[0], b, false, !tb);
  dxs[1] = tb ? gemm(dy[0], a, true, ta) : gemm(a, dy[0], !ta, false);
  if (Value c = op.getC())
    dxs[2] = g.unbroadcast(g.scale(dy[0], f(op.getBeta())), shapeOf(c));
  return success();
}

/// The bias gradient of a convolution: sum over every dim but channels.
Value channelSum(GraphBuilder &g, Value dy) {
  SmallVector<int64_t> axes{0};
  for (int64_t d = 2; d < rankOf(dy); ++d)
    axes.push_back(d);
  return g.reduceSum(dy, axes, /*keepdims=*/false);
}

LogicalResult gradConv(ConvOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  if (failed(refuseActivation(op, op.getActivation())))
    return failure();
  if (op.getResidual())
    return op.emitOpError("has no gradient with a residual (differentiate before "
                          "hpc-fuse-epilogues)");
  Value x = op.getInput(), w = op.getWeight();
  ArrayRef<int64_t> xs = shapeOf(x), ys = shapeOf(dy[0]), ws = shapeOf(w);
  ArrayRef<int64_t> strides = op.getStrides(), pads = op.getPads(), dil = op.getDilations();
  int64_t spatial = xs.size() - 2;
  // conv_transpose of dY is the input gradient; output_padding restores the
  // input positions the convolution's last window did not reach.
  SmallVector<int64_t> outputPadding;
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t natural = strides[i] * (ys[i + 2] - 1) + (ws[i + 2] - 1) * dil[i] + 1 - pads[i] -
                      pads[i + spatial];
    outputPadding.push_back(xs[i + 2] - natural);
  }
  dxs[0] = g.op<ConvTransposeOp>(
      {dy[0], w}, {g.attr("strides", op.getStridesAttr()), g.attr("pads", op.getPadsAttr()),
                   g.attr("dilations", op.getDilationsAttr()),
                   g.i64s("output_padding", outputPadding), g.i64("group", op.getGroup())});
  dxs[1] = g.op<ConvWeightGradOp>(
      {x, dy[0]}, {g.i64s("kernel_shape", ws.drop_front(2)),
                   g.attr("strides", op.getStridesAttr()), g.attr("pads", op.getPadsAttr()),
                   g.attr("dilations", op.getDilationsAttr()), g.i64("group", op.getGroup())});
  if (op.getBias())
    dxs[2] = channelSum(g, dy[0]);
  return success();
}

LogicalResult gradConvTranspose(ConvTransposeOp op, GraphBuilder &g, ArrayRef<Value> dy,
                                Grads &dxs) {
  // A transposed convolution is the adjoint of the convolution from its
  // result's space to its input's with the same filter.
  Value x = op.getInput(), w = op.getWeight();
  auto window = [&](NamedAttribute extra) {
    return SmallVector<NamedAttribute>{g.attr("strides", op.getStridesAttr()),
                                       g.attr("pads", op.getPadsAttr()),
                                       g.attr("dilations", op.getDilationsAttr()),
                                       g.i64("group", op.getGroup()), extra};
  };
  SmallVector<NamedAttribute> convAttrs = window(g.i64("group", op.getGroup()));
  convAttrs.pop_back();
  convAttrs.push_back(convOperandSegments(g.builder(), false, false));
  dxs[0] = g.op<ConvOp>({dy[0], w}, convAttrs);
  dxs[1] = g.op<ConvWeightGradOp>({dy[0], x},
                                  window(g.i64s("kernel_shape", shapeOf(w).drop_front(2))));
  if (op.getBias())
    dxs[2] = channelSum(g, dy[0]);
  return success();
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

SmallVector<NamedAttribute> windowAttrs(Operation *op, GraphBuilder &g,
                                        ArrayRef<StringRef> names) {
  SmallVector<NamedAttribute> attrs;
  for (StringRef n : names)
    if (Attribute a = op->getAttr(n))
      attrs.push_back(g.attr(n, a));
  return attrs;
}

LogicalResult gradMaxPool(MaxPoolOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  dxs[0] = g.op<MaxPoolGradOp>(
      {op.getInput(), dy[0]},
      windowAttrs(op, g, {"kernel_shape", "strides", "pads", "dilations", "ceil_mode"}));
  return success();
}
LogicalResult gradAvgPool(AvgPoolOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  dxs[0] = g.op<AvgPoolGradOp>(
      {op.getInput(), dy[0]}, windowAttrs(op, g, {"kernel_shape", "strides", "pads",
                                                  "dilations", "ceil_mode", "count_include_pad"}));
  return success();
}
LogicalResult gradGlobalAvgPool(GlobalAvgPoolOp op, GraphBuilder &g, ArrayRef<Value> dy,
                                Grads &dxs) {
  ArrayRef<int64_t> xs = shapeOf(op.getInput());
  int64_t window = 1;
  for (int64_t d : xs.drop_front(2))
    window *= d;
  dxs[0] = g.scale(g.expand(dy[0], xs), 1.0 / double(window));
  return success();
}
LogicalResult gradGlobalMaxPool(GlobalMaxPoolOp op, GraphBuilder &g, ArrayRef<Value> dy,
                                Grads &dxs) {
  // A max pooling whose window is the whole image: first maximum wins.
  ArrayRef<int64_t> xs = shapeOf(op.getInput());
  int64_t spatial = xs.size() - 2;
  SmallVector<int64_t> ones(spatial, 1), zeros(2 * spatial, 0);
  dxs[0] = g.op<MaxPoolGradOp>({op.getInput(), dy[0]},
                               {g.i64s("kernel_shape", xs.drop_front(2)), g.i64s("strides", ones),
                                g.i64s("pads", zeros), g.i64s("dilations", ones)});
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

LogicalResult gradSoftmax(SoftmaxOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value y = op.getResult();
  int64_t axis = positive(op.getAxis(), rankOf(y));
  Value s = g.reduceSum(g.mul(dy[0], y), {axis}, true);
  dxs[0] = g.mul(y, g.sub(dy[0], s));
  return success();
}
LogicalResult gradLogSoftmax(LogSoftmaxOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value y = op.getResult();
  int64_t axis = positive(op.getAxis(), rankOf(y));
  dxs[0] = g.sub(dy[0], g.mul(g.op<ExpOp>({y}), g.reduceSum(dy[0], {axis}, true)));
  return success();
}

Value reduceMean(GraphBuilder &g, Value v, ArrayRef<int64_t> axes) {
  return g.op<ReduceMeanOp>({v}, {g.i64s("axes", axes), g.boolean("keepdims", true)});
}
Value rsqrt(GraphBuilder &g, Value v) { return g.op<ReciprocalOp>({g.op<SqrtOp>({v})}); }

LogicalResult gradLayerNorm(LayerNormOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value x = op.getInput(), scale = op.getScale();
  int64_t axis = positive(op.getAxis(), rankOf(x));
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(axis, rankOf(x)));
  if (!composedGradients(op) && typeOf(scale).getShape() == typeOf(x).getShape().drop_front(axis) &&
      eltOf(scale) == eltOf(x)) {
    // The input gradient as one op, and xhat for the parameter gradients as
    // a layer_norm with unit scale: two kernels instead of ~15 elementwise
    // ops and reductions.
    NamedAttribute attrs[] = {g.attr("axis", op.getAxisAttr()),
                              g.attr("epsilon", op.getEpsilonAttr())};
    dxs[0] = g.op<LayerNormGradOp>({x, scale, dy[0]}, attrs);
    Value xhat = g.op<LayerNormOp>({x, g.splat(typeOf(scale), 1.0)}, attrs);
    dxs[1] = g.unbroadcast(g.mul(dy[0], xhat), shapeOf(scale));
    if (Value bias = op.getBias())
      dxs[2] = g.unbroadcast(dy[0], shapeOf(bias));
    return success();
  }
  Value xc = g.sub(x, reduceMean(g, x, axes));
  Value var = reduceMean(g, g.mul(xc, xc), axes);
  Value rstd = rsqrt(g, g.add(var, g.scalarLike(x, f(op.getEpsilon()))));
  Value xhat = g.mul(xc, rstd);
  Value dxhat = g.mul(dy[0], scale);
  Value m1 = reduceMean(g, dxhat, axes), m2 = reduceMean(g, g.mul(dxhat, xhat), axes);
  dxs[0] = g.mul(rstd, g.sub(g.sub(dxhat, m1), g.mul(xhat, m2)));
  dxs[1] = g.unbroadcast(g.mul(dy[0], xhat), shapeOf(scale));
  if (Value bias = op.getBias())
    dxs[2] = g.unbroadcast(dy[0], shapeOf(bias));
  return success();
}

LogicalResult gradRMSNorm(RMSNormOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value x = op.getInput(), scale = op.getScale();
  SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(positive(op.getAxis(), rankOf(x)), rankOf(x)));
  Value r = rsqrt(g, g.add(reduceMean(g, g.mul(x, x), axes), g.scalarLike(x, f(op.getEpsilon()))));
  Value dxh = g.mul(dy[0], scale);
  Value r3 = g.mul(r, g.mul(r, r));
  dxs[0] = g.sub(g.mul(r, dxh), g.mul(g.mul(x, r3), reduceMean(g, g.mul(dxh, x), axes)));
  dxs[1] = g.unbroadcast(g.mul(dy[0], g.mul(x, r)), shapeOf(scale));
  return success();
}

LogicalResult gradBatchNorm(BatchNormOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  // Inference batch norm is affine per channel (dim 1): y = (x - mean) * k
  // + bias with k = scale * rstd. The per-channel factors are multiplied
  // first, so each gradient takes as few passes over the activation as it
  // can: dx = dy * k, and the scale and variance gradients share
  // s = sum(dy * (x - mean)).
  Value x = op.getInput();
  int64_t channels = shapeOf(x)[1];
  SmallVector<int64_t> pshape(rankOf(x), 1);
  pshape[1] = channels;
  auto perChannel = [&](Value v) { return g.reshape(v, pshape); };
  Value rstd = rsqrt(g, g.add(op.getVariance(), g.scalarLike(x, f(op.getEpsilon()))));
  Value scale = op.getScale(); // [C], as rstd
  auto sum = [&](Value v) { return channelSum(g, v); };
  Value k = g.mul(scale, rstd);
  dxs[0] = g.mul(dy[0], perChannel(k));
  Value s = sum(g.mul(dy[0], g.sub(x, perChannel(op.getMean()))));
  dxs[1] = g.mul(s, rstd);
  Value dbias = sum(dy[0]);
  dxs[2] = dbias;
  dxs[3] = g.neg(g.mul(dbias, k));
  Value r3 = g.mul(rstd, g.mul(rstd, rstd));
  dxs[4] = g.scale(g.mul(g.mul(s, scale), r3), -0.5);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The reduction's result with its reduced dims kept as size 1.
Value keptDims(GraphBuilder &g, Value v, Operation *op, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> shape(shapeOf(op->getOperand(0)));
  for (int64_t a : axes)
    shape[a] = 1;
  return g.reshape(v, shape);
}

template <typename OpTy>
LogicalResult gradReduce(OpTy op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  Value x = op.getInput();
  ArrayRef<int64_t> axes = op.getAxes();
  if (axes.empty()) {
    dxs[0] = dy[0];
    return success();
  }
  Value gk = keptDims(g, dy[0], op, axes), yk = keptDims(g, op.getResult(), op, axes);
  int64_t count = 1;
  for (int64_t a : axes)
    count *= shapeOf(x)[a];
  if constexpr (std::is_same_v<OpTy, ReduceSumOp>) {
    dxs[0] = g.expand(gk, shapeOf(x));
  } else if constexpr (std::is_same_v<OpTy, ReduceMeanOp>) {
    dxs[0] = g.scale(g.expand(gk, shapeOf(x)), 1.0 / double(count));
  } else if constexpr (std::is_same_v<OpTy, ReduceProdOp>) {
    // The product of the others, without dividing by x (which may be 0):
    // y / x in a group without zeros; in a group with one zero, the product
    // of the nonzeros at the zero and 0 elsewhere; 0 with several zeros.
    Value zero = g.scalarLike(x, 0);
    Value isZero = g.op<EqualOp>({x, zero});
    Value nonzero = g.where(isZero, g.scalarLike(x, 1), x);
    Value others = g.op<ReduceProdOp>({nonzero},
                                      {g.i64s("axes", axes), g.boolean("keepdims", true)});
    Value zeros = g.reduceSum(asFloat(g, isZero, x), axes, true);
    Value atZero = g.where(g.op<EqualOp>({zeros, g.scalarLike(x, 1)}), others, zero);
    Value elsewhere = g.where(g.op<EqualOp>({zeros, zero}), g.div(others, nonzero), zero);
    dxs[0] = g.mul(gk, g.where(isZero, atZero, elsewhere));
  } else {
    // max/min: ties share the gradient evenly (torch.amax/amin).
    Value mask = asFloat(g, g.op<EqualOp>({x, yk}), x);
    dxs[0] = g.mul(g.div(gk, g.reduceSum(mask, axes, true)), mask);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

/// Indices with negative entries counted from the end of a dim of `size`.
Value normalizedIndices(GraphBuilder &g, Value idx, int64_t size) {
  Value zero = g.scalarLike(idx, 0);
  return g.where(less(g, idx, zero), g.add(idx, g.scalarLike(idx, double(size))), idx);
}

Value scatterAdd(GraphBuilder &g, Value into, Value idx, Value updates, int64_t axis) {
  return g.op<ScatterElementsOp>({into, idx, updates},
                                 {g.i64("axis", axis), g.attr("reduction", g.builder().getStringAttr("add"))});
}

LogicalResult gradGather(GatherOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  // Scatter-add dY's rows back: dY reshaped to in[:a] + [K] + in[a+1:], the
  // K indices broadcast along the other dims.
  Value x = op.getInput();
  ArrayRef<int64_t> xs = shapeOf(x);
  int64_t axis = positive(op.getAxis(), xs.size());
  int64_t k = typeOf(op.getIndices()).getNumElements();
  SmallVector<int64_t> rows(xs);
  rows[axis] = k;
  SmallVector<int64_t> idxShape(xs.size(), 1);
  idxShape[axis] = k;
  Value idx = normalizedIndices(g, g.reshape(op.getIndices(), {k}), xs[axis]);
  idx = g.expand(g.reshape(g.castTo(idx, g.builder().getI64Type()), idxShape), rows);
  dxs[0] = scatterAdd(g, g.zerosLike(x), idx, g.reshape(dy[0], rows), axis);
  return success();
}
LogicalResult gradGatherElements(GatherElementsOp op, GraphBuilder &g, ArrayRef<Value> dy,
                                 Grads &dxs) {
  Value x = op.getInput();
  int64_t axis = positive(op.getAxis(), rankOf(x));
  Value idx = normalizedIndices(g, op.getIndices(), shapeOf(x)[axis]);
  dxs[0] = scatterAdd(g, g.zerosLike(x), idx, dy[0], axis);
  return success();
}
LogicalResult gradScatterElements(ScatterElementsOp op, GraphBuilder &g, ArrayRef<Value> dy,
                                  Grads &dxs) {
  Value x = op.getInput();
  int64_t axis = positive(op.getAxis(), rankOf(x));
  Value idx = normalizedIndices(g, op.getIndices(), shapeOf(x)[axis]);
  StringRef reduction = op.getReduction();
  if (reduction != "none" && reduction != "add")
    return op.emitOpError("has no gradient for reduction \"") << reduction << "\"";
  dxs[0] = reduction == "add"
               ? dy[0]
               : g.op<ScatterElementsOp>({dy[0], idx, g.zerosLike(op.getUpdates())},
                                         {g.i64("axis", axis)});
  dxs[2] = g.op<GatherElementsOp>({dy[0], idx}, {g.i64("axis", axis)});
  return success();
}
LogicalResult gradTopK(TopKOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  if (!dy[0])
    return success();
  Value x = op.getInput();
  dxs[0] = scatterAdd(g, g.zerosLike(x), op.getIndices(), dy[0], positive(op.getAxis(), rankOf(x)));
  return success();
}

//===----------------------------------------------------------------------===//
// Mixture of experts: dispatch and gather are each other's transposes (a
// slot holds one choice)
//===----------------------------------------------------------------------===//

LogicalResult gradMoEDispatch(MoEDispatchOp op, GraphBuilder &g, ArrayRef<Value> dy,
                              Grads &dxs) {
  Value rows = g.op<MoEGatherOp>({dy[0], op.getSlots()});
  // One input row serves all of a token's choices: their gradients add.
  int64_t batch = rankOf(op.getSlots()) - 2;
  dxs[0] = rankOf(op.getInput()) == batch + 2 ? g.reduceSum(rows, {batch + 1}, false) : rows;
  return success();
}
LogicalResult gradMoEGather(MoEGatherOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  ArrayRef<int64_t> buffer = shapeOf(op.getBuffer());
  int64_t batch = rankOf(op.getSlots()) - 2;
  dxs[0] = g.op<MoEDispatchOp>({dy[0], op.getSlots()}, {g.i64("num_experts", buffer[batch]),
                                                         g.i64("capacity", buffer[batch + 1])});
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult gradView(Operation *op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  dxs[0] = g.reshape(dy[0], shapeOf(op->getOperand(0)));
  return success();
}
LogicalResult gradReshape(ReshapeOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return gradView(op, g, dy, dxs);
}
LogicalResult gradSqueeze(SqueezeOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return gradView(op, g, dy, dxs);
}
LogicalResult gradUnsqueeze(UnsqueezeOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return gradView(op, g, dy, dxs);
}
LogicalResult gradDropout(DropoutOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return gradView(op, g, dy, dxs);
}
LogicalResult gradTranspose(TransposeOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  ArrayRef<int64_t> perm = op.getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  // The gradient of x @ W^T with respect to W^T is a product read only
  // here: (A B)^T is B^T A^T, one gemm instead of a gemm and a
  // weight-sized transpose (a tied embedding's [vocab, d] gradient).
  auto gemm = dy[0].getDefiningOp<GemmOp>();
  if (gemm && perm.size() == 2 && perm[0] == 1 && dy[0].use_empty() && !gemm.getC() &&
      gemm.getActivation() == "none") {
    dxs[0] = g.op<GemmOp>({gemm.getB(), gemm.getA()},
                          {g.f64("alpha", gemm.getAlpha().convertToDouble()),
                           g.boolean("trans_a", !gemm.getTransB()),
                           g.boolean("trans_b", !gemm.getTransA())});
    return success();
  }
  dxs[0] = g.transpose(dy[0], inverse);
  return success();
}
LogicalResult gradExpand(ExpandOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  dxs[0] = g.unbroadcast(dy[0], shapeOf(op.getInput()));
  return success();
}
LogicalResult gradTile(TileOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  // y viewed as [r0, d0, r1, d1, ...]: sum over the repeats.
  ArrayRef<int64_t> xs = shapeOf(op.getInput());
  SmallVector<int64_t> split, axes;
  for (auto [d, r] : llvm::zip(xs, op.getRepeats())) {
    axes.push_back(split.size());
    split.push_back(r);
    split.push_back(d);
  }
  dxs[0] = g.reshape(g.reduceSum(g.reshape(dy[0], split), axes, false), xs);
  return success();
}

/// Pads (begin, end per dim, may be negative) applied with zeros.
Value zeroPad(GraphBuilder &g, Value v, ArrayRef<int64_t> begin, ArrayRef<int64_t> end) {
  if (llvm::all_of(begin, [](int64_t p) { return p == 0; }) &&
      llvm::all_of(end, [](int64_t p) { return p == 0; }))
    return v;
  SmallVector<int64_t> pads(begin);
  pads.append(end.begin(), end.end());
  return g.op<PadOp>({v}, {g.i64s("pads", pads)});
}

LogicalResult gradSlice(SliceOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  // Dim by dim, the gradient grows from the slice's extent to the input's:
  // unit steps by zero padding, other steps by scattering to start + i*step.
  ArrayRef<int64_t> xs = shapeOf(op.getInput());
  Value cur = dy[0];
  for (int64_t d = 0; d < int64_t(xs.size()); ++d) {
    int64_t start = op.getStarts()[d], step = op.getSteps()[d];
    int64_t len = shapeOf(cur)[d];
    if (len == xs[d] && step == 1)
      continue;
    SmallVector<int64_t> grown(shapeOf(cur));
    grown[d] = xs[d];
    if (step == 1) {
      SmallVector<int64_t> begin(xs.size(), 0), end(xs.size(), 0);
      begin[d] = start;
      end[d] = xs[d] - start - len;
      cur = zeroPad(g, cur, begin, end);
      continue;
    }
    SmallVector<int64_t> positions, idxShape(xs.size(), 1);
    for (int64_t i = 0; i < len; ++i)
      positions.push_back(start + i * step);
    idxShape[d] = len;
    Value idx = g.expand(g.i64Tensor(positions, idxShape), shapeOf(cur));
    Value into = g.splat(RankedTensorType::get(grown, eltOf(cur)), 0);
    cur = scatterAdd(g, into, idx, cur, d);
  }
  dxs[0] = cur;
  return success();
}
LogicalResult gradConcat(ConcatOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  ArrayRef<int64_t> ys = shapeOf(dy[0]);
  int64_t axis = positive(op.getAxis(), ys.size()), offset = 0;
  for (auto [i, in] : llvm::enumerate(op.getInputs())) {
    SmallVector<int64_t> starts(ys.size(), 0), ends(ys), steps(ys.size(), 1);
    starts[axis] = offset;
    offset += shapeOf(in)[axis];
    ends[axis] = offset;
    dxs[i] = g.op<SliceOp>({dy[0]}, {g.i64s("starts", starts), g.i64s("ends", ends),
                                     g.i64s("steps", steps)});
  }
  return success();
}
LogicalResult gradSplit(SplitOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  SmallVector<Value> parts;
  for (auto [r, d] : llvm::zip(op.getResults(), dy))
    parts.push_back(d ? d : g.zerosLike(r));
  dxs[0] = g.op<ConcatOp>(parts, {g.i64("axis", op.getAxis())});
  return success();
}
LogicalResult gradPad(PadOp op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  if (op.getMode() != "constant")
    return op.emitOpError("has no gradient in mode \"") << op.getMode() << "\"";
  // Undo the pad: crop what was added, zero-fill what was cropped.
  ArrayRef<int64_t> xs = shapeOf(op.getInput()), pads = op.getPads();
  int64_t rank = xs.size();
  SmallVector<int64_t> begin, end, starts, ends, steps(rank, 1);
  for (int64_t d = 0; d < rank; ++d) {
    begin.push_back(std::max<int64_t>(0, -pads[d]));
    end.push_back(std::max<int64_t>(0, -pads[d + rank]));
    starts.push_back(std::max<int64_t>(0, pads[d]));
    ends.push_back(starts.back() + xs[d]);
  }
  Value grown = zeroPad(g, dy[0], begin, end);
  dxs[0] = shapeOf(grown) == xs ? grown
                                : g.op<SliceOp>({grown}, {g.i64s("starts", starts),
                                                          g.i64s("ends", ends),
                                                          g.i64s("steps", steps)});
  return success();
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

template <typename OpTy, LogicalResult (*Fn)(OpTy, GraphBuilder &, ArrayRef<Value>, Grads &)>
struct Model : GradientInterface::ExternalModel<Model<OpTy, Fn>, OpTy> {
  LogicalResult buildGradients(Operation *op, OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) const {
    GraphBuilder g(b, op->getLoc());
    operandGrads.assign(op->getNumOperands(), Value());
    if (failed(Fn(cast<OpTy>(op), g, resultGrads, operandGrads)))
      return failure();
    if (!g.ok())
      return op->emitOpError("gradient ops do not infer their types (a compiler bug)");
    return success();
  }
};

template <typename OpTy>
LogicalResult zeroGradOf(OpTy op, GraphBuilder &g, ArrayRef<Value> dy, Grads &dxs) {
  return zeroGrad(op, g, dy, dxs);
}

template <typename OpTy, LogicalResult (*Fn)(OpTy, GraphBuilder &, ArrayRef<Value>, Grads &)>
void attach(MLIRContext *ctx) {
  OpTy::template attachInterface<Model<OpTy, Fn>>(*ctx);
}

} // namespace

void hpc::registerGradientModels(MLIRContext *ctx) {
  attach<NegOp, gradNeg>(ctx);
  attach<AbsOp, gradAbs>(ctx);
  attach<SignOp, zeroGradOf<SignOp>>(ctx);
  attach<ExpOp, gradExp>(ctx);
  attach<LogOp, gradLog>(ctx);
  attach<SqrtOp, gradSqrt>(ctx);
  attach<ReciprocalOp, gradReciprocal>(ctx);
  attach<ReluOp, gradRelu>(ctx);
  attach<SigmoidOp, gradSigmoid>(ctx);
  attach<TanhOp, gradTanh>(ctx);
  attach<ErfOp, gradErf>(ctx);
  attach<SinOp, gradSin>(ctx);
  attach<CosOp, gradCos>(ctx);
  attach<FloorOp, zeroGradOf<FloorOp>>(ctx);
  attach<CeilOp, zeroGradOf<CeilOp>>(ctx);
  attach<RoundOp, zeroGradOf<RoundOp>>(ctx);
  attach<SiluOp, gradSilu>(ctx);
  attach<SoftplusOp, gradSoftplus>(ctx);
  attach<HardSwishOp, gradHardSwish>(ctx);
  attach<GeluOp, gradGelu>(ctx);
  attach<LeakyReluOp, gradLeakyRelu>(ctx);
  attach<EluOp, gradElu>(ctx);
  attach<HardSigmoidOp, gradHardSigmoid>(ctx);
  attach<ClipOp, gradClip>(ctx);
  attach<CastOp, gradCast>(ctx);
  attach<AddOp, gradAdd>(ctx);
  attach<SubOp, gradSub>(ctx);
  attach<MulOp, gradMul>(ctx);
  attach<DivOp, gradDiv>(ctx);
  attach<PowOp, gradPow>(ctx);
  attach<MaxOp, gradMax>(ctx);
  attach<MinOp, gradMin>(ctx);
  attach<ModOp, gradMod>(ctx);
  attach<FModOp, gradFMod>(ctx);
  attach<WhereOp, gradWhere>(ctx);
  attach<MatMulOp, gradMatMul>(ctx);
  attach<GemmOp, gradGemm>(ctx);
  attach<ConvOp, gradConv>(ctx);
  attach<ConvTransposeOp, gradConvTranspose>(ctx);
  attach<MaxPoolOp, gradMaxPool>(ctx);
  attach<AvgPoolOp, gradAvgPool>(ctx);
  attach<GlobalAvgPoolOp, gradGlobalAvgPool>(ctx);
  attach<GlobalMaxPoolOp, gradGlobalMaxPool>(ctx);
  attach<SoftmaxOp, gradSoftmax>(ctx);
  attach<LogSoftmaxOp, gradLogSoftmax>(ctx);
  attach<LayerNormOp, gradLayerNorm>(ctx);
  attach<RMSNormOp, gradRMSNorm>(ctx);
  attach<BatchNormOp, gradBatchNorm>(ctx);
  attach<ReduceSumOp, gradReduce<ReduceSumOp>>(ctx);
  attach<ReduceMeanOp, gradReduce<ReduceMeanOp>>(ctx);
  attach<ReduceMaxOp, gradReduce<ReduceMaxOp>>(ctx);
  attach<ReduceMinOp, gradReduce<ReduceMinOp>>(ctx);
  attach<ReduceProdOp, gradReduce<ReduceProdOp>>(ctx);
  attach<GatherOp, gradGather>(ctx);
  attach<GatherElementsOp, gradGatherElements>(ctx);
  attach<ScatterElementsOp, gradScatterElements>(ctx);
  attach<TopKOp, gradTopK>(ctx);
  attach<MoEDispatchOp, gradMoEDispatch>(ctx);
  attach<MoEGatherOp, gradMoEGather>(ctx);
  attach<ReshapeOp, gradReshape>(ctx);
  attach<SqueezeOp, gradSqueeze>(ctx);
  attach<UnsqueezeOp, gradUnsqueeze>(ctx);
  attach<DropoutOp, gradDropout>(ctx);
  attach<TransposeOp, gradTranspose>(ctx);
  attach<ExpandOp, gradExpand>(ctx);
  attach<TileOp, gradTile>(ctx);
  attach<SliceOp, gradSlice>(ctx);
  attach<ConcatOp, gradConcat>(ctx);
  attach<SplitOp, gradSplit>(ctx);
  attach<PadOp, gradPad>(ctx);
}
