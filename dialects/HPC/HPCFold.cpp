//===- HPCFold.cpp - constant folding of hpc ops --------------------------===//
//
// Folders evaluate ops whose operands are small dense constants. Exporters
// compute shapes at run time (Shape -> Gather -> Concat -> Reshape); once the
// importer has fixed every dimension, these folders collapse such shape
// subgraphs into constants, which the importer then reads as attributes.
// Identity cases (reshape to the same type, identity transpose, full slice)
// fold to the operand regardless of size.
//
//===----------------------------------------------------------------------===//

#include "HPC/HPCOps.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringSwitch.h"

#include <climits>
#include <cmath>

using namespace mlir;
using namespace hpc;

namespace {

/// A small constant tensor unpacked into host numbers for evaluation. Integer
/// element types are held as int64 (i1 as 0/1), float types as double.
struct Literal {
  RankedTensorType type;
  bool isFloat = false;
  bool isUnsigned = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;

  int64_t size() const { return isFloat ? floats.size() : ints.size(); }
  double asDouble(int64_t i) const { return isFloat ? floats[i] : double(ints[i]); }
};

} // namespace

/// Unpacks a dense constant, if it is small and of a supported element type.
static std::optional<Literal> unpack(Attribute attr) {
  auto dense = dyn_cast_or_null<DenseIntOrFPElementsAttr>(attr);
  if (!dense)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(dense.getType());
  if (!type || !type.hasStaticShape() ||
      type.getNumElements() > hpc::detail::kMaxFoldElements)
    return std::nullopt;
  Literal lit;
  lit.type = type;
  Type elt = type.getElementType();
  if (auto it = dyn_cast<IntegerType>(elt)) {
    lit.isUnsigned = it.isUnsigned() || it.getWidth() == 1;
    lit.ints.reserve(type.getNumElements());
    for (const APInt &v : dense.getValues<APInt>())
      lit.ints.push_back(lit.isUnsigned ? int64_t(v.getZExtValue())
                                        : v.getSExtValue());
    return lit;
  }
  if (isa<FloatType>(elt)) {
    lit.isFloat = true;
    lit.floats.reserve(type.getNumElements());
    for (const APFloat &v : dense.getValues<APFloat>())
      lit.floats.push_back(v.convertToDouble() /* exact for <= f64 */);
    return lit;
  }
  return std::nullopt;
}

/// Packs host numbers back into a dense constant of `type`.
static Attribute pack(RankedTensorType type, ArrayRef<int64_t> ints,
                      ArrayRef<double> floats) {
  Type elt = type.getElementType();
  if (auto it = dyn_cast<IntegerType>(elt)) {
    SmallVector<APInt> values;
    values.reserve(ints.size());
    for (int64_t v : ints)
      values.push_back(APInt(it.getWidth(), uint64_t(v), /*isSigned=*/true,
                             /*implicitTrunc=*/true));
    return DenseElementsAttr::get(type, values);
  }
  auto ft = dyn_cast<FloatType>(elt);
  if (!ft)
    return {};
  SmallVector<APFloat> values;
  values.reserve(floats.size());
  for (double v : floats) {
    APFloat f(v);
    bool lost;
    f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    values.push_back(f);
  }
  return DenseElementsAttr::get(type, values);
}

/// Row-major strides of a shape.
static SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Index into `from` (broadcast to `to`) of the flat result index `flat`.
static int64_t broadcastIndex(int64_t flat, ArrayRef<int64_t> to,
                              ArrayRef<int64_t> from) {
  int64_t index = 0, stride = 1;
  for (int64_t d = int64_t(to.size()) - 1, f = int64_t(from.size()) - 1; d >= 0;
       --d, --f) {
    int64_t coord = flat % to[d];
    flat /= to[d];
    if (f >= 0) {
      if (from[f] != 1)
        index += coord * stride;
      stride *= from[f];
    }
  }
  return index;
}

/// Two's-complement wrapping arithmetic (signed overflow is undefined in C++).
static int64_t wrap(uint64_t v) { return static_cast<int64_t>(v); }

static double evalFloatUnary(StringRef name, double x, Operation *op) {
  auto attr = [&](StringRef n, double dflt) {
    if (auto a = op->getAttrOfType<FloatAttr>(n))
      return a.getValueAsDouble();
    return dflt;
  };
  return llvm::StringSwitch<std::function<double()>>(name)
      .Case("neg", [&] { return -x; })
      .Case("abs", [&] { return std::fabs(x); })
      .Case("sign", [&] { return double((x > 0) - (x < 0)); })
      .Case("exp", [&] { return std::exp(x); })
      .Case("log", [&] { return std::log(x); })
      .Case("sqrt", [&] { return std::sqrt(x); })
      .Case("reciprocal", [&] { return 1.0 / x; })
      .Case("relu", [&] { return x > 0 ? x : 0.0; })
      .Case("sigmoid", [&] { return 1.0 / (1.0 + std::exp(-x)); })
      .Case("tanh", [&] { return std::tanh(x); })
      .Case("erf", [&] { return std::erf(x); })
      .Case("sin", [&] { return std::sin(x); })
      .Case("cos", [&] { return std::cos(x); })
      .Case("floor", [&] { return std::floor(x); })
      .Case("ceil", [&] { return std::ceil(x); })
      .Case("round", [&] { return std::nearbyint(x); })
      .Case("clip",
            [&] {
              double lo = attr("min", -INFINITY), hi = attr("max", INFINITY);
              return std::min(std::max(x, lo), hi);
            })
      .Default([] { return NAN; })();
}

static std::optional<int64_t> evalIntUnary(StringRef name, int64_t x,
                                           Operation *op) {
  if (name == "neg")
    return wrap(0 - uint64_t(x));
  if (name == "abs")
    return x < 0 ? wrap(0 - uint64_t(x)) : x;
  if (name == "sign")
    return (x > 0) - (x < 0);
  if (name == "not")
    return x ? 0 : 1;
  if (name == "clip") {
    if (auto a = op->getAttrOfType<FloatAttr>("min"))
      x = std::max<int64_t>(x, int64_t(a.getValueAsDouble()));
    if (auto a = op->getAttrOfType<FloatAttr>("max"))
      x = std::min<int64_t>(x, int64_t(a.getValueAsDouble()));
    return x;
  }
  return std::nullopt;
}

static bool isCompare(StringRef n) {
  return n == "equal" || n == "less" || n == "less_equal" || n == "greater" ||
         n == "greater_equal";
}

static std::optional<double> evalFloatBinary(StringRef n, double a, double b) {
  if (n == "add") return a + b;
  if (n == "sub") return a - b;
  if (n == "mul") return a * b;
  if (n == "div") return a / b;
  if (n == "pow") return std::pow(a, b);
  if (n == "max") return std::max(a, b);
  if (n == "min") return std::min(a, b);
  if (n == "fmod") return std::fmod(a, b);
  if (n == "mod") {
    double r = std::fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
  if (n == "equal") return a == b;
  if (n == "less") return a < b;
  if (n == "less_equal") return a <= b;
  if (n == "greater") return a > b;
  if (n == "greater_equal") return a >= b;
  return std::nullopt;
}

static std::optional<int64_t> evalIntBinary(StringRef n, int64_t a, int64_t b) {
  if (n == "add") return wrap(uint64_t(a) + uint64_t(b));
  if (n == "sub") return wrap(uint64_t(a) - uint64_t(b));
  if (n == "mul") return wrap(uint64_t(a) * uint64_t(b));
  if (n == "div")
    return (b == 0 || (b == -1 && a == INT64_MIN)) ? std::optional<int64_t>() : a / b;
  if (n == "max") return std::max(a, b);
  if (n == "min") return std::min(a, b);
  if (n == "fmod") {
    if (b == 0) return std::nullopt;
    return b == -1 ? 0 : a % b; // INT64_MIN % -1 overflows
  }
  if (n == "mod") {
    if (b == 0) return std::nullopt;
    if (b == -1) return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
  if (n == "pow") {
    if (b < 0) return std::nullopt;
    uint64_t r = 1, base = uint64_t(a); // square-and-multiply, wrapping
    for (uint64_t e = uint64_t(b); e; e >>= 1, base *= base)
      if (e & 1)
        r *= base;
    return wrap(r);
  }
  if (n == "and") return a && b;
  if (n == "or") return a || b;
  if (n == "xor") return bool(a) != bool(b);
  if (n == "equal") return a == b;
  if (n == "less") return a < b;
  if (n == "less_equal") return a <= b;
  if (n == "greater") return a > b;
  if (n == "greater_equal") return a >= b;
  return std::nullopt;
}

OpFoldResult hpc::detail::foldElementwise(Operation *op,
                                                ArrayRef<Attribute> operands) {
  auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!resultType || !resultType.hasStaticShape() ||
      resultType.getNumElements() > kMaxFoldElements)
    return {};
  StringRef name = op->getName().stripDialect();
  int64_t n = resultType.getNumElements();
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  if (operands.size() == 1) {
    auto x = unpack(operands[0]);
    if (!x)
      return {};
    for (int64_t i = 0; i < n; ++i) {
      if (x->isFloat) {
        floats.push_back(evalFloatUnary(name, x->floats[i], op));
        if (std::isnan(floats.back()) && !std::isnan(x->floats[i]) &&
            name != "log" && name != "sqrt")
          return {}; // op without a host evaluator
      } else {
        auto v = evalIntUnary(name, x->ints[i], op);
        if (!v)
          return {};
        ints.push_back(*v);
      }
    }
    return pack(resultType, ints, floats);
  }
  auto a = unpack(operands[0]), b = unpack(operands[1]);
  if (!a || !b)
    return {};
  ArrayRef<int64_t> shape = resultType.getShape();
  for (int64_t i = 0; i < n; ++i) {
    int64_t ia = broadcastIndex(i, shape, a->type.getShape());
    int64_t ib = broadcastIndex(i, shape, b->type.getShape());
    if (a->isFloat) {
      auto v = evalFloatBinary(name, a->floats[ia], b->floats[ib]);
      if (!v)
        return {};
      if (isCompare(name))
        ints.push_back(int64_t(*v));
      else
        floats.push_back(*v);
    } else {
      auto v = evalIntBinary(name, a->ints[ia], b->ints[ib]);
      if (!v)
        return {};
      ints.push_back(*v);
    }
  }
  return pack(resultType, ints, floats);
}

OpFoldResult hpc::detail::foldReduction(Operation *op, Attribute input,
                                              ArrayRef<int64_t> axes, bool) {
  auto x = unpack(input);
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  if (!x || !resultType.hasStaticShape())
    return {};
  StringRef name = op->getName().stripDialect();
  ArrayRef<int64_t> inShape = x->type.getShape();
  // Accumulate each input element into the output slot with the reduced
  // coordinates dropped (keepdims does not change the flat order).
  SmallVector<int64_t> outShape;
  for (auto [d, s] : llvm::enumerate(inShape))
    outShape.push_back(llvm::is_contained(axes, int64_t(d)) ? 1 : s);
  int64_t outN = resultType.getNumElements();
  bool isMax = name == "reduce_max", isMin = name == "reduce_min",
       isProd = name == "reduce_prod", isSquare = name == "reduce_sum_square";
  double init = isMax ? -INFINITY : isMin ? INFINITY : isProd ? 1.0 : 0.0;
  std::vector<double> acc(outN, init);
  SmallVector<int64_t> outStrides = stridesOf(outShape);
  int64_t count = x->size() / std::max<int64_t>(outN, 1);
  for (int64_t i = 0; i < x->size(); ++i) {
    int64_t rem = i, o = 0;
    for (int64_t d = int64_t(inShape.size()) - 1; d >= 0; --d) {
      int64_t c = rem % inShape[d];
      rem /= inShape[d];
      if (outShape[d] != 1)
        o += c * outStrides[d];
    }
    double v = x->asDouble(i);
    if (isSquare)
      v *= v;
    acc[o] = isMax ? std::max(acc[o], v)
             : isMin ? std::min(acc[o], v)
             : isProd ? acc[o] * v
                      : acc[o] + v;
  }
  if (name == "reduce_mean")
    for (double &v : acc)
      v /= double(count);
  if (x->isFloat)
    return pack(resultType, {}, acc);
  SmallVector<int64_t> ints(acc.begin(), acc.end());
  return pack(resultType, ints, {});
}

//===----------------------------------------------------------------------===//
// Per-op folders
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

/// Float to integer conversion as the hardware does it (x86 cvtt*): truncate
/// toward zero; NaN and out-of-range values become the most negative value
/// of a signed type. Unsigned out-of-range values are not folded.
static std::optional<int64_t> truncateToInteger(double v, IntegerType type) {
  unsigned width = type.getWidth();
  if (type.isUnsigned()) {
    if (!(v > -1.0 && v < std::ldexp(1.0, width)) || width > 63)
      return std::nullopt;
    return int64_t(std::trunc(v));
  }
  double limit = std::ldexp(1.0, width - 1);
  if (!(v > -limit - 1.0 && v < limit))
    return -(int64_t(1) << (width - 1));
  return int64_t(std::trunc(v));
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto x = unpack(adaptor.getInput());
  if (!x || !getType().hasStaticShape())
    return {};
  Type to = getType().getElementType();
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  for (int64_t i = 0; i < x->size(); ++i) {
    double v = x->asDouble(i);
    if (isa<FloatType>(to))
      floats.push_back(v);
    else if (to.isInteger(1))
      ints.push_back(v != 0);
    else if (!x->isFloat)
      ints.push_back(x->ints[i]);
    else if (auto folded = truncateToInteger(v, cast<IntegerType>(to)))
      ints.push_back(*folded);
    else
      return {};
  }
  return pack(getType(), ints, floats);
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  auto c = unpack(adaptor.getCondition()), a = unpack(adaptor.getLhs()),
       b = unpack(adaptor.getRhs());
  if (!c || !a || !b || !getType().hasStaticShape())
    return {};
  ArrayRef<int64_t> shape = getType().getShape();
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  for (int64_t i = 0, n = getType().getNumElements(); i < n; ++i) {
    bool pick = c->ints[broadcastIndex(i, shape, c->type.getShape())];
    const Literal &src = pick ? *a : *b;
    int64_t j = broadcastIndex(i, shape, src.type.getShape());
    if (src.isFloat)
      floats.push_back(src.floats[j]);
    else
      ints.push_back(src.ints[j]);
  }
  return pack(getType(), ints, floats);
}

/// Folds a data-movement op whose result element i reads input element
/// `source(i)`.
template <typename Fn>
static OpFoldResult foldGather(RankedTensorType resultType, Attribute input,
                               Fn source) {
  auto x = unpack(input);
  if (!x || !resultType.hasStaticShape() ||
      resultType.getNumElements() > hpc::detail::kMaxFoldElements)
    return {};
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  for (int64_t i = 0, n = resultType.getNumElements(); i < n; ++i) {
    int64_t j = source(i);
    if (x->isFloat)
      floats.push_back(x->floats[j]);
    else
      ints.push_back(x->ints[j]);
  }
  return pack(resultType, ints, floats);
}

/// Reshape-like folds: same type is the operand, a constant reshapes.
static OpFoldResult foldReshapeLike(Value input, Attribute inputAttr,
                                    RankedTensorType resultType) {
  if (input.getType() == resultType)
    return input;
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(inputAttr))
    if (resultType.hasStaticShape())
      return dense.reshape(resultType);
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getInput(), adaptor.getInput(), getType());
}
OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getInput(), adaptor.getInput(), getType());
}
OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getInput(), adaptor.getInput(), getType());
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPerm();
  if (llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
    return getInput();
  // A transpose undoing another (the backward of x @ W^T reads W back).
  if (auto inner = getInput().getDefiningOp<TransposeOp>()) {
    ArrayRef<int64_t> first = inner.getPerm();
    bool identity = first.size() == perm.size();
    for (size_t d = 0; identity && d < perm.size(); ++d)
      identity = first[perm[d]] == int64_t(d);
    if (identity)
      return inner.getInput();
  }
  auto inType = cast<RankedTensorType>(getInput().getType());
  if (!inType.hasStaticShape())
    return {};
  SmallVector<int64_t> inStrides = stridesOf(inType.getShape());
  ArrayRef<int64_t> outShape = getType().getShape();
  return foldGather(getType(), adaptor.getInput(), [&](int64_t i) {
    int64_t j = 0;
    for (int64_t d = int64_t(outShape.size()) - 1; d >= 0; --d) {
      j += (i % outShape[d]) * inStrides[perm[d]];
      i /= outShape[d];
    }
    return j;
  });
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType() &&
      llvm::all_of(getStarts(), [](int64_t s) { return s == 0; }) &&
      llvm::all_of(getSteps(), [](int64_t s) { return s == 1; }))
    return getInput();
  auto inType = cast<RankedTensorType>(getInput().getType());
  if (!inType.hasStaticShape())
    return {};
  SmallVector<int64_t> inStrides = stridesOf(inType.getShape());
  ArrayRef<int64_t> outShape = getType().getShape();
  ArrayRef<int64_t> starts = getStarts(), steps = getSteps();
  return foldGather(getType(), adaptor.getInput(), [&](int64_t i) {
    int64_t j = 0;
    for (int64_t d = int64_t(outShape.size()) - 1; d >= 0; --d) {
      j += (starts[d] + (i % outShape[d]) * steps[d]) * inStrides[d];
      i /= outShape[d];
    }
    return j;
  });
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto inType = cast<RankedTensorType>(getInput().getType());
  if (!inType.hasStaticShape())
    return {};
  return foldGather(getType(), adaptor.getInput(), [&](int64_t i) {
    return broadcastIndex(i, getType().getShape(), inType.getShape());
  });
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto indices = unpack(adaptor.getIndices());
  auto inType = cast<RankedTensorType>(getInput().getType());
  if (!indices || !inType.hasStaticShape())
    return {};
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0)
    axis += inType.getRank();
  int64_t dim = inType.getDimSize(axis);
  for (int64_t v : indices->ints)
    if (v < -dim || v >= dim)
      return {}; // out-of-range index: leave it for the runtime to report
  ArrayRef<int64_t> inShape = inType.getShape();
  int64_t inner = 1, outer = 1;
  for (int64_t d = axis + 1; d < inType.getRank(); ++d)
    inner *= inShape[d];
  for (int64_t d = 0; d < axis; ++d)
    outer *= inShape[d];
  int64_t numIdx = indices->size();
  return foldGather(getType(), adaptor.getInput(), [&](int64_t i) {
    int64_t in = i % inner, rest = i / inner;
    int64_t k = rest % numIdx, o = rest / numIdx;
    int64_t idx = indices->ints[k];
    if (idx < 0)
      idx += dim;
    return (o * dim + idx) * inner + in;
  });
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs()[0].getType() == getType())
    return getInputs()[0];
  if (!getType().hasStaticShape() ||
      getType().getNumElements() > hpc::detail::kMaxFoldElements)
    return {};
  SmallVector<Literal> parts;
  for (Attribute a : adaptor.getInputs()) {
    auto lit = unpack(a);
    if (!lit)
      return {};
    parts.push_back(std::move(*lit));
  }
  int64_t axis = static_cast<int64_t>(getAxis());
  if (axis < 0)
    axis += getType().getRank();
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= shape[d];
  SmallVector<int64_t> ints;
  SmallVector<double> floats;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Literal &p : parts) {
      int64_t chunk = p.size() / std::max<int64_t>(outer, 1);
      for (int64_t k = 0; k < chunk; ++k) {
        if (p.isFloat)
          floats.push_back(p.floats[o * chunk + k]);
        else
          ints.push_back(p.ints[o * chunk + k]);
      }
    }
  }
  return pack(getType(), ints, floats);
}
