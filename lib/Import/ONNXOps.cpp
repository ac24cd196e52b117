//===- ONNXOps.cpp - one converter per ONNX op type -----------------------===//
//
// Each converter reads the current node's inputs and attributes, handles the
// opset differences of its op (attributes that became inputs, changed
// defaults, new attributes), and builds hpc ops. Inputs that hpc ops take as
// attributes (shapes, axes, pads, k) must be compile-time constants: shape
// subgraphs have folded away by then because every dimension is static.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace hpc;
using namespace hpc::detail;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Normalizes axes against a rank, sorted; fails on out-of-range or repeats.
FailureOr<SmallVector<int64_t>> normalizeAxes(Importer &im, ArrayRef<int64_t> axes,
                                              int64_t rank, StringRef what) {
  SmallVector<int64_t> out;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank)
      return im.fail(what + " " + Twine(a) + " is out of range for rank " +
                     Twine(rank));
    out.push_back(a < 0 ? a + rank : a);
  }
  llvm::sort(out);
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    return im.fail(what + " repeat an axis");
  return out;
}

#define TRY(decl, expr)                                                        \
  auto decl##OrErr = (expr);                                                   \
  if (failed(decl##OrErr))                                                     \
    return failure();                                                          \
  auto decl = std::move(*decl##OrErr);

LogicalResult finish(Importer &im, FailureOr<Value> v, int output = 0) {
  if (failed(v))
    return failure();
  im.setOutput(output, *v);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename OpTy>
LogicalResult unary(Importer &im) {
  TRY(x, im.input(0));
  return finish(im, im.create<OpTy>(x));
}

/// Before opset 7, binary ops broadcast only with broadcast=1, aligning the
/// right operand at `axis` instead of at the trailing dimensions; reshape it
/// so numpy broadcasting gives the same result.
FailureOr<Value> legacyBroadcast(Importer &im, Value lhs, Value rhs) {
  if (im.opset() >= 7 || !im.attrInt("broadcast", 0) || !im.attr("axis"))
    return rhs;
  int64_t lrank = typeOf(lhs).getRank(), rrank = typeOf(rhs).getRank();
  int64_t axis = im.attrInt("axis", 0);
  if (axis < 0)
    axis += lrank;
  int64_t trailing = lrank - axis - rrank;
  if (axis < 0 || trailing < 0)
    return im.fail("legacy broadcast axis " + Twine(axis) + " does not fit");
  SmallVector<int64_t> shape(typeOf(rhs).getShape());
  shape.append(trailing, 1);
  return im.create<hpc::ReshapeOp>(rhs, {im.i64Array("shape", shape)});
}

template <typename OpTy>
LogicalResult binary(Importer &im) {
  TRY(lhs, im.input(0));
  TRY(rhs0, im.input(1));
  TRY(rhs, legacyBroadcast(im, lhs, rhs0));
  return finish(im, im.create<OpTy>(ValueRange{lhs, rhs}));
}

LogicalResult forward(Importer &im) {
  TRY(x, im.input(0));
  im.setOutput(0, x);
  return success();
}

LogicalResult dropout(Importer &im) {
  bool training = im.opset() < 7 ? !im.attrInt("is_test", 0) : false;
  if (im.hasInput(2)) {
    auto c = im.constantInput(2);
    training = failed(c) || !*c || (*c).getValues<bool>()[0];
  }
  if (training)
    return im.fail("Dropout in training mode is not supported (it is random)");
  TRY(x, im.input(0));
  double ratio = im.opset() < 12 ? im.attrFloat("ratio", 0.5) : 0.5;
  if (im.hasInput(1)) {
    auto r = im.constantInput(1);
    if (failed(r))
      return im.fail("Dropout needs a constant ratio");
    ratio = (*r).getSplatValue<FloatAttr>() ? (*r).getSplatValue<FloatAttr>().getValueAsDouble()
                                            : ratio;
  }
  // The identity in inference; a train step in train mode draws its mask
  // (hpc-train-mode). Integer inputs have nothing to drop.
  if (isa<FloatType>(typeOf(x).getElementType())) {
    TRY(y, im.create<hpc::DropoutOp>(x, {im.f64("ratio", ratio)}));
    im.setOutput(0, y);
  } else {
    im.setOutput(0, x);
  }
  // In inference the mask keeps every element.
  if (im.hasOutput(1))
    im.setOutput(1, im.splat(im.builder().getI1Type(), typeOf(x).getShape(), 1));
  return success();
}

LogicalResult pow(Importer &im) {
  TRY(x, im.input(0));
  TRY(y, im.input(1));
  // Pow-12+ allows an exponent of another type; compute in the base's type.
  if (typeOf(y).getElementType() != typeOf(x).getElementType()) {
    TRY(cast, im.create<hpc::CastOp>(y, {im.named("to", TypeAttr::get(typeOf(x).getElementType()))}));
    y = cast;
  }
  return finish(im, im.create<hpc::PowOp>(ValueRange{x, y}));
}

LogicalResult mod(Importer &im) {
  if (im.attrBool("fmod", 0))
    return binary<hpc::FModOp>(im);
  return binary<hpc::ModOp>(im);
}

/// Sum, Max, Min, Mean: a chain of binary ops over all inputs.
template <typename OpTy, bool isMean = false>
LogicalResult variadic(Importer &im) {
  TRY(acc, im.input(0));
  int n = im.node().input_size();
  for (int i = 1; i < n; ++i) {
    TRY(next, im.input(i));
    TRY(r, im.create<OpTy>(ValueRange{acc, next}));
    acc = r;
  }
  if (isMean && n > 1) {
    Value count = im.splat(typeOf(acc).getElementType(), {}, double(n));
    TRY(r, im.create<hpc::DivOp>(ValueRange{acc, count}));
    acc = r;
  }
  im.setOutput(0, acc);
  return success();
}

LogicalResult gelu(Importer &im) {
  TRY(x, im.input(0));
  return finish(im, im.create<hpc::GeluOp>(
                        x, {im.str("approximate", im.attrString("approximate", "none"))}));
}

LogicalResult leakyRelu(Importer &im) {
  TRY(x, im.input(0));
  return finish(im, im.create<hpc::LeakyReluOp>(x, {im.f64("alpha", im.attrFloat("alpha", 0.01))}));
}

LogicalResult elu(Importer &im) {
  TRY(x, im.input(0));
  return finish(im, im.create<hpc::EluOp>(x, {im.f64("alpha", im.attrFloat("alpha", 1.0))}));
}

LogicalResult hardSigmoid(Importer &im) {
  TRY(x, im.input(0));
  return finish(im, im.create<hpc::HardSigmoidOp>(
                        x, {im.f64("alpha", im.attrFloat("alpha", 0.2)),
                            im.f64("beta", im.attrFloat("beta", 0.5))}));
}

LogicalResult prelu(Importer &im) {
  // x < 0 ? slope * x : x
  TRY(x, im.input(0));
  TRY(slope, im.input(1));
  // PRelu-6 applies a [C] slope per channel (dimension 1).
  if (im.opset() < 7 && typeOf(slope).getRank() == 1 && typeOf(x).getRank() > 2 &&
      typeOf(slope).getDimSize(0) == typeOf(x).getDimSize(1) &&
      typeOf(slope).getDimSize(0) != 1) {
    SmallVector<int64_t> shape{typeOf(slope).getDimSize(0)};
    shape.append(typeOf(x).getRank() - 2, 1);
    TRY(r, im.create<hpc::ReshapeOp>(slope, {im.i64Array("shape", shape)}));
    slope = r;
  }
  Value zero = im.splat(typeOf(x).getElementType(), {}, 0.0);
  TRY(neg, im.create<hpc::LessOp>(ValueRange{x, zero}));
  TRY(scaled, im.create<hpc::MulOp>(ValueRange{x, slope}));
  if (typeOf(scaled).getShape() != typeOf(x).getShape())
    return im.fail("slope must broadcast to the input's shape");
  return finish(im, im.create<hpc::WhereOp>(ValueRange{neg, scaled, x}));
}

LogicalResult clip(Importer &im) {
  TRY(x, im.input(0));
  SmallVector<NamedAttribute> attrs;
  if (im.opset() < 11) {
    if (im.attr("min"))
      attrs.push_back(im.f64("min", im.attrFloat("min", 0)));
    if (im.attr("max"))
      attrs.push_back(im.f64("max", im.attrFloat("max", 0)));
  } else {
    if (im.hasInput(1)) {
      TRY(lo, im.scalarInput(1, "Clip min"));
      attrs.push_back(im.f64("min", lo));
    }
    if (im.hasInput(2)) {
      TRY(hi, im.scalarInput(2, "Clip max"));
      attrs.push_back(im.f64("max", hi));
    }
  }
  return finish(im, im.create<hpc::ClipOp>(x, attrs));
}

LogicalResult castOp(Importer &im) {
  TRY(x, im.input(0));
  TRY(to, im.elementType(im.attrInt("to", 1), "Cast target"));
  return finish(im, im.create<hpc::CastOp>(x, {im.named("to", TypeAttr::get(to))}));
}

LogicalResult castLike(Importer &im) {
  TRY(x, im.input(0));
  TRY(like, im.input(1));
  return finish(im, im.create<hpc::CastOp>(
                        x, {im.named("to", TypeAttr::get(typeOf(like).getElementType()))}));
}

LogicalResult where(Importer &im) {
  TRY(c, im.input(0));
  TRY(x, im.input(1));
  TRY(y, im.input(2));
  return finish(im, im.create<hpc::WhereOp>(ValueRange{c, x, y}));
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult gemm(Importer &im) {
  TRY(a, im.input(0));
  TRY(b, im.input(1));
  SmallVector<Value> operands{a, b};
  TRY(c, im.optionalInput(2));
  if (c)
    operands.push_back(c);
  return finish(im, im.create<hpc::GemmOp>(
                        operands, {im.f64("alpha", im.attrFloat("alpha", 1.0)),
                                   im.f64("beta", im.attrFloat("beta", 1.0)),
                                   im.boolean("trans_a", im.attrBool("transA", 0)),
                                   im.boolean("trans_b", im.attrBool("transB", 0))}));
}

/// Window attributes of Conv/ConvTranspose/pooling with auto_pad resolved.
struct Window {
  SmallVector<int64_t> kernel, strides, pads, dilations;
};

/// Reads strides/dilations/pads and resolves auto_pad for a forward window
/// over `spatialIn` with `kernel`.
FailureOr<Window> readWindow(Importer &im, ArrayRef<int64_t> spatialIn,
                             ArrayRef<int64_t> kernel) {
  size_t n = spatialIn.size();
  Window w;
  w.kernel.assign(kernel.begin(), kernel.end());
  w.strides = im.attrInts("strides");
  w.dilations = im.attrInts("dilations");
  w.pads = im.attrInts("pads");
  // Defaults only for absent attributes: an empty list is of the wrong size.
  if (!im.attr("strides"))
    w.strides.assign(n, 1);
  if (!im.attr("dilations"))
    w.dilations.assign(n, 1);
  if (!im.attr("pads"))
    w.pads.assign(2 * n, 0);
  if (w.strides.size() != n || w.dilations.size() != n || w.pads.size() != 2 * n)
    return im.fail("strides, dilations and pads do not match the " + Twine(n) +
                   " spatial dimensions");
  std::string autoPad = im.attrString("auto_pad", "NOTSET");
  if (autoPad == "VALID")
    w.pads.assign(2 * n, 0);
  else if (autoPad != "NOTSET" && autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return im.fail("unknown auto_pad '" + autoPad + "'");
  // The window arithmetic (here and in the op's inference) in checked int64:
  // the span of the kernel, the padded size and the rounded-up output.
  for (size_t i = 0; i < n; ++i) {
    int64_t span, padded, numer, rounded;
    if (__builtin_mul_overflow(w.kernel[i] - 1, w.dilations[i], &span) ||
        __builtin_add_overflow(span, 1, &span) ||
        __builtin_add_overflow(spatialIn[i], w.pads[i], &padded) ||
        __builtin_add_overflow(padded, w.pads[i + n], &padded) ||
        __builtin_sub_overflow(padded, span, &numer) ||
        __builtin_add_overflow(std::max(numer, padded), w.strides[i], &rounded))
      return im.fail("the window of spatial dimension " + Twine(i) +
                     " overflows 64-bit sizes (kernel, dilations, pads)");
  }
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t out = (spatialIn[i] + w.strides[i] - 1) / w.strides[i];
      int64_t span = (w.kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total;
      if (__builtin_mul_overflow(out - 1, w.strides[i], &total) ||
          __builtin_add_overflow(total, span - spatialIn[i], &total))
        return im.fail("the window of spatial dimension " + Twine(i) +
                       " overflows 64-bit sizes (kernel, dilations, pads)");
      total = std::max<int64_t>(total, 0);
      int64_t small = total / 2, big = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : big;
      w.pads[i + n] = autoPad == "SAME_UPPER" ? big : small;
    }
  }
  return w;
}

LogicalResult conv(Importer &im) {
  TRY(x, im.input(0));
  TRY(wt, im.input(1));
  auto xt = typeOf(x), wtt = typeOf(wt);
  if (xt.getRank() < 3 || wtt.getRank() != xt.getRank())
    return im.fail("Conv needs [N, C, D...] input and weight of the same rank");
  SmallVector<int64_t> kernel(wtt.getShape().drop_front(2));
  if (auto k = im.attrInts("kernel_shape"); im.attr("kernel_shape") && ArrayRef(k) != ArrayRef(kernel))
    return im.fail("kernel_shape does not match the weight's shape");
  TRY(w, readWindow(im, xt.getShape().drop_front(2), kernel));
  SmallVector<Value> operands{x, wt};
  TRY(bias, im.optionalInput(2));
  if (bias)
    operands.push_back(bias);
  return finish(im, im.create<hpc::ConvOp>(
                        operands, {im.i64Array("strides", w.strides),
                                   im.i64Array("pads", w.pads),
                                   im.i64Array("dilations", w.dilations),
                                   im.i64("group", im.attrInt("group", 1)),
                                   hpc::convOperandSegments(im.builder(), bias != nullptr,
                                                            false)}));
}

LogicalResult convTranspose(Importer &im) {
  TRY(x, im.input(0));
  TRY(wt, im.input(1));
  auto xt = typeOf(x), wtt = typeOf(wt);
  if (xt.getRank() < 3 || wtt.getRank() != xt.getRank())
    return im.fail("ConvTranspose needs [N, C, D...] input and weight of the same rank");
  size_t n = xt.getRank() - 2;
  SmallVector<int64_t> kernel(wtt.getShape().drop_front(2));
  SmallVector<int64_t> strides = im.attrInts("strides"), dil = im.attrInts("dilations"),
                       pads = im.attrInts("pads"), outPad = im.attrInts("output_padding"),
                       outShape = im.attrInts("output_shape");
  // Defaults only for absent attributes: an empty list is of the wrong size.
  if (!im.attr("strides")) strides.assign(n, 1);
  if (!im.attr("dilations")) dil.assign(n, 1);
  if (!im.attr("pads")) pads.assign(2 * n, 0);
  if (!im.attr("output_padding")) outPad.assign(n, 0);
  if (strides.size() != n || dil.size() != n || pads.size() != 2 * n || outPad.size() != n)
    return im.fail("strides, dilations, pads and output_padding do not match the spatial rank");
  std::string autoPad = im.attrString("auto_pad", "NOTSET");
  if (outShape.size() > n)
    outShape.erase(outShape.begin(), outShape.begin() + (outShape.size() - n));
  if (!outShape.empty() && outShape.size() != n)
    return im.fail("output_shape needs one entry per spatial dimension");
  // The output-size arithmetic (here and in the op's inference) in checked
  // int64: stride * (in - 1) + output_padding + span, and in * stride.
  for (size_t i = 0; i < n; ++i) {
    int64_t in = xt.getDimSize(i + 2), span, full, target;
    if (__builtin_mul_overflow(kernel[i] - 1, dil[i], &span) ||
        __builtin_add_overflow(span, 1, &span) ||
        __builtin_mul_overflow(strides[i], in - 1, &full) ||
        __builtin_add_overflow(full, outPad[i], &full) ||
        __builtin_add_overflow(full, span, &full) ||
        __builtin_mul_overflow(in, strides[i], &target) ||
        (!outShape.empty() && __builtin_sub_overflow(full, outShape[i], &target)))
      return im.fail("the window of spatial dimension " + Twine(i) +
                     " overflows 64-bit sizes (kernel, dilations, strides, output_padding)");
  }
  if (!outShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t in = xt.getDimSize(i + 2);
      int64_t target = outShape.empty() ? in * strides[i] : outShape[i];
      int64_t total = strides[i] * (in - 1) + outPad[i] + (kernel[i] - 1) * dil[i] + 1 - target;
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); // floor
      bool upper = autoPad == "SAME_UPPER";
      pads[i] = upper ? half : total - half;
      pads[i + n] = upper ? total - half : half;
      // A negative end pad grows the output by zeros: that is output_padding.
      if (pads[i + n] < 0) {
        outPad[i] -= pads[i + n];
        pads[i + n] = 0;
      }
      if (pads[i] < 0)
        return im.fail("output_shape needs a negative begin pad, which is not supported");
    }
  } else if (autoPad == "VALID") {
    pads.assign(2 * n, 0);
  }
  SmallVector<Value> operands{x, wt};
  TRY(bias, im.optionalInput(2));
  if (bias)
    operands.push_back(bias);
  return finish(im, im.create<hpc::ConvTransposeOp>(
                        operands, {im.i64Array("strides", strides), im.i64Array("pads", pads),
                                   im.i64Array("dilations", dil),
                                   im.i64Array("output_padding", outPad),
                                   im.i64("group", im.attrInt("group", 1))}));
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

template <typename OpTy>
LogicalResult softmax(Importer &im) {
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  if (im.opset() >= 13)
    return finish(im, im.create<OpTy>(x, {im.i64("axis", im.attrInt("axis", -1))}));
  // Before opset 13 the input is coerced to 2-D at `axis` and normalized over
  // the whole trailing block.
  int64_t axis = im.attrInt("axis", 1);
  if (axis < -rank || axis > rank)
    return im.fail("axis " + Twine(axis) + " is out of range");
  if (axis < 0)
    axis += rank;
  if (axis == rank - 1)
    return finish(im, im.create<OpTy>(x, {im.i64("axis", rank - 1)}));
  int64_t outer = numElements(xt.getShape().take_front(axis));
  int64_t inner = numElements(xt.getShape().drop_front(axis));
  TRY(flat, im.create<hpc::ReshapeOp>(x, {im.i64Array("shape", {outer, inner})}));
  TRY(s, im.create<OpTy>(flat, {im.i64("axis", 1)}));
  return finish(im, im.create<hpc::ReshapeOp>(s, {im.i64Array("shape", xt.getShape())}));
}

/// The Mean and InvStdDev outputs of LayerNormalization, computed in f32 (the
/// default stash_type) over dimensions axis..rank-1 with keepdims.
LogicalResult layerNormStatistics(Importer &im, Value x, int64_t axis, double eps) {
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  if (axis < -rank || axis >= rank)
    return im.fail("axis " + Twine(axis) + " is out of range");
  if (axis < 0)
    axis += rank;
  Type f32 = im.builder().getF32Type();
  if (xt.getElementType() != f32) {
    TRY(c, im.create<hpc::CastOp>(x, {im.named("to", TypeAttr::get(f32))}));
    x = c;
  }
  SmallVector<int64_t> axes;
  for (int64_t d = axis; d < rank; ++d)
    axes.push_back(d);
  SmallVector<NamedAttribute> reduceAttrs{im.i64Array("axes", axes),
                                          im.boolean("keepdims", true)};
  TRY(mean, im.create<hpc::ReduceMeanOp>(x, reduceAttrs));
  TRY(centered, im.create<hpc::SubOp>(ValueRange{x, mean}));
  TRY(squared, im.create<hpc::MulOp>(ValueRange{centered, centered}));
  TRY(var, im.create<hpc::ReduceMeanOp>(squared, reduceAttrs));
  TRY(shifted, im.create<hpc::AddOp>(ValueRange{var, im.splat(f32, {}, eps)}));
  TRY(stddev, im.create<hpc::SqrtOp>(shifted));
  TRY(invStd, im.create<hpc::ReciprocalOp>(stddev));
  im.setOutput(1, mean);
  im.setOutput(2, invStd);
  return success();
}

LogicalResult layerNorm(Importer &im) {
  if (im.attrInt("stash_type", 1) != 1)
    return im.fail("LayerNormalization stash_type other than float is not supported");
  TRY(x, im.input(0));
  if ((im.hasOutput(1) || im.hasOutput(2)) &&
      failed(layerNormStatistics(im, x, im.attrInt("axis", -1),
                                 im.attrFloat("epsilon", 1e-5))))
    return failure();
  TRY(scale, im.input(1));
  SmallVector<Value> operands{x, scale};
  TRY(bias, im.optionalInput(2));
  if (bias)
    operands.push_back(bias);
  return finish(im, im.create<hpc::LayerNormOp>(
                        operands, {im.i64("axis", im.attrInt("axis", -1)),
                                   im.f64("epsilon", im.attrFloat("epsilon", 1e-5))}));
}

LogicalResult rmsNorm(Importer &im) {
  TRY(x, im.input(0));
  TRY(scale, im.input(1));
  return finish(im, im.create<hpc::RMSNormOp>(
                        ValueRange{x, scale}, {im.i64("axis", im.attrInt("axis", -1)),
                                               im.f64("epsilon", im.attrFloat("epsilon", 1e-5))}));
}

LogicalResult batchNorm(Importer &im) {
  if (im.hasOutput(1) || im.hasOutput(2) || im.hasOutput(3) || im.hasOutput(4) ||
      im.attrBool("training_mode", 0))
    return im.fail("BatchNormalization in training mode is not supported");
  if (im.opset() < 9 && !im.attrBool("spatial", 1))
    return im.fail("BatchNormalization with spatial=0 is not supported");
  SmallVector<Value> operands;
  for (int i = 0; i < 5; ++i) {
    TRY(v, im.input(i));
    operands.push_back(v);
  }
  SmallVector<NamedAttribute> attrs{im.f64("epsilon", im.attrFloat("epsilon", 1e-5))};
  // The running statistics' momentum matters only to a train step in train
  // mode; the default (0.9) is left implicit.
  if (double momentum = im.attrFloat("momentum", 0.9); momentum != 0.9)
    attrs.push_back(im.f64("momentum", momentum));
  return finish(im, im.create<hpc::BatchNormOp>(operands, attrs));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The axes a Reduce* node reduces; empty when it is a no-op (no axes with
/// noop_with_empty_axes, or a scalar input).
FailureOr<SmallVector<int64_t>> reductionAxes(Importer &im, int64_t rank) {
  // Axes moved from attribute to input in ReduceSum-13 and the others in 18.
  bool axesAsInput = im.node().op_type() == "ReduceSum" ? im.opset() >= 13
                                                        : im.opset() >= 18;
  SmallVector<int64_t> axes;
  if (axesAsInput) {
    if (im.hasInput(1)) {
      TRY(a, im.intsInput(1, "reduction axes"));
      axes = a;
    }
  } else {
    axes = im.attrInts("axes");
  }
  if (axes.empty()) {
    if (im.attrBool("noop_with_empty_axes", 0) || rank == 0)
      return SmallVector<int64_t>();
    axes.resize(rank);
    std::iota(axes.begin(), axes.end(), 0);
  }
  return normalizeAxes(im, axes, rank, "reduction axes");
}

/// Builds reduction OpTy of `x` over the node's axes (identity if none).
template <typename OpTy>
FailureOr<Value> reduceValue(Importer &im, Value x) {
  TRY(axes, reductionAxes(im, typeOf(x).getRank()));
  if (axes.empty())
    return x;
  return im.create<OpTy>(x, {im.i64Array("axes", axes),
                             im.boolean("keepdims", im.attrBool("keepdims", 1))});
}

template <typename OpTy>
LogicalResult reduce(Importer &im) {
  TRY(x, im.input(0));
  return finish(im, reduceValue<OpTy>(im, x));
}

/// ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp as
/// elementwise ops around a sum.
LogicalResult reduceComposite(Importer &im) {
  TRY(x, im.input(0));
  StringRef op = im.node().op_type();
  if (op == "ReduceLogSumExp") {
    // log(sum(exp(x - max))) + max, stable for large x.
    TRY(axes, reductionAxes(im, typeOf(x).getRank()));
    if (axes.empty())
      return forward(im);
    TRY(mx, im.create<hpc::ReduceMaxOp>(x, {im.i64Array("axes", axes), im.boolean("keepdims", true)}));
    TRY(shifted, im.create<hpc::SubOp>(ValueRange{x, mx}));
    TRY(e, im.create<hpc::ExpOp>(shifted));
    TRY(sum, im.create<hpc::ReduceSumOp>(e, {im.i64Array("axes", axes), im.boolean("keepdims", true)}));
    TRY(lg, im.create<hpc::LogOp>(sum));
    TRY(r, im.create<hpc::AddOp>(ValueRange{lg, mx}));
    if (im.attrBool("keepdims", 1))
      return finish(im, r);
    return finish(im, im.create<hpc::SqueezeOp>(r, {im.i64Array("axes", axes)}));
  }
  Value in = x;
  if (op == "ReduceSumSquare" || op == "ReduceL2") {
    TRY(sq, im.create<hpc::MulOp>(ValueRange{x, x}));
    in = sq;
  } else if (op == "ReduceL1") {
    TRY(a, im.create<hpc::AbsOp>(x));
    in = a;
  }
  TRY(sum, reduceValue<hpc::ReduceSumOp>(im, in));
  if (op == "ReduceL2")
    return finish(im, im.create<hpc::SqrtOp>(sum));
  if (op == "ReduceLogSum")
    return finish(im, im.create<hpc::LogOp>(sum));
  return finish(im, sum);
}

template <typename OpTy>
LogicalResult argReduce(Importer &im) {
  TRY(x, im.input(0));
  return finish(im, im.create<OpTy>(
                        x, {im.i64("axis", im.attrInt("axis", 0)),
                            im.boolean("keepdims", im.attrBool("keepdims", 1)),
                            im.boolean("select_last_index", im.attrBool("select_last_index", 0))}));
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

LogicalResult gather(Importer &im) {
  TRY(x, im.input(0));
  TRY(idx, im.input(1));
  int64_t axis = im.attrInt("axis", 0);
  int64_t rank = typeOf(x).getRank();
  if (axis < -rank || axis >= rank)
    return im.fail("axis " + Twine(axis) + " is out of range for rank " + Twine(rank));
  // Constant indices are checked now rather than at run time.
  auto constIdx = im.constantInput(1);
  if (failed(constIdx))
    return failure();
  if (*constIdx) {
    int64_t dim = typeOf(x).getDimSize(axis < 0 ? axis + rank : axis);
    for (const APInt &v : constIdx->getValues<APInt>())
      if (v.getSExtValue() < -dim || v.getSExtValue() >= dim)
        return im.fail("index " + Twine(v.getSExtValue()) +
                       " is out of range for a dimension of size " + Twine(dim));
  }
  return finish(im, im.create<hpc::GatherOp>(ValueRange{x, idx}, {im.i64("axis", axis)}));
}

LogicalResult gatherElements(Importer &im) {
  TRY(x, im.input(0));
  TRY(idx, im.input(1));
  return finish(im, im.create<hpc::GatherElementsOp>(ValueRange{x, idx},
                                                     {im.i64("axis", im.attrInt("axis", 0))}));
}

LogicalResult scatterElements(Importer &im) {
  TRY(x, im.input(0));
  TRY(idx, im.input(1));
  TRY(upd, im.input(2));
  return finish(im, im.create<hpc::ScatterElementsOp>(
                        ValueRange{x, idx, upd},
                        {im.i64("axis", im.attrInt("axis", 0)),
                         im.str("reduction", im.attrString("reduction", "none"))}));
}

LogicalResult oneHot(Importer &im) {
  TRY(idx, im.input(0));
  TRY(depth, im.scalarInput(1, "OneHot depth"));
  if (depth < 1)
    return im.fail("OneHot depth must be positive, got " + Twine(int64_t(depth)));
  TRY(vals, im.input(2));
  return finish(im, im.create<hpc::OneHotOp>(
                        ValueRange{idx, vals},
                        {im.i64("depth", int64_t(depth)), im.i64("axis", im.attrInt("axis", -1))}));
}

LogicalResult topK(Importer &im) {
  TRY(x, im.input(0));
  int64_t k;
  if (im.opset() < 10) {
    k = im.attrInt("k", -1);
  } else {
    TRY(kv, im.intsInput(1, "TopK k"));
    if (kv.size() != 1)
      return im.fail("TopK k must hold one value");
    k = kv[0];
  }
  auto results = im.createMulti<hpc::TopKOp>(
      x, {im.i64("k", k), im.i64("axis", im.attrInt("axis", -1)),
          im.boolean("largest", im.attrBool("largest", 1)),
          im.boolean("sorted", im.attrBool("sorted", 1))});
  if (failed(results))
    return failure();
  im.setOutput(0, (*results)[0]);
  im.setOutput(1, (*results)[1]);
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult reshapeTo(Importer &im, Value x, ArrayRef<int64_t> shape) {
  return finish(im, im.create<hpc::ReshapeOp>(x, {im.i64Array("shape", shape)}));
}

LogicalResult reshape(Importer &im) {
  TRY(x, im.input(0));
  SmallVector<int64_t> shape;
  if (im.opset() < 5) {
    shape = im.attrInts("shape");
  } else {
    TRY(s, im.intsInput(1, "Reshape shape"));
    shape = s;
  }
  auto xt = typeOf(x);
  bool allowZero = im.attrInt("allowzero", 0);
  int64_t known = 1, inferAt = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowZero) {
      if (int64_t(i) >= xt.getRank())
        return im.fail("Reshape copies dimension " + Twine(i) + " that the input lacks");
      shape[i] = xt.getDimSize(i);
    }
    if (shape[i] == -1) {
      if (inferAt >= 0)
        return im.fail("Reshape shape has more than one -1");
      inferAt = i;
      continue;
    }
    if (shape[i] < 0)
      return im.fail("Reshape shape has a negative dimension " + Twine(shape[i]));
    if (llvm::MulOverflow(known, shape[i], known))
      return im.fail("Reshape shape has more than 2^63 elements");
  }
  int64_t total = xt.getNumElements();
  if (inferAt >= 0) {
    if (known == 0 || total % known != 0)
      return im.fail("cannot infer the -1 dimension of the Reshape target");
    shape[inferAt] = total / known;
  }
  return reshapeTo(im, x, shape);
}

LogicalResult flatten(Importer &im) {
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  int64_t axis = im.attrInt("axis", 1);
  if (axis < -xt.getRank() || axis > xt.getRank())
    return im.fail("axis " + Twine(axis) + " is out of range");
  if (axis < 0)
    axis += xt.getRank();
  return reshapeTo(im, x, {numElements(xt.getShape().take_front(axis)),
                           numElements(xt.getShape().drop_front(axis))});
}

LogicalResult transpose(Importer &im) {
  TRY(x, im.input(0));
  SmallVector<int64_t> perm = im.attrInts("perm");
  if (!im.attr("perm"))
    for (int64_t i = typeOf(x).getRank() - 1; i >= 0; --i)
      perm.push_back(i);
  return finish(im, im.create<hpc::TransposeOp>(x, {im.i64Array("perm", perm)}));
}

LogicalResult slice(Importer &im) {
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (im.opset() < 10) {
    starts = im.attrInts("starts");
    ends = im.attrInts("ends");
    axes = im.attrInts("axes");
  } else {
    TRY(s, im.intsInput(1, "Slice starts"));
    TRY(e, im.intsInput(2, "Slice ends"));
    starts = s;
    ends = e;
    if (im.hasInput(3)) {
      TRY(a, im.intsInput(3, "Slice axes"));
      axes = a;
    }
    if (im.hasInput(4)) {
      TRY(st, im.intsInput(4, "Slice steps"));
      steps = st;
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return im.fail("Slice starts, ends, axes and steps differ in length");
  SmallVector<int64_t> fs(rank, 0), fe(xt.getShape()), fst(rank, 1);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = axes[i];
    if (a < -rank || a >= rank)
      return im.fail("Slice axis " + Twine(a) + " is out of range");
    if (a < 0)
      a += rank;
    if (seen[a])
      return im.fail("Slice axes repeat an axis");
    seen[a] = true;
    int64_t dim = xt.getDimSize(a), step = steps[i];
    if (step == 0)
      return im.fail("Slice step must not be 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s = s < -dim ? (step > 0 ? 0 : -1) : s + dim;
    if (e < 0) e = e < -dim ? -1 : e + dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    fs[a] = s;
    fe[a] = e;
    fst[a] = step;
  }
  return finish(im, im.create<hpc::SliceOp>(x, {im.i64Array("starts", fs),
                                                im.i64Array("ends", fe),
                                                im.i64Array("steps", fst)}));
}

LogicalResult concat(Importer &im) {
  SmallVector<Value> inputs;
  for (int i = 0; i < im.node().input_size(); ++i) {
    if (!im.hasInput(i))
      continue;
    TRY(v, im.input(i));
    // Empty inputs contribute nothing (exporters emit them for optional parts).
    if (typeOf(v).getNumElements() == 0 && im.node().input_size() > 1)
      continue;
    inputs.push_back(v);
  }
  if (inputs.empty()) {
    TRY(v, im.input(0));
    inputs.push_back(v);
  }
  // Concat-1..3 defaulted to axis 1.
  int64_t axis = im.attrInt("axis", im.opset() < 4 ? 1 : 0);
  return finish(im, im.create<hpc::ConcatOp>(inputs, {im.i64("axis", axis)}));
}

LogicalResult split(Importer &im) {
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  int64_t axis = im.attrInt("axis", 0);
  if (axis < -xt.getRank() || axis >= xt.getRank())
    return im.fail("axis " + Twine(axis) + " is out of range");
  if (axis < 0)
    axis += xt.getRank();
  int64_t dim = xt.getDimSize(axis);
  SmallVector<int64_t> sizes;
  if (im.opset() < 13) {
    sizes = im.attrInts("split");
  } else if (im.hasInput(1)) {
    TRY(s, im.intsInput(1, "Split sizes"));
    sizes = s;
  }
  if (sizes.empty()) {
    int64_t n = im.attr("num_outputs") ? im.attrInt("num_outputs", 1)
                                       : im.node().output_size();
    if (n <= 0)
      return im.fail("Split needs at least one output");
    if (n != im.node().output_size())
      return im.fail("Split gives " + Twine(n) + " sizes for " +
                     Twine(im.node().output_size()) + " outputs");
    int64_t chunk = im.attr("num_outputs") ? (dim + n - 1) / n : dim / n;
    if (!im.attr("num_outputs") && dim % n != 0)
      return im.fail("dimension " + Twine(dim) + " does not split evenly into " +
                     Twine(n) + " outputs");
    for (int64_t i = 0; i < n; ++i)
      sizes.push_back(std::min(chunk, dim - chunk * i));
  }
  if (int64_t(sizes.size()) != im.node().output_size())
    return im.fail("Split gives " + Twine(sizes.size()) + " sizes for " +
                   Twine(im.node().output_size()) + " outputs");
  // Summed here in checked arithmetic, so the op's own sum cannot wrap.
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      return im.fail("split size " + Twine(s) + " is negative");
    if (__builtin_add_overflow(total, s, &total) || total > dim)
      return im.fail("split sizes add up to more than the dimension's size " + Twine(dim));
  }
  auto results = im.createMulti<hpc::SplitOp>(
      x, {im.i64("axis", axis), im.i64Array("sizes", sizes)});
  if (failed(results))
    return failure();
  for (size_t i = 0; i < results->size(); ++i)
    im.setOutput(i, (*results)[i]);
  return success();
}

LogicalResult expand(Importer &im) {
  TRY(x, im.input(0));
  TRY(shape, im.intsInput(1, "Expand shape"));
  return finish(im, im.create<hpc::ExpandOp>(x, {im.i64Array("shape", shape)}));
}

LogicalResult tile(Importer &im) {
  TRY(x, im.input(0));
  TRY(repeats, im.intsInput(1, "Tile repeats"));
  return finish(im, im.create<hpc::TileOp>(x, {im.i64Array("repeats", repeats)}));
}

LogicalResult squeeze(Importer &im) {
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  SmallVector<int64_t> axes;
  if (im.opset() < 13) {
    axes = im.attrInts("axes");
  } else if (im.hasInput(1)) {
    TRY(a, im.intsInput(1, "Squeeze axes"));
    axes = a;
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < xt.getRank(); ++d)
      if (xt.getDimSize(d) == 1)
        axes.push_back(d);
  }
  TRY(norm, normalizeAxes(im, axes, xt.getRank(), "Squeeze axes"));
  return finish(im, im.create<hpc::SqueezeOp>(x, {im.i64Array("axes", norm)}));
}

LogicalResult unsqueeze(Importer &im) {
  TRY(x, im.input(0));
  SmallVector<int64_t> axes;
  if (im.opset() < 13) {
    axes = im.attrInts("axes");
  } else {
    TRY(a, im.intsInput(1, "Unsqueeze axes"));
    axes = a;
  }
  int64_t outRank = typeOf(x).getRank() + axes.size();
  TRY(norm, normalizeAxes(im, axes, outRank, "Unsqueeze axes"));
  return finish(im, im.create<hpc::UnsqueezeOp>(x, {im.i64Array("axes", norm)}));
}

LogicalResult pad(Importer &im) {
  TRY(x, im.input(0));
  int64_t rank = typeOf(x).getRank();
  std::string mode = im.attrString("mode", "constant");
  if (mode == "wrap")
    return im.fail("Pad mode 'wrap' is not supported");
  SmallVector<int64_t> pads;
  double value = 0;
  if (im.opset() < 11) {
    pads = im.attrInts(im.opset() < 2 ? "paddings" : "pads");
    value = im.attrFloat("value", 0.0);
  } else {
    TRY(p, im.intsInput(1, "Pad pads"));
    pads = p;
    if (im.hasInput(2)) {
      TRY(v, im.scalarInput(2, "Pad constant_value"));
      value = v;
    }
    if (im.hasInput(3)) {
      TRY(axes, im.intsInput(3, "Pad axes"));
      TRY(norm, normalizeAxes(im, axes, rank, "Pad axes"));
      if (pads.size() != 2 * axes.size())
        return im.fail("Pad pads need two entries per listed axis");
      SmallVector<int64_t> full(2 * rank, 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
        full[a] = pads[i];
        full[a + rank] = pads[i + axes.size()];
      }
      pads = full;
    }
  }
  return finish(im, im.create<hpc::PadOp>(x, {im.i64Array("pads", pads), im.str("mode", mode),
                                              im.f64("value", value)}));
}

//===----------------------------------------------------------------------===//
// Pooling and resizing
//===----------------------------------------------------------------------===//

template <typename OpTy>
LogicalResult pool(Importer &im) {
  if (im.hasOutput(1))
    return im.fail("the Indices output of MaxPool is not supported");
  if (im.attrBool("storage_order", 0))
    return im.fail("MaxPool storage_order=1 is not supported");
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  if (xt.getRank() < 3)
    return im.fail("pooling needs an [N, C, D...] input");
  SmallVector<int64_t> kernel = im.attrInts("kernel_shape");
  if (int64_t(kernel.size()) != xt.getRank() - 2)
    return im.fail("kernel_shape needs one entry per spatial dimension");
  TRY(w, readWindow(im, xt.getShape().drop_front(2), kernel));
  SmallVector<NamedAttribute> attrs{
      im.i64Array("kernel_shape", w.kernel), im.i64Array("strides", w.strides),
      im.i64Array("pads", w.pads), im.i64Array("dilations", w.dilations),
      im.boolean("ceil_mode", im.attrBool("ceil_mode", 0))};
  if (std::is_same_v<OpTy, hpc::AvgPoolOp>)
    attrs.push_back(im.boolean("count_include_pad", im.attrBool("count_include_pad", 0)));
  return finish(im, im.create<OpTy>(x, attrs));
}

template <typename OpTy>
LogicalResult globalPool(Importer &im) {
  TRY(x, im.input(0));
  return finish(im, im.create<OpTy>(x));
}

LogicalResult resizeWith(Importer &im, Value x, ArrayRef<double> scalesIn,
                         ArrayRef<int64_t> sizesIn, StringRef mode,
                         StringRef coordMode, StringRef nearestMode) {
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  SmallVector<int64_t> sizes;
  SmallVector<double> scales;
  if (!sizesIn.empty()) {
    if (int64_t(sizesIn.size()) != rank)
      return im.fail("Resize sizes need one entry per dimension");
    sizes.assign(sizesIn.begin(), sizesIn.end());
    for (int64_t d = 0; d < rank; ++d)
      scales.push_back(double(sizes[d]) / double(xt.getDimSize(d)));
  } else {
    if (int64_t(scalesIn.size()) != rank)
      return im.fail("Resize needs constant scales or sizes with one entry per dimension");
    scales.assign(scalesIn.begin(), scalesIn.end());
    for (int64_t d = 0; d < rank; ++d)
      sizes.push_back(int64_t(std::floor(double(xt.getDimSize(d)) * scales[d])));
  }
  return finish(im, im.create<hpc::ResizeOp>(
                        x, {im.i64Array("sizes", sizes),
                            im.named("scales", im.builder().getDenseF64ArrayAttr(scales)),
                            im.str("mode", mode), im.str("coordinate_transformation_mode", coordMode),
                            im.str("nearest_mode", nearestMode)}));
}

FailureOr<SmallVector<double>> floatsInput(Importer &im, int i, StringRef what) {
  auto c = im.constantInput(i);
  if (failed(c))
    return failure();
  SmallVector<double> out;
  if (!*c)
    return out;
  if (!isa<FloatType>(c->getElementType()))
    return im.fail(what + " must be floating point");
  for (const APFloat &f : c->getValues<APFloat>())
    out.push_back(f.convertToDouble());
  return out;
}

LogicalResult resize(Importer &im) {
  TRY(x, im.input(0));
  std::string mode = im.attrString("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return im.fail("Resize mode '" + mode + "' is not supported (nearest and linear are)");
  if (im.attrBool("antialias", 0))
    return im.fail("Resize with antialias is not supported");
  if (im.opset() < 11) {
    TRY(scales, floatsInput(im, 1, "Resize scales"));
    return resizeWith(im, x, scales, {}, mode, "asymmetric", "floor");
  }
  std::string coord = im.attrString("coordinate_transformation_mode", "half_pixel");
  if (coord == "tf_crop_and_resize")
    return im.fail("Resize coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  std::string policy = im.attrString("keep_aspect_ratio_policy", "stretch");
  SmallVector<double> scales;
  SmallVector<int64_t> sizes;
  if (im.hasInput(2)) {
    TRY(s, floatsInput(im, 2, "Resize scales"));
    scales = s;
    if (!scales.empty() && !im.constantInput(2).value())
      return im.fail("Resize scales must be a compile-time constant");
  }
  if (im.hasInput(3)) {
    TRY(s, im.intsInput(3, "Resize sizes"));
    sizes = s;
  }
  if (scales.empty() && sizes.empty())
    return im.fail("Resize needs constant scales or sizes");
  // Resize-18 may list only some axes; the rest keep their size.
  int64_t rank = typeOf(x).getRank();
  SmallVector<int64_t> axes = im.attrInts("axes");
  if (!axes.empty()) {
    TRY(norm, normalizeAxes(im, axes, rank, "Resize axes"));
    SmallVector<double> fullScales(rank, 1.0);
    SmallVector<int64_t> fullSizes(typeOf(x).getShape());
    for (size_t i = 0; i < norm.size(); ++i) {
      if (!scales.empty()) fullScales[norm[i]] = scales[i];
      if (!sizes.empty()) fullSizes[norm[i]] = sizes[i];
    }
    if (!scales.empty()) scales = fullScales;
    if (!sizes.empty()) sizes = fullSizes;
    axes = norm;
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (!sizes.empty() && policy != "stretch") {
    double scale = policy == "not_larger" ? INFINITY : 0;
    for (int64_t a : axes) {
      double s = double(sizes[a]) / double(typeOf(x).getDimSize(a));
      scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
    }
    for (int64_t a : axes)
      sizes[a] = int64_t(std::round(scale * double(typeOf(x).getDimSize(a))));
  }
  return resizeWith(im, x, scales, sizes, mode, coord,
                    im.attrString("nearest_mode", "round_prefer_floor"));
}

LogicalResult upsample(Importer &im) {
  TRY(x, im.input(0));
  std::string mode = im.attrString("mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return im.fail("Upsample mode '" + mode + "' is not supported");
  SmallVector<double> scales;
  if (im.opset() < 9) {
    if (const auto *a = im.attr("scales"))
      scales.assign(a->floats().begin(), a->floats().end());
  } else {
    TRY(s, floatsInput(im, 1, "Upsample scales"));
    scales = s;
  }
  return resizeWith(im, x, scales, {}, mode, "asymmetric", "floor");
}

//===----------------------------------------------------------------------===//
// Constants and shape queries
//===----------------------------------------------------------------------===//

LogicalResult constant(Importer &im) {
  auto &b = im.builder();
  const auto &n = im.node();
  if (n.attribute_size() != 1)
    return im.fail("Constant needs exactly one value attribute");
  const auto &a = n.attribute(0);
  Value v;
  if (a.name() == "value") {
    onnx::TensorProto t = a.t();
    if (t.name().empty())
      t.set_name(n.output(0));
    auto c = im.constantValueOf(t);
    if (failed(c))
      return failure();
    v = *c;
  } else if (a.name() == "value_float") {
    v = im.splat(b.getF32Type(), {}, a.f());
  } else if (a.name() == "value_int") {
    v = im.i64Constant({a.i()}, {});
  } else if (a.name() == "value_floats") {
    SmallVector<float> f(a.floats().begin(), a.floats().end());
    auto type = RankedTensorType::get({int64_t(f.size())}, b.getF32Type());
    v = hpc::ConstantOp::create(b, im.loc(), DenseElementsAttr::get(type, ArrayRef<float>(f)));
  } else if (a.name() == "value_ints") {
    SmallVector<int64_t> i(a.ints().begin(), a.ints().end());
    v = im.i64Constant(i, {int64_t(i.size())});
  } else {
    return im.fail("Constant with attribute '" + a.name() + "' is not supported");
  }
  im.setOutput(0, v);
  return success();
}

LogicalResult constantOfShape(Importer &im) {
  TRY(shape, im.intsInput(0, "ConstantOfShape shape"));
  for (int64_t d : shape)
    if (d < 0)
      return im.fail("ConstantOfShape shape has a negative dimension " + Twine(d));
  Type elt = im.builder().getF32Type();
  double value = 0;
  if (const auto *a = im.attr("value")) {
    onnx::TensorProto t = a->t();
    auto c = im.constantValueOf(t);
    if (failed(c))
      return failure();
    auto attr = cast<DenseElementsAttr>(c->getDefiningOp<hpc::ConstantOp>().getValue());
    elt = attr.getElementType();
    if (attr.getNumElements() != 1)
      return im.fail("ConstantOfShape value must hold one element");
    value = isa<FloatType>(elt) ? (*attr.getValues<APFloat>().begin()).convertToDouble()
                                : double((*attr.getValues<APInt>().begin()).getSExtValue());
  }
  im.setOutput(0, im.splat(elt, shape, value));
  return success();
}

LogicalResult range(Importer &im) {
  for (int i = 0; i < 3; ++i) {
    TRY(v, im.input(i));
    if (typeOf(v).getRank() != 0)
      return im.fail("Range input '" + im.node().input(i) + "' must be a scalar (rank 0)");
  }
  TRY(start, im.scalarInput(0, "Range start"));
  TRY(limit, im.scalarInput(1, "Range limit"));
  TRY(delta, im.scalarInput(2, "Range delta"));
  TRY(x, im.input(0));
  Type elt = typeOf(x).getElementType();
  if (delta == 0)
    return im.fail("Range delta must not be 0");
  double count = std::ceil((limit - start) / delta);
  if (count > double(1 << 24))
    return im.fail("Range of " + Twine(int64_t(count)) +
                   " elements is too large to build as a constant");
  int64_t n = std::max<int64_t>(int64_t(count), 0);
  auto type = RankedTensorType::get({n}, elt);
  SmallVector<Attribute> elems;
  for (int64_t i = 0; i < n; ++i) {
    double v = start + double(i) * delta;
    elems.push_back(isa<FloatType>(elt) ? Attribute(im.builder().getFloatAttr(elt, v))
                                        : Attribute(im.builder().getIntegerAttr(elt, int64_t(v))));
  }
  im.setOutput(0, hpc::ConstantOp::create(im.builder(), im.loc(),
                                          DenseElementsAttr::get(type, elems)));
  return success();
}

LogicalResult shape(Importer &im) {
  TRY(x, im.input(0));
  ArrayRef<int64_t> dims = typeOf(x).getShape();
  int64_t rank = dims.size();
  int64_t start = im.attrInt("start", 0), end = im.attrInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  SmallVector<int64_t> v(dims.begin() + start, dims.begin() + end);
  im.setOutput(0, im.i64Constant(v, {int64_t(v.size())}));
  return success();
}

LogicalResult size(Importer &im) {
  TRY(x, im.input(0));
  im.setOutput(0, im.i64Constant({typeOf(x).getNumElements()}, {}));
  return success();
}

//===----------------------------------------------------------------------===//
// Decompositions into hpc ops
//===----------------------------------------------------------------------===//

LogicalResult selu(Importer &im) {
  TRY(x, im.input(0));
  TRY(e, im.create<hpc::EluOp>(x, {im.f64("alpha", im.attrFloat("alpha", 1.67326319217681884765625))}));
  Value gamma = im.splat(typeOf(x).getElementType(), {},
                         im.attrFloat("gamma", 1.05070102214813232421875));
  return finish(im, im.create<hpc::MulOp>(ValueRange{e, gamma}));
}

LogicalResult thresholdedRelu(Importer &im) {
  TRY(x, im.input(0));
  Type elt = typeOf(x).getElementType();
  TRY(keep, im.create<hpc::GreaterOp>(ValueRange{x, im.splat(elt, {}, im.attrFloat("alpha", 1.0))}));
  return finish(im, im.create<hpc::WhereOp>(ValueRange{keep, x, im.splat(elt, {}, 0)}));
}

LogicalResult shrink(Importer &im) {
  // x < -lambd ? x + bias : (x > lambd ? x - bias : 0)
  TRY(x, im.input(0));
  Type elt = typeOf(x).getElementType();
  double lambd = im.attrFloat("lambd", 0.5), bias = im.attrFloat("bias", 0.0);
  TRY(low, im.create<hpc::LessOp>(ValueRange{x, im.splat(elt, {}, -lambd)}));
  TRY(high, im.create<hpc::GreaterOp>(ValueRange{x, im.splat(elt, {}, lambd)}));
  TRY(plus, im.create<hpc::AddOp>(ValueRange{x, im.splat(elt, {}, bias)}));
  TRY(minus, im.create<hpc::SubOp>(ValueRange{x, im.splat(elt, {}, bias)}));
  TRY(inner, im.create<hpc::WhereOp>(ValueRange{high, minus, im.splat(elt, {}, 0)}));
  return finish(im, im.create<hpc::WhereOp>(ValueRange{low, plus, inner}));
}

LogicalResult hardmax(Importer &im) {
  // one_hot(argmax(x)) along the axis; before opset 13 over the coerced 2-D
  // view, like Softmax.
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  int64_t axis = im.attrInt("axis", im.opset() >= 13 ? -1 : 1);
  if (axis < -rank || axis >= rank)
    return im.fail("axis " + Twine(axis) + " is out of range");
  if (axis < 0)
    axis += rank;
  Value in = x;
  if (im.opset() < 13 && axis != rank - 1) {
    TRY(flat, im.create<hpc::ReshapeOp>(
                  x, {im.i64Array("shape", {numElements(xt.getShape().take_front(axis)),
                                            numElements(xt.getShape().drop_front(axis))})}));
    in = flat;
    axis = 1;
  }
  int64_t depth = typeOf(in).getDimSize(axis);
  TRY(idx, im.create<hpc::ArgMaxOp>(in, {im.i64("axis", axis), im.boolean("keepdims", false)}));
  Type elt = xt.getElementType();
  auto valuesType = RankedTensorType::get({2}, elt);
  Value values = hpc::ConstantOp::create(
      im.builder(), im.loc(),
      DenseElementsAttr::get(valuesType,
                             ArrayRef<Attribute>{im.builder().getFloatAttr(elt, 0.0),
                                                 im.builder().getFloatAttr(elt, 1.0)}));
  TRY(hot, im.create<hpc::OneHotOp>(ValueRange{idx, values},
                                    {im.i64("depth", depth), im.i64("axis", axis)}));
  if (typeOf(hot).getShape() == xt.getShape())
    return finish(im, hot);
  return finish(im, im.create<hpc::ReshapeOp>(hot, {im.i64Array("shape", xt.getShape())}));
}

LogicalResult trilu(Importer &im) {
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  if (xt.getRank() < 2)
    return im.fail("Trilu needs an input of rank >= 2");
  int64_t k = 0;
  if (im.hasInput(1)) {
    TRY(kv, im.intsInput(1, "Trilu k"));
    if (kv.size() != 1)
      return im.fail("Trilu k must hold one value");
    k = kv[0];
  }
  bool upper = im.attrBool("upper", 1);
  int64_t rows = xt.getDimSize(xt.getRank() - 2), cols = xt.getShape().back();
  SmallVector<bool> keep;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      keep.push_back(upper ? j - i >= k : j - i <= k);
  auto maskType = RankedTensorType::get({rows, cols}, im.builder().getI1Type());
  Value mask = hpc::ConstantOp::create(im.builder(), im.loc(),
                                       DenseElementsAttr::get(maskType, keep));
  Value zero = im.splat(xt.getElementType(), {}, 0);
  return finish(im, im.create<hpc::WhereOp>(ValueRange{mask, x, zero}));
}

LogicalResult instanceNorm(Importer &im) {
  // (x - mean) / sqrt(var + eps) * scale + bias, statistics per (n, c).
  TRY(x, im.input(0));
  TRY(scale, im.input(1));
  TRY(bias, im.input(2));
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  if (rank < 3)
    return im.fail("InstanceNormalization needs an [N, C, D...] input");
  SmallVector<int64_t> axes;
  for (int64_t d = 2; d < rank; ++d)
    axes.push_back(d);
  SmallVector<NamedAttribute> attrs{im.i64Array("axes", axes), im.boolean("keepdims", true)};
  Type elt = xt.getElementType();
  TRY(mean, im.create<hpc::ReduceMeanOp>(x, attrs));
  TRY(centered, im.create<hpc::SubOp>(ValueRange{x, mean}));
  TRY(sq, im.create<hpc::MulOp>(ValueRange{centered, centered}));
  TRY(var, im.create<hpc::ReduceMeanOp>(sq, attrs));
  TRY(shifted, im.create<hpc::AddOp>(ValueRange{var, im.splat(elt, {}, im.attrFloat("epsilon", 1e-5))}));
  TRY(stddev, im.create<hpc::SqrtOp>(shifted));
  TRY(normed, im.create<hpc::DivOp>(ValueRange{centered, stddev}));
  SmallVector<int64_t> perChannel{xt.getDimSize(1)};
  perChannel.append(rank - 2, 1);
  TRY(s, im.create<hpc::ReshapeOp>(scale, {im.i64Array("shape", perChannel)}));
  TRY(b, im.create<hpc::ReshapeOp>(bias, {im.i64Array("shape", perChannel)}));
  TRY(scaled, im.create<hpc::MulOp>(ValueRange{normed, s}));
  return finish(im, im.create<hpc::AddOp>(ValueRange{scaled, b}));
}

/// Reshape, transpose, reshape: the shape of DepthToSpace and SpaceToDepth.
LogicalResult shuffle(Importer &im, Value x, ArrayRef<int64_t> split,
                      ArrayRef<int64_t> perm, ArrayRef<int64_t> out) {
  TRY(a, im.create<hpc::ReshapeOp>(x, {im.i64Array("shape", split)}));
  TRY(t, im.create<hpc::TransposeOp>(a, {im.i64Array("perm", perm)}));
  return finish(im, im.create<hpc::ReshapeOp>(t, {im.i64Array("shape", out)}));
}

LogicalResult depthToSpace(Importer &im) {
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  int64_t b = im.attrInt("blocksize", 0);
  if (xt.getRank() != 4 || b <= 0 || xt.getDimSize(1) % (b * b))
    return im.fail("DepthToSpace needs an [N, C, H, W] input with C divisible by blocksize^2");
  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), h = xt.getDimSize(2), w = xt.getDimSize(3);
  SmallVector<int64_t> out{n, c / (b * b), h * b, w * b};
  if (im.attrString("mode", "DCR") == "CRD")
    return shuffle(im, x, {n, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3}, out);
  return shuffle(im, x, {n, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2}, out);
}

LogicalResult spaceToDepth(Importer &im) {
  TRY(x, im.input(0));
  auto xt = typeOf(x);
  int64_t b = im.attrInt("blocksize", 0);
  if (xt.getRank() != 4 || b <= 0 || xt.getDimSize(2) % b || xt.getDimSize(3) % b)
    return im.fail("SpaceToDepth needs an [N, C, H, W] input with H and W divisible by blocksize");
  int64_t n = xt.getDimSize(0), c = xt.getDimSize(1), h = xt.getDimSize(2), w = xt.getDimSize(3);
  return shuffle(im, x, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4},
                 {n, c * b * b, h / b, w / b});
}

/// Negative log-likelihood of `logProb` [N, C, d...] at `target` [N, d...],
/// with optional class weights, ignore_index and reduction, as ONNX defines
/// NegativeLogLikelihoodLoss (and SoftmaxCrossEntropyLoss after log_softmax).
FailureOr<Value> nllLoss(Importer &im, Value logProb, Value target, Value weight) {
  auto lt = typeOf(logProb);
  Type elt = lt.getElementType();
  Type idxElt = typeOf(target).getElementType();
  ArrayRef<int64_t> tshape = typeOf(target).getShape();
  Value ignored;
  if (im.attr("ignore_index")) {
    TRY(eq, im.create<hpc::EqualOp>(
                ValueRange{target, im.splat(idxElt, {}, double(im.attrInt("ignore_index", 0)))}));
    ignored = eq;
    // Ignored targets may be out of range; gather at class 0 instead.
    TRY(safe, im.create<hpc::WhereOp>(ValueRange{eq, im.splat(idxElt, {}, 0), target}));
    target = safe;
  }
  TRY(idx, im.create<hpc::UnsqueezeOp>(target, {im.i64Array("axes", {1})}));
  TRY(picked, im.create<hpc::GatherElementsOp>(ValueRange{logProb, idx}, {im.i64("axis", 1)}));
  TRY(flat, im.create<hpc::SqueezeOp>(picked, {im.i64Array("axes", {1})}));
  TRY(loss, im.create<hpc::NegOp>(flat));
  Value w;
  if (weight) {
    TRY(gw, im.create<hpc::GatherOp>(ValueRange{weight, target}, {im.i64("axis", 0)}));
    w = gw;
  } else {
    w = im.splat(elt, tshape, 1.0);
  }
  if (ignored) {
    TRY(masked, im.create<hpc::WhereOp>(ValueRange{ignored, im.splat(elt, {}, 0), w}));
    w = masked;
  }
  TRY(weighted, im.create<hpc::MulOp>(ValueRange{loss, w}));
  std::string reduction = im.attrString("reduction", "mean");
  if (reduction == "none")
    return weighted;
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < int64_t(tshape.size()); ++d)
    all.push_back(d);
  SmallVector<NamedAttribute> attrs{im.i64Array("axes", all), im.boolean("keepdims", false)};
  TRY(sum, im.create<hpc::ReduceSumOp>(weighted, attrs));
  if (reduction == "sum")
    return sum;
  if (reduction != "mean")
    return im.fail("unknown reduction '" + reduction + "'");
  TRY(total, im.create<hpc::ReduceSumOp>(w, attrs));
  return im.create<hpc::DivOp>(ValueRange{sum, total});
}

LogicalResult nll(Importer &im) {
  TRY(input, im.input(0));
  TRY(target, im.input(1));
  TRY(weight, im.optionalInput(2));
  return finish(im, nllLoss(im, input, target, weight));
}

LogicalResult softmaxCrossEntropy(Importer &im) {
  TRY(scores, im.input(0));
  TRY(labels, im.input(1));
  TRY(weight, im.optionalInput(2));
  TRY(logProb, im.create<hpc::LogSoftmaxOp>(scores, {im.i64("axis", 1)}));
  im.setOutput(1, logProb);
  return finish(im, nllLoss(im, logProb, labels, weight));
}

} // namespace

Converter hpc::detail::findConverter(StringRef opType) {
  static const llvm::StringMap<Converter> table = {
      // Elementwise
      {"Neg", unary<hpc::NegOp>}, {"Abs", unary<hpc::AbsOp>},
      {"Sign", unary<hpc::SignOp>}, {"Not", unary<hpc::NotOp>},
      {"Exp", unary<hpc::ExpOp>}, {"Log", unary<hpc::LogOp>},
      {"Sqrt", unary<hpc::SqrtOp>}, {"Reciprocal", unary<hpc::ReciprocalOp>},
      {"Relu", unary<hpc::ReluOp>}, {"Sigmoid", unary<hpc::SigmoidOp>},
      {"Tanh", unary<hpc::TanhOp>}, {"Erf", unary<hpc::ErfOp>},
      {"Sin", unary<hpc::SinOp>}, {"Cos", unary<hpc::CosOp>},
      {"Floor", unary<hpc::FloorOp>}, {"Ceil", unary<hpc::CeilOp>},
      {"Round", unary<hpc::RoundOp>}, {"Softplus", unary<hpc::SoftplusOp>},
      {"HardSwish", unary<hpc::HardSwishOp>}, {"Gelu", gelu},
      {"LeakyRelu", leakyRelu}, {"Elu", elu}, {"HardSigmoid", hardSigmoid},
      {"PRelu", prelu}, {"Clip", clip}, {"Cast", castOp}, {"CastLike", castLike},
      {"Identity", forward}, {"Dropout", dropout},
      {"Add", binary<hpc::AddOp>}, {"Sub", binary<hpc::SubOp>},
      {"Mul", binary<hpc::MulOp>}, {"Div", binary<hpc::DivOp>}, {"Pow", pow},
      {"Mod", mod}, {"And", binary<hpc::AndOp>}, {"Or", binary<hpc::OrOp>},
      {"Xor", binary<hpc::XorOp>}, {"Equal", binary<hpc::EqualOp>},
      {"Less", binary<hpc::LessOp>}, {"LessOrEqual", binary<hpc::LessEqualOp>},
      {"Greater", binary<hpc::GreaterOp>},
      {"GreaterOrEqual", binary<hpc::GreaterEqualOp>},
      {"Sum", variadic<hpc::AddOp>}, {"Max", variadic<hpc::MaxOp>},
      {"Min", variadic<hpc::MinOp>}, {"Mean", variadic<hpc::AddOp, true>},
      {"Where", where},
      // Contractions
      {"MatMul", binary<hpc::MatMulOp>}, {"Gemm", gemm}, {"Conv", conv},
      {"ConvTranspose", convTranspose},
      // Normalization
      {"Softmax", softmax<hpc::SoftmaxOp>},
      {"LogSoftmax", softmax<hpc::LogSoftmaxOp>},
      {"LayerNormalization", layerNorm}, {"RMSNormalization", rmsNorm},
      {"BatchNormalization", batchNorm},
      // Reductions
      {"ReduceSum", reduce<hpc::ReduceSumOp>},
      {"ReduceMean", reduce<hpc::ReduceMeanOp>},
      {"ReduceMax", reduce<hpc::ReduceMaxOp>},
      {"ReduceMin", reduce<hpc::ReduceMinOp>},
      {"ReduceProd", reduce<hpc::ReduceProdOp>},
      {"ReduceSumSquare", reduceComposite}, {"ReduceL1", reduceComposite},
      {"ReduceL2", reduceComposite}, {"ReduceLogSum", reduceComposite},
      {"ReduceLogSumExp", reduceComposite},
      {"ArgMax", argReduce<hpc::ArgMaxOp>}, {"ArgMin", argReduce<hpc::ArgMinOp>},
      // Decompositions
      {"Selu", selu}, {"ThresholdedRelu", thresholdedRelu}, {"Shrink", shrink},
      {"Hardmax", hardmax}, {"Trilu", trilu},
      {"InstanceNormalization", instanceNorm},
      {"DepthToSpace", depthToSpace}, {"SpaceToDepth", spaceToDepth},
      {"NegativeLogLikelihoodLoss", nll},
      {"SoftmaxCrossEntropyLoss", softmaxCrossEntropy},
      // Indexing
      {"Gather", gather}, {"GatherElements", gatherElements},
      {"ScatterElements", scatterElements}, {"Scatter", scatterElements},
      {"OneHot", oneHot}, {"TopK", topK},
      // Data movement
      {"Reshape", reshape}, {"Flatten", flatten}, {"Transpose", transpose},
      {"Slice", slice}, {"Concat", concat}, {"Split", split},
      {"Expand", expand}, {"Tile", tile}, {"Squeeze", squeeze},
      {"Unsqueeze", unsqueeze}, {"Pad", pad},
      // Pooling and resizing
      {"MaxPool", pool<hpc::MaxPoolOp>}, {"AveragePool", pool<hpc::AvgPoolOp>},
      {"GlobalAveragePool", globalPool<hpc::GlobalAvgPoolOp>},
      {"GlobalMaxPool", globalPool<hpc::GlobalMaxPoolOp>},
      {"Resize", resize}, {"Upsample", upsample},
      // Constants and shapes
      {"Constant", constant}, {"ConstantOfShape", constantOfShape},
      {"Range", range}, {"Shape", shape}, {"Size", size},
  };
  auto it = table.find(opType);
  return it == table.end() ? nullptr : it->second;
}
