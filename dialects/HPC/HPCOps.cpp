//===- HPCOps.cpp - hpc op shape inference and verifiers ------------------===//
//
// Result-type inference for every hpc op. Inference doubles as the verifier:
// an op whose attributes do not fit its operands (an axis out of range, a
// permutation that is not one, shapes that do not broadcast) fails here with
// a message naming the problem, whether the importer builds it or the parser
// reads it.
//
//===----------------------------------------------------------------------===//

#include "HPC/HPCOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace hpc;

static constexpr int64_t kDyn = ShapedType::kDynamic;

/// Wraps a shape and element type into the one inferred result.
static LogicalResult push(SmallVectorImpl<Type> &inferred,
                          ArrayRef<int64_t> shape, Type elementType) {
  inferred.push_back(RankedTensorType::get(shape, elementType));
  return success();
}

/// The operand as a ranked tensor type, or an error.
static FailureOr<RankedTensorType> ranked(std::optional<Location> loc, Type t,
                                          StringRef what) {
  if (auto r = dyn_cast<RankedTensorType>(t))
    return r;
  return emitOptionalError(loc, what, " must be a ranked tensor, got ", t);
}

/// Normalizes a possibly negative axis against a rank, or reports it.
static FailureOr<int64_t> normalizeAxis(std::optional<Location> loc,
                                        int64_t axis, int64_t rank,
                                        StringRef what = "axis") {
  if (axis < -rank || axis >= rank)
    return emitOptionalError(loc, what, " ", axis,
                             " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

/// Dimension arithmetic that keeps dynamic sizes dynamic.
static int64_t mulDim(int64_t a, int64_t b) {
  return (a == kDyn || b == kDyn) ? kDyn : a * b;
}

//===----------------------------------------------------------------------===//
// Shared helpers (declared in HPCOps.h)
//===----------------------------------------------------------------------===//

LogicalResult hpc::detail::broadcastShapes(ArrayRef<int64_t> a,
                                                 ArrayRef<int64_t> b,
                                                 SmallVectorImpl<int64_t> &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == 1)
      out[i] = db;
    else if (db == 1)
      out[i] = da;
    else if (da == kDyn)
      out[i] = db;
    else if (db == kDyn || da == db)
      out[i] = da;
    else
      return failure();
  }
  return success();
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += ",";
    s += d == kDyn ? "?" : std::to_string(d);
  }
  return s + "]";
}

LogicalResult hpc::detail::inferBroadcastBinary(
    std::optional<Location> loc, Type lhsType, Type rhsType, bool boolResult,
    SmallVectorImpl<Type> &inferred) {
  auto lhs = ranked(loc, lhsType, "lhs");
  auto rhs = ranked(loc, rhsType, "rhs");
  if (failed(lhs) || failed(rhs))
    return failure();
  if (lhs->getElementType() != rhs->getElementType())
    return emitOptionalError(loc, "operand element types differ: ",
                             lhs->getElementType(), " vs ",
                             rhs->getElementType());
  SmallVector<int64_t> shape;
  if (failed(broadcastShapes(lhs->getShape(), rhs->getShape(), shape)))
    return emitOptionalError(loc, "shapes ", shapeString(lhs->getShape()),
                             " and ", shapeString(rhs->getShape()),
                             " do not broadcast");
  Type elt = boolResult ? IntegerType::get(lhs->getContext(), 1)
                        : lhs->getElementType();
  return push(inferred, shape, elt);
}

LogicalResult hpc::detail::inferReduction(
    std::optional<Location> loc, Type inputType, ArrayRef<int64_t> axes,
    bool keepdims, Type resultElementType, SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, inputType, "input");
  if (failed(input))
    return failure();
  int64_t rank = input->getRank();
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= rank)
      return emitOptionalError(loc, "reduction axis ", a,
                               " is out of range for rank ", rank);
    if (i && axes[i - 1] >= a)
      return emitOptionalError(loc, "reduction axes must be sorted and unique");
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (llvm::is_contained(axes, d)) {
      if (keepdims)
        shape.push_back(1);
    } else {
      shape.push_back(input->getDimSize(d));
    }
  }
  return push(inferred, shape,
              resultElementType ? resultElementType : input->getElementType());
}

/// Output size of one windowed dimension (convolution or pooling).
static int64_t windowOutput(int64_t in, int64_t kernel, int64_t stride,
                            int64_t padBegin, int64_t padEnd, int64_t dilation,
                            bool ceilMode) {
  if (in == kDyn)
    return kDyn;
  int64_t span = (kernel - 1) * dilation + 1;
  int64_t numer = in + padBegin + padEnd - span;
  if (numer < 0)
    return -1;
  int64_t out = (ceilMode ? (numer + stride - 1) / stride : numer / stride) + 1;
  // With ceil_mode, the last window must start inside the input or the begin
  // padding, never only in the end padding.
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

/// Checks the window attributes of a conv/pool op against `spatial` dims.
static LogicalResult checkWindowAttrs(std::optional<Location> loc,
                                      int64_t spatial, ArrayRef<int64_t> kernel,
                                      ArrayRef<int64_t> strides,
                                      ArrayRef<int64_t> pads,
                                      ArrayRef<int64_t> dilations) {
  if (static_cast<int64_t>(kernel.size()) != spatial)
    return emitOptionalError(loc, "expected ", spatial,
                             " kernel dimensions, got ", kernel.size());
  if (static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(dilations.size()) != spatial)
    return emitOptionalError(loc, "strides and dilations need ", spatial,
                             " entries (one per spatial dimension)");
  if (static_cast<int64_t>(pads.size()) != 2 * spatial)
    return emitOptionalError(loc, "pads need ", 2 * spatial,
                             " entries (begins, then ends), got ", pads.size());
  for (int64_t i = 0; i < spatial; ++i) {
    if (kernel[i] <= 0 || strides[i] <= 0 || dilations[i] <= 0)
      return emitOptionalError(
          loc, "kernel sizes, strides and dilations must be positive");
    if (pads[i] < 0 || pads[i + spatial] < 0)
      return emitOptionalError(loc, "pads must not be negative");
  }
  return success();
}

LogicalResult hpc::detail::inferPool(
    std::optional<Location> loc, Type inputType, ArrayRef<int64_t> kernel,
    ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
    ArrayRef<int64_t> dilations, bool ceilMode,
    SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, inputType, "input");
  if (failed(input))
    return failure();
  int64_t rank = input->getRank();
  if (rank < 3)
    return emitOptionalError(loc, "pooling needs an [N, C, D1...] input, got rank ", rank);
  int64_t spatial = rank - 2;
  if (failed(checkWindowAttrs(loc, spatial, kernel, strides, pads, dilations)))
    return failure();
  SmallVector<int64_t> shape(input->getShape().take_front(2));
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t out = windowOutput(input->getDimSize(i + 2), kernel[i], strides[i],
                               pads[i], pads[i + spatial], dilations[i], ceilMode);
    if (out != kDyn && out <= 0)
      return emitOptionalError(loc, "pooling window ", kernel[i],
                               " does not fit spatial dimension ", i,
                               " of size ", input->getDimSize(i + 2));
    shape.push_back(out);
  }
  return push(inferred, shape, input->getElementType());
}

LogicalResult hpc::detail::inferGlobalPool(std::optional<Location> loc,
                                                 Type inputType,
                                                 SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, inputType, "input");
  if (failed(input))
    return failure();
  if (input->getRank() < 3)
    return emitOptionalError(loc, "global pooling needs an [N, C, D1...] input");
  SmallVector<int64_t> shape(input->getShape().take_front(2));
  shape.append(input->getRank() - 2, 1);
  return push(inferred, shape, input->getElementType());
}

//===----------------------------------------------------------------------===//
// Constants and weights
//===----------------------------------------------------------------------===//

ParseResult ConstantOp::parse(OpAsmParser &parser, OperationState &result) {
  ElementsAttr value;
  if (parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseAttribute(value, "value", result.attributes))
    return failure();
  result.addTypes(value.getType());
  return success();
}

void ConstantOp::print(OpAsmPrinter &p) {
  p.printOptionalAttrDict((*this)->getAttrs(), /*elidedAttrs=*/{"value"});
  p << ' ';
  p.printAttribute(getValue());
}

LogicalResult ConstantOp::verify() {
  if (getValue().getType() != getType())
    return emitOpError("value type ")
           << getValue().getType() << " does not match result type "
           << getType();
  return success();
}

// hpc.weight and hpc.variable: `"name" {attrs} : type [= value]`; the value
// prints without its type, which is the result type.
static ParseResult parseNamedTensor(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  Type type;
  // The explicit NoneType stops the string from taking the `: type` that
  // follows as its own type ("b" : tensor<3xf32> is a typed string attribute).
  if (parser.parseAttribute(name, parser.getBuilder().getNoneType(), "name",
                            result.attributes) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(type))
    return failure();
  if (succeeded(parser.parseOptionalEqual())) {
    Attribute value;
    if (parser.parseAttribute(value, type))
      return failure();
    auto elements = dyn_cast<ElementsAttr>(value);
    if (!elements)
      return parser.emitError(parser.getCurrentLocation(),
                              "the value must be an elements attribute");
    result.addAttribute("value", elements);
  }
  result.addTypes(type);
  return success();
}

static void printNamedTensor(OpAsmPrinter &p, Operation *op, StringAttr name,
                             std::optional<ElementsAttr> value) {
  p << ' ';
  p.printAttribute(name);
  p.printOptionalAttrDict(op->getAttrs(), /*elidedAttrs=*/{"name", "value"});
  p << " : " << op->getResult(0).getType();
  if (value) {
    p << " = ";
    p.printAttributeWithoutType(*value);
  }
}

ParseResult WeightOp::parse(OpAsmParser &parser, OperationState &result) {
  return parseNamedTensor(parser, result);
}

void WeightOp::print(OpAsmPrinter &p) {
  printNamedTensor(p, *this, getNameAttr(), getValue());
}

ElementsAttr hpc::elementsFromBytes(RankedTensorType type, StringRef name, ArrayRef<char> bytes,
                                   bool allowResource) {
  if (allowResource && int64_t(bytes.size()) > kInlineDataBytes) {
    // Resource keys are printed as identifiers; keep them readable and safe.
    std::string key = name.empty() ? "tensor" : name.str();
    for (char &c : key)
      if (!llvm::isAlnum(c) && c != '_' && c != '.')
        c = '_';
    int64_t eltBytes = std::max<int64_t>(type.getElementTypeBitWidth() / 8, 1);
    auto blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        bytes, std::max<int64_t>(eltBytes, 8), /*dataIsMutable=*/false);
    return DenseResourceElementsAttr::get(type, key, std::move(blob));
  }
  return DenseElementsAttr::getFromRawBuffer(type, bytes);
}

std::string hpc::sliceBytes(StringRef data, ArrayRef<int64_t> inShape, int64_t eltBytes,
                       ArrayRef<int64_t> starts, ArrayRef<int64_t> steps,
                       ArrayRef<int64_t> shape) {
  int64_t rank = inShape.size();
  SmallVector<int64_t> inStride(rank, eltBytes);
  for (int64_t i = rank - 2; i >= 0; --i)
    inStride[i] = inStride[i + 1] * inShape[i + 1];
  int64_t count = ShapedType::getNumElements(shape);
  std::string out;
  out.reserve(count * eltBytes);
  if (count == 0)
    return out;
  if (rank == 0)
    return data.str();
  // Odometer over every dimension but the last; the last is one run when
  // its step is 1.
  SmallVector<int64_t> index(rank, 0);
  int64_t last = rank - 1;
  while (true) {
    int64_t base = 0;
    for (int64_t i = 0; i < last; ++i)
      base += (starts[i] + index[i] * steps[i]) * inStride[i];
    if (steps[last] == 1) {
      out.append(data.data() + base + starts[last] * eltBytes, shape[last] * eltBytes);
    } else {
      for (int64_t k = 0; k < shape[last]; ++k)
        out.append(data.data() + base + (starts[last] + k * steps[last]) * eltBytes,
                   eltBytes);
    }
    int64_t i = last - 1;
    while (i >= 0 && ++index[i] == shape[i])
      index[i--] = 0;
    if (i < 0)
      return out;
  }
}


std::string hpc::pieceMajorBytes(StringRef data, ArrayRef<int64_t> shape, int64_t eltBytes,
                                 int64_t dim, int64_t pieces) {
  SmallVector<int64_t> starts(shape.size(), 0), steps(shape.size(), 1), piece(shape);
  piece[dim] /= pieces;
  std::string bytes;
  bytes.reserve(data.size());
  for (int64_t g = 0; g < pieces; ++g) {
    starts[dim] = g * piece[dim];
    bytes += sliceBytes(data, shape, eltBytes, starts, steps, piece);
  }
  return bytes;
}

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty name");
  if (auto value = getValue())
    if (value->getType() != getType())
      return emitOpError("value type ")
             << value->getType() << " does not match result type "
             << getType();
  return success();
}

/// hpc.gelu's and hpc.gelu_grad's `approximate`: "none" or "tanh".
static LogicalResult verifyGeluApproximate(Operation *op, StringRef approximate) {
  if (approximate != "none" && approximate != "tanh")
    return op->emitOpError("approximate must be \"none\" or \"tanh\", got \"")
           << approximate << "\"";
  return success();
}

LogicalResult GeluOp::verify() { return verifyGeluApproximate(*this, getApproximate()); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult CastOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  return push(inferred, input->getShape(), adaptor.getTo());
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto cond = ranked(loc, adaptor.getCondition().getType(), "condition");
  auto lhs = ranked(loc, adaptor.getLhs().getType(), "lhs");
  auto rhs = ranked(loc, adaptor.getRhs().getType(), "rhs");
  if (failed(cond) || failed(lhs) || failed(rhs))
    return failure();
  if (lhs->getElementType() != rhs->getElementType())
    return emitOptionalError(loc, "value element types differ: ",
                             lhs->getElementType(), " vs ", rhs->getElementType());
  SmallVector<int64_t> s1, s2;
  if (failed(hpc::detail::broadcastShapes(lhs->getShape(), rhs->getShape(), s1)) ||
      failed(hpc::detail::broadcastShapes(cond->getShape(), s1, s2)))
    return emitOptionalError(loc, "shapes ", shapeString(cond->getShape()), ", ",
                             shapeString(lhs->getShape()), " and ",
                             shapeString(rhs->getShape()), " do not broadcast");
  return push(inferred, s2, lhs->getElementType());
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// A product's declared result types against the inferred ones: equal, or
/// the same shape in f32 where the inferred type is bf16 or f16 (the f32
/// sum written without rounding).
static bool productResultsCompatible(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != actual.size())
    return false;
  for (auto [want, got] : llvm::zip(inferred, actual)) {
    if (want == got)
      continue;
    auto w = dyn_cast<RankedTensorType>(want), g = dyn_cast<RankedTensorType>(got);
    if (!w || !g || w.getShape() != g.getShape() || !g.getElementType().isF32() ||
        !(w.getElementType().isBF16() || w.getElementType().isF16()))
      return false;
  }
  return true;
}

// MLIR passes (inferred, declared); accepted either way round.
bool MatMulOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return productResultsCompatible(l, r) || productResultsCompatible(r, l);
}

bool GemmOp::isCompatibleReturnTypes(TypeRange l, TypeRange r) {
  return productResultsCompatible(l, r) || productResultsCompatible(r, l);
}

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto lhs = ranked(loc, adaptor.getLhs().getType(), "lhs");
  auto rhs = ranked(loc, adaptor.getRhs().getType(), "rhs");
  if (failed(lhs) || failed(rhs))
    return failure();
  if (lhs->getElementType() != rhs->getElementType())
    return emitOptionalError(loc, "operand element types differ: ",
                             lhs->getElementType(), " vs ", rhs->getElementType());
  if (lhs->getRank() == 0 || rhs->getRank() == 0)
    return emitOptionalError(loc, "matmul operands must have rank >= 1");
  SmallVector<int64_t> a(lhs->getShape()), b(rhs->getShape());
  bool promoteA = a.size() == 1, promoteB = b.size() == 1;
  if (promoteA)
    a.insert(a.begin(), 1);
  if (promoteB)
    b.push_back(1);
  int64_t k1 = a.back(), k2 = b[b.size() - 2];
  if (k1 != kDyn && k2 != kDyn && k1 != k2)
    return emitOptionalError(loc, "contracting dimensions differ: ",
                             shapeString(lhs->getShape()), " x ",
                             shapeString(rhs->getShape()));
  SmallVector<int64_t> batch;
  if (failed(hpc::detail::broadcastShapes(ArrayRef(a).drop_back(2),
                                     ArrayRef(b).drop_back(2), batch)))
    return emitOptionalError(loc, "batch dimensions do not broadcast: ",
                             shapeString(lhs->getShape()), " x ",
                             shapeString(rhs->getShape()));
  if (!promoteA)
    batch.push_back(a[a.size() - 2]);
  if (!promoteB)
    batch.push_back(b.back());
  return push(inferred, batch, lhs->getElementType());
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto a = ranked(loc, adaptor.getA().getType(), "a");
  auto b = ranked(loc, adaptor.getB().getType(), "b");
  if (failed(a) || failed(b))
    return failure();
  if (a->getRank() != 2 || b->getRank() != 2)
    return emitOptionalError(loc, "gemm operands must be 2-D");
  if (a->getElementType() != b->getElementType())
    return emitOptionalError(loc, "operand element types differ");
  int64_t m = a->getDimSize(adaptor.getTransA() ? 1 : 0);
  int64_t k1 = a->getDimSize(adaptor.getTransA() ? 0 : 1);
  int64_t k2 = b->getDimSize(adaptor.getTransB() ? 1 : 0);
  int64_t n = b->getDimSize(adaptor.getTransB() ? 0 : 1);
  if (k1 != kDyn && k2 != kDyn && k1 != k2)
    return emitOptionalError(loc, "contracting dimensions differ: ", k1, " vs ", k2);
  if (Value c = adaptor.getC()) {
    auto ct = ranked(loc, c.getType(), "c");
    if (failed(ct))
      return failure();
    SmallVector<int64_t> out;
    if (failed(hpc::detail::broadcastShapes(ct->getShape(), {m, n}, out)) ||
        out != SmallVector<int64_t>{m, n})
      return emitOptionalError(loc, "c of shape ", shapeString(ct->getShape()),
                               " does not broadcast to [", m, ",", n, "]");
  }
  return push(inferred, {m, n}, a->getElementType());
}

ArrayRef<StringRef> hpc::epilogueActivations() {
  static constexpr StringRef names[] = {"none",    "relu", "gelu", "gelu_tanh",
                                        "sigmoid", "tanh", "silu"};
  return names;
}

std::optional<StringRef> hpc::epilogueActivationOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<StringRef>>(op)
      .Case([](ReluOp) { return StringRef("relu"); })
      .Case([](GeluOp gelu) {
        return StringRef(gelu.getApproximate() == "tanh" ? "gelu_tanh" : "gelu");
      })
      .Case([](SigmoidOp) { return StringRef("sigmoid"); })
      .Case([](TanhOp) { return StringRef("tanh"); })
      .Case([](SiluOp) { return StringRef("silu"); })
      .Default([](Operation *) { return std::nullopt; });
}

NamedAttribute hpc::convOperandSegments(OpBuilder &b, bool bias, bool residual) {
  return b.getNamedAttr("operandSegmentSizes",
                        b.getDenseI32ArrayAttr({1, 1, bias ? 1 : 0, residual ? 1 : 0}));
}

/// The check of gemm's and conv's `activation`.
static LogicalResult verifyActivation(Operation *op, StringRef activation) {
  if (llvm::is_contained(hpc::epilogueActivations(), activation))
    return success();
  InFlightDiagnostic diag = op->emitOpError("activation must be one of ");
  llvm::interleaveComma(hpc::epilogueActivations(), diag,
                        [&](StringRef name) { diag << "\"" << name << "\""; });
  return diag << ", got \"" << activation << "\"";
}

LogicalResult GemmOp::verify() { return verifyActivation(*this, getActivation()); }

/// Shared checks of conv and conv_transpose operands.
static LogicalResult checkConvOperands(std::optional<Location> loc,
                                       RankedTensorType input,
                                       RankedTensorType weight, Value bias,
                                       int64_t group, int64_t biasSize) {
  if (input.getRank() < 3)
    return emitOptionalError(loc, "convolution needs an [N, C, D1...] input, got rank ",
                             input.getRank());
  if (weight.getRank() != input.getRank())
    return emitOptionalError(loc, "weight rank ", weight.getRank(),
                             " differs from input rank ", input.getRank());
  if (input.getElementType() != weight.getElementType())
    return emitOptionalError(loc, "input and weight element types differ");
  if (group <= 0)
    return emitOptionalError(loc, "group must be positive, got ", group);
  if (bias) {
    auto bt = dyn_cast<RankedTensorType>(bias.getType());
    if (!bt || bt.getRank() != 1 ||
        (biasSize != kDyn && bt.getDimSize(0) != kDyn &&
         bt.getDimSize(0) != biasSize))
      return emitOptionalError(loc, "bias must be 1-D of size ", biasSize);
  }
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  auto weight = ranked(loc, adaptor.getWeight().getType(), "weight");
  if (failed(input) || failed(weight))
    return failure();
  int64_t group = adaptor.getGroup();
  int64_t m = weight->getDimSize(0);
  if (failed(checkConvOperands(loc, *input, *weight, adaptor.getBias(), group, m)))
    return failure();
  int64_t c = input->getDimSize(1), cw = weight->getDimSize(1);
  if (c != kDyn && cw != kDyn && c != cw * group)
    return emitOptionalError(loc, "input has ", c, " channels but weight expects ",
                             cw, " x group ", group);
  if (m != kDyn && m % group != 0)
    return emitOptionalError(loc, "output channels ", m,
                             " are not divisible by group ", group);
  int64_t spatial = input->getRank() - 2;
  ArrayRef<int64_t> kernel = weight->getShape().drop_front(2);
  if (llvm::is_contained(kernel, kDyn))
    return emitOptionalError(loc, "kernel sizes must be static");
  if (failed(checkWindowAttrs(loc, spatial, kernel, adaptor.getStrides(),
                              adaptor.getPads(), adaptor.getDilations())))
    return failure();
  SmallVector<int64_t> shape{input->getDimSize(0), m};
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t out = windowOutput(input->getDimSize(i + 2), kernel[i],
                               adaptor.getStrides()[i], adaptor.getPads()[i],
                               adaptor.getPads()[i + spatial],
                               adaptor.getDilations()[i], false);
    if (out != kDyn && out <= 0)
      return emitOptionalError(loc, "kernel does not fit spatial dimension ", i);
    shape.push_back(out);
  }
  return push(inferred, shape, input->getElementType());
}

LogicalResult ConvOp::verify() {
  if (Value r = getResidual(); r && r.getType() != getType())
    return emitOpError("residual has type ")
           << r.getType() << " but the result is " << getType();
  return verifyActivation(*this, getActivation());
}

LogicalResult ConvTransposeOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  auto weight = ranked(loc, adaptor.getWeight().getType(), "weight");
  if (failed(input) || failed(weight))
    return failure();
  int64_t group = adaptor.getGroup();
  int64_t m = mulDim(weight->getDimSize(1), group);
  if (failed(checkConvOperands(loc, *input, *weight, adaptor.getBias(), group, m)))
    return failure();
  int64_t c = input->getDimSize(1), cw = weight->getDimSize(0);
  if (c != kDyn && cw != kDyn && c != cw)
    return emitOptionalError(loc, "input has ", c, " channels but weight expects ", cw);
  int64_t spatial = input->getRank() - 2;
  ArrayRef<int64_t> kernel = weight->getShape().drop_front(2);
  if (llvm::is_contained(kernel, kDyn))
    return emitOptionalError(loc, "kernel sizes must be static");
  if (failed(checkWindowAttrs(loc, spatial, kernel, adaptor.getStrides(),
                              adaptor.getPads(), adaptor.getDilations())))
    return failure();
  ArrayRef<int64_t> outPad = adaptor.getOutputPadding();
  if (static_cast<int64_t>(outPad.size()) != spatial)
    return emitOptionalError(loc, "output_padding needs ", spatial, " entries");
  SmallVector<int64_t> shape{input->getDimSize(0), m};
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t in = input->getDimSize(i + 2);
    if (in == kDyn) {
      shape.push_back(kDyn);
      continue;
    }
    int64_t out = adaptor.getStrides()[i] * (in - 1) + outPad[i] +
                  (kernel[i] - 1) * adaptor.getDilations()[i] + 1 -
                  adaptor.getPads()[i] - adaptor.getPads()[i + spatial];
    if (out <= 0)
      return emitOptionalError(loc, "output size of spatial dimension ", i,
                               " is not positive");
    shape.push_back(out);
  }
  return push(inferred, shape, input->getElementType());
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

/// The result type of softmax and log_softmax is the input's. Their assembly
/// format has no result type, so the parser infers it while `axis` is still in
/// the parsed attribute dictionary, not yet in the op's properties: look in
/// both. A missing axis is left to the verifier ("requires attribute").
static LogicalResult inferSoftmaxLike(std::optional<Location> loc, Type inputType,
                                      IntegerAttr axisProperty,
                                      DictionaryAttr attributes,
                                      SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, inputType, "input");
  if (failed(input))
    return failure();
  IntegerAttr axis = axisProperty;
  if (!axis && attributes)
    axis = attributes.getAs<IntegerAttr>("axis");
  if (axis && failed(normalizeAxis(loc, axis.getInt(), input->getRank())))
    return failure();
  inferred.push_back(*input);
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferSoftmaxLike(loc, adaptor.getInput().getType(),
                          adaptor.getProperties().axis, adaptor.getAttributes(),
                          inferred);
}

LogicalResult LogSoftmaxOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  return inferSoftmaxLike(loc, adaptor.getInput().getType(),
                          adaptor.getProperties().axis, adaptor.getAttributes(),
                          inferred);
}

/// Checks that a scale/bias operand broadcasts to the normalized dims.
static LogicalResult checkNormParam(std::optional<Location> loc,
                                    RankedTensorType input, int64_t axis,
                                    Value param, StringRef what) {
  if (!param)
    return success();
  auto t = dyn_cast<RankedTensorType>(param.getType());
  if (!t)
    return emitOptionalError(loc, what, " must be a ranked tensor");
  if (t.getElementType() != input.getElementType())
    return emitOptionalError(loc, what, " element type differs from the input's");
  ArrayRef<int64_t> normalized = input.getShape().drop_front(axis);
  SmallVector<int64_t> out;
  if (t.getRank() > static_cast<int64_t>(normalized.size()) ||
      failed(hpc::detail::broadcastShapes(t.getShape(), normalized, out)) ||
      ArrayRef<int64_t>(out) != normalized)
    return emitOptionalError(loc, what, " of shape ", shapeString(t.getShape()),
                             " does not broadcast to the normalized shape ",
                             shapeString(normalized));
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  auto axis = normalizeAxis(loc, adaptor.getAxis(), input->getRank());
  if (failed(axis) ||
      failed(checkNormParam(loc, *input, *axis, adaptor.getScale(), "scale")) ||
      failed(checkNormParam(loc, *input, *axis, adaptor.getBias(), "bias")))
    return failure();
  inferred.push_back(*input);
  return success();
}

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  auto axis = normalizeAxis(loc, adaptor.getAxis(), input->getRank());
  if (failed(axis) ||
      failed(checkNormParam(loc, *input, *axis, adaptor.getScale(), "scale")))
    return failure();
  inferred.push_back(*input);
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  if (input->getRank() < 2)
    return emitOptionalError(loc, "batch_norm needs an [N, C, ...] input");
  int64_t c = input->getDimSize(1);
  for (Value v : {adaptor.getScale(), adaptor.getBias(), adaptor.getMean(),
                  adaptor.getVariance()}) {
    auto t = cast<RankedTensorType>(v.getType());
    if (t.getRank() != 1 ||
        (c != kDyn && t.getDimSize(0) != kDyn && t.getDimSize(0) != c))
      return emitOptionalError(loc, "scale, bias, mean and variance must be 1-D of size ",
                               c, ", got ", shapeString(t.getShape()));
  }
  inferred.push_back(*input);
  return success();
}

//===----------------------------------------------------------------------===//
// Indexing
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  auto indices = ranked(loc, adaptor.getIndices().getType(), "indices");
  if (failed(input) || failed(indices))
    return failure();
  if (input->getRank() == 0)
    return emitOptionalError(loc, "gather input must have rank >= 1");
  auto axis = normalizeAxis(loc, adaptor.getAxis(), input->getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(input->getShape().take_front(*axis));
  llvm::append_range(shape, indices->getShape());
  llvm::append_range(shape, input->getShape().drop_front(*axis + 1));
  return push(inferred, shape, input->getElementType());
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *,
                                                 std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  auto indices = ranked(loc, adaptor.getIndices().getType(), "indices");
  if (failed(input) || failed(indices))
    return failure();
  if (input->getRank() != indices->getRank())
    return emitOptionalError(loc, "input and indices ranks differ");
  if (failed(normalizeAxis(loc, adaptor.getAxis(), input->getRank())))
    return failure();
  return push(inferred, indices->getShape(), input->getElementType());
}

LogicalResult ScatterElementsOp::inferReturnTypes(MLIRContext *,
                                                  std::optional<Location> loc,
                                                  Adaptor adaptor,
                                                  SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  auto indices = ranked(loc, adaptor.getIndices().getType(), "indices");
  auto updates = ranked(loc, adaptor.getUpdates().getType(), "updates");
  if (failed(input) || failed(indices) || failed(updates))
    return failure();
  if (input->getRank() != indices->getRank() ||
      indices->getShape() != updates->getShape())
    return emitOptionalError(loc, "indices and updates must have one shape and "
                                  "the input's rank");
  if (input->getElementType() != updates->getElementType())
    return emitOptionalError(loc, "input and updates element types differ");
  StringRef r = adaptor.getReduction();
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return emitOptionalError(loc, "unknown reduction \"", r, "\"");
  if (failed(normalizeAxis(loc, adaptor.getAxis(), input->getRank())))
    return failure();
  inferred.push_back(*input);
  return success();
}

LogicalResult OneHotOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto indices = ranked(loc, adaptor.getIndices().getType(), "indices");
  auto values = ranked(loc, adaptor.getValues().getType(), "values");
  if (failed(indices) || failed(values))
    return failure();
  if (values->getRank() != 1 || values->getDimSize(0) != 2)
    return emitOptionalError(loc, "values must be [off_value, on_value]");
  if (adaptor.getDepth() <= 0)
    return emitOptionalError(loc, "depth must be positive, got ", adaptor.getDepth());
  auto axis = normalizeAxis(loc, adaptor.getAxis(), indices->getRank() + 1);
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(indices->getShape());
  shape.insert(shape.begin() + *axis, adaptor.getDepth());
  return push(inferred, shape, values->getElementType());
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *context,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  auto axis = normalizeAxis(loc, adaptor.getAxis(), input->getRank());
  if (failed(axis))
    return failure();
  int64_t k = adaptor.getK(), dim = input->getDimSize(*axis);
  if (k < 0 || (dim != kDyn && k > dim))
    return emitOptionalError(loc, "k = ", k, " does not fit dimension of size ", dim);
  SmallVector<int64_t> shape(input->getShape());
  shape[*axis] = k;
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return push(inferred, shape, IntegerType::get(context, 64));
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

/// The routed slots `[tokens, k]` and the buffer's experts and capacity,
/// checked against each other.
/// `slots` as `[B..., tokens, k]` (`batched`) or `[tokens, k]` against
/// `numExperts` buffers of `capacity` rows.
static LogicalResult checkRouting(std::optional<Location> loc, RankedTensorType slots,
                                  int64_t numExperts, int64_t capacity, StringRef what,
                                  bool batched = false) {
  if (batched ? slots.getRank() < 2 : slots.getRank() != 2)
    return emitOptionalError(loc, what, " must be ", batched ? "[batch..., " : "[",
                             "tokens, k], got rank ", slots.getRank());
  if (numExperts < 1 || capacity < 1)
    return emitOptionalError(loc, "num_experts (", numExperts, ") and capacity (", capacity,
                             ") must be positive");
  int64_t k = slots.getShape().back();
  if (k != kDyn && (k < 1 || k > numExperts))
    return emitOptionalError(loc, "top-k of ", k, " does not fit ", numExperts, " experts");
  return success();
}

LogicalResult MoERouteOp::inferReturnTypes(MLIRContext *context, std::optional<Location> loc,
                                           Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto experts = ranked(loc, adaptor.getExperts().getType(), "experts");
  if (failed(experts) || failed(checkRouting(loc, *experts, adaptor.getNumExperts(),
                                             adaptor.getCapacity(), "experts")))
    return failure();
  Type i64 = IntegerType::get(context, 64);
  inferred.push_back(RankedTensorType::get(experts->getShape(), i64));
  return push(inferred, {adaptor.getNumExperts()}, i64);
}

LogicalResult MoEDispatchOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  auto slots = ranked(loc, adaptor.getSlots().getType(), "slots");
  if (failed(input) || failed(slots) ||
      failed(checkRouting(loc, *slots, adaptor.getNumExperts(), adaptor.getCapacity(), "slots",
                          /*batched=*/true)))
    return failure();
  ArrayRef<int64_t> in = input->getShape(), sl = slots->getShape();
  // The slots' leading dimensions are the input's, then [tokens, (k,) hidden].
  int64_t batch = slots->getRank() - 2;
  int64_t rank = input->getRank() - batch;
  if (rank != 2 && rank != 3)
    return emitOptionalError(loc, "input must be [", batch ? "batch..., " : "",
                             "tokens, hidden] or [", batch ? "batch..., " : "",
                             "tokens, k, hidden]");
  if (in.take_front(batch + 1) != sl.take_front(batch + 1) ||
      (rank == 3 && in[batch + 1] != sl[batch + 1]))
    return emitOptionalError(loc, "input ", shapeString(in), " does not match slots ",
                             shapeString(sl));
  SmallVector<int64_t> out(sl.take_front(batch));
  out.append({adaptor.getNumExperts(), adaptor.getCapacity(), in.back()});
  return push(inferred, out, input->getElementType());
}

LogicalResult MoEGatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  auto buffer = ranked(loc, adaptor.getBuffer().getType(), "buffer");
  auto slots = ranked(loc, adaptor.getSlots().getType(), "slots");
  if (failed(buffer) || failed(slots))
    return failure();
  if (slots->getRank() < 2)
    return emitOptionalError(loc, "slots must be [tokens, k], got rank ", slots->getRank());
  int64_t batch = slots->getRank() - 2;
  if (buffer->getRank() != batch + 3)
    return emitOptionalError(loc, "buffer must be [", batch ? "batch..., " : "",
                             "experts, capacity, hidden], got rank ", buffer->getRank());
  ArrayRef<int64_t> b = buffer->getShape(), sl = slots->getShape();
  if (b.take_front(batch) != sl.take_front(batch))
    return emitOptionalError(loc, "buffer ", shapeString(b), " and slots ", shapeString(sl),
                             " have different batch dimensions");
  if (b[batch] != kDyn && b[batch + 1] != kDyn &&
      failed(checkRouting(loc, *slots, b[batch], b[batch + 1], "slots", /*batched=*/true)))
    return failure();
  SmallVector<int64_t> out(sl);
  out.push_back(b.back());
  return push(inferred, out, buffer->getElementType());
}

LogicalResult MoEExchangeSlotsOp::inferReturnTypes(MLIRContext *context,
                                                   std::optional<Location> loc, Adaptor adaptor,
                                                   SmallVectorImpl<Type> &inferred) {
  auto slots = ranked(loc, adaptor.getSlots().getType(), "slots");
  int64_t experts = adaptor.getNumExperts(), capacity = adaptor.getCapacity();
  if (failed(slots) || failed(checkRouting(loc, *slots, experts, capacity, "slots")))
    return failure();
  int64_t groups = adaptor.getGroups(), ep = adaptor.getEp(), rows = adaptor.getGroupCapacity();
  if (groups < 1 || ep < 1 || groups % ep != 0)
    return emitOptionalError(loc, "groups (", groups, ") must be a positive multiple of ep (",
                             ep, ")");
  if (experts % ep != 0)
    return emitOptionalError(loc, "ep=", ep, " does not divide the ", experts, " experts");
  int64_t tokens = slots->getDimSize(0);
  if (tokens != kDyn && tokens % groups != 0)
    return emitOptionalError(loc, "the ", tokens, " tokens do not split into ", groups,
                             " groups");
  // A group's kept choices of one expert: at most its tokens, and at most
  // the expert's buffer.
  if (tokens != kDyn && rows < std::min(capacity, tokens / groups))
    return emitOptionalError(loc, "group_capacity ", rows, " is below min(capacity, tokens / "
                             "groups) = ", std::min(capacity, tokens / groups));
  Type i64 = IntegerType::get(context, 64);
  inferred.push_back(RankedTensorType::get(slots->getShape(), i64));
  return push(inferred, {groups / ep, experts, std::min(capacity, ep * rows)}, i64);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  ArrayRef<int64_t> shape = adaptor.getShape();
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return emitOptionalError(loc, "reshape target ", shapeString(shape),
                             " must be fully static and non-negative");
  if (input->hasStaticShape()) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    if (n != input->getNumElements())
      return emitOptionalError(loc, "cannot reshape ", shapeString(input->getShape()),
                               " (", input->getNumElements(), " elements) to ",
                               shapeString(shape), " (", n, " elements)");
  }
  return push(inferred, shape, input->getElementType());
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  ArrayRef<int64_t> perm = adaptor.getPerm();
  int64_t rank = input->getRank();
  SmallVector<bool> seen(rank, false);
  if (static_cast<int64_t>(perm.size()) != rank)
    return emitOptionalError(loc, "perm has ", perm.size(),
                             " entries for a rank-", rank, " input");
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return emitOptionalError(loc, "perm ", shapeString(perm),
                               " is not a permutation of 0..", rank - 1);
    seen[p] = true;
    shape.push_back(input->getDimSize(p));
  }
  return push(inferred, shape, input->getElementType());
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  int64_t rank = input->getRank();
  ArrayRef<int64_t> starts = adaptor.getStarts(), ends = adaptor.getEnds(),
                    steps = adaptor.getSteps();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(ends.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank)
    return emitOptionalError(loc, "starts, ends and steps need one entry per "
                                  "dimension (", rank, ")");
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t dim = input->getDimSize(i), step = steps[i];
    if (step == 0)
      return emitOptionalError(loc, "slice step must not be 0");
    if (dim == kDyn) {
      shape.push_back(kDyn);
      continue;
    }
    int64_t s = starts[i], e = ends[i];
    bool ok = step > 0 ? (s >= 0 && s <= dim && e >= 0 && e <= dim)
                       : (s >= -1 && s < dim && e >= -1 && e < dim);
    if (!ok)
      return emitOptionalError(loc, "slice bounds [", s, ", ", e, ") step ", step,
                               " are not normalized for dimension ", i,
                               " of size ", dim);
    int64_t n = step > 0 ? (e - s + step - 1) / step : (s - e - step - 1) / -step;
    shape.push_back(std::max<int64_t>(n, 0));
  }
  return push(inferred, shape, input->getElementType());
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "concat needs at least one input");
  auto first = ranked(loc, adaptor.getInputs().front().getType(), "input");
  if (failed(first))
    return failure();
  auto axis = normalizeAxis(loc, adaptor.getAxis(), first->getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(first->getShape());
  for (Value v : adaptor.getInputs().drop_front()) {
    auto t = ranked(loc, v.getType(), "input");
    if (failed(t))
      return failure();
    if (t->getRank() != first->getRank() ||
        t->getElementType() != first->getElementType())
      return emitOptionalError(loc, "concat inputs differ in rank or element type");
    for (int64_t d = 0; d < first->getRank(); ++d) {
      if (d == *axis) {
        shape[d] = (shape[d] == kDyn || t->getDimSize(d) == kDyn)
                       ? kDyn
                       : shape[d] + t->getDimSize(d);
      } else if (shape[d] != t->getDimSize(d) && shape[d] != kDyn &&
                 t->getDimSize(d) != kDyn) {
        return emitOptionalError(loc, "concat inputs ", shapeString(first->getShape()),
                                 " and ", shapeString(t->getShape()),
                                 " differ outside axis ", *axis);
      }
    }
  }
  return push(inferred, shape, first->getElementType());
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  auto axis = normalizeAxis(loc, adaptor.getAxis(), input->getRank());
  if (failed(axis))
    return failure();
  int64_t total = 0;
  for (int64_t s : adaptor.getSizes()) {
    if (s < 0)
      return emitOptionalError(loc, "split sizes must not be negative");
    total += s;
  }
  int64_t dim = input->getDimSize(*axis);
  if (dim != kDyn && total != dim)
    return emitOptionalError(loc, "split sizes add up to ", total,
                             " but the dimension has size ", dim);
  for (int64_t s : adaptor.getSizes()) {
    SmallVector<int64_t> shape(input->getShape());
    shape[*axis] = s;
    inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  }
  return success();
}

LogicalResult ExpandOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  SmallVector<int64_t> shape;
  if (failed(hpc::detail::broadcastShapes(input->getShape(), adaptor.getShape(), shape)))
    return emitOptionalError(loc, "cannot expand ", shapeString(input->getShape()),
                             " to ", shapeString(adaptor.getShape()));
  return push(inferred, shape, input->getElementType());
}

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  SmallVector<int64_t> shape;
  ArrayRef<int64_t> axes = adaptor.getAxes();
  for (int64_t a : axes)
    if (a < 0 || a >= input->getRank())
      return emitOptionalError(loc, "squeeze axis ", a, " is out of range for rank ",
                               input->getRank());
  for (int64_t d = 0; d < input->getRank(); ++d) {
    if (llvm::is_contained(axes, d)) {
      if (input->getDimSize(d) != 1 && input->getDimSize(d) != kDyn)
        return emitOptionalError(loc, "cannot squeeze dimension ", d, " of size ",
                                 input->getDimSize(d));
      continue;
    }
    shape.push_back(input->getDimSize(d));
  }
  return push(inferred, shape, input->getElementType());
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  ArrayRef<int64_t> axes = adaptor.getAxes();
  int64_t rank = input->getRank() + axes.size();
  // Check the axes before reading the input shape: with a duplicate or an
  // out-of-range axis, too few result dims are 1 and the walk below would
  // read past the end of the input shape.
  if (llvm::any_of(axes, [&](int64_t a) { return a < 0 || a >= rank; }) ||
      llvm::SmallSet<int64_t, 8>(axes.begin(), axes.end()).size() != axes.size())
    return emitOptionalError(loc, "unsqueeze axes ", shapeString(axes),
                             " are not distinct result dimensions of rank ", rank);
  SmallVector<int64_t> shape;
  const int64_t *next = input->getShape().begin();
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(llvm::is_contained(axes, d) ? 1 : *next++);
  return push(inferred, shape, input->getElementType());
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  int64_t rank = input->getRank();
  ArrayRef<int64_t> pads = adaptor.getPads();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return emitOptionalError(loc, "pads need ", 2 * rank, " entries, got ", pads.size());
  StringRef mode = adaptor.getMode();
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return emitOptionalError(loc, "unknown pad mode \"", mode, "\"");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = input->getDimSize(d);
    int64_t out = dim == kDyn ? kDyn : dim + pads[d] + pads[d + rank];
    if (out != kDyn && out < 0)
      return emitOptionalError(loc, "pads crop dimension ", d, " below zero");
    shape.push_back(out);
  }
  return push(inferred, shape, input->getElementType());
}

LogicalResult TileOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  ArrayRef<int64_t> repeats = adaptor.getRepeats();
  if (static_cast<int64_t>(repeats.size()) != input->getRank())
    return emitOptionalError(loc, "repeats need one entry per dimension");
  SmallVector<int64_t> shape;
  for (auto [d, r] : llvm::zip(input->getShape(), repeats)) {
    if (r < 0)
      return emitOptionalError(loc, "repeats must not be negative");
    shape.push_back(mulDim(d, r));
  }
  return push(inferred, shape, input->getElementType());
}

LogicalResult ResizeOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  if (failed(input))
    return failure();
  int64_t rank = input->getRank();
  if (static_cast<int64_t>(adaptor.getSizes().size()) != rank ||
      static_cast<int64_t>(adaptor.getScales().size()) != rank)
    return emitOptionalError(loc, "sizes and scales need one entry per dimension");
  if (adaptor.getMode() != "nearest" && adaptor.getMode() != "linear")
    return emitOptionalError(loc, "resize mode must be \"nearest\" or \"linear\", got \"",
                             adaptor.getMode(), "\"");
  static constexpr StringLiteral kCoordModes[] = {
      "half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
      "tf_half_pixel_for_nn", "half_pixel_symmetric"};
  if (!llvm::is_contained(kCoordModes, adaptor.getCoordinateTransformationMode()))
    return emitOptionalError(loc, "unsupported coordinate_transformation_mode \"",
                             adaptor.getCoordinateTransformationMode(), "\"");
  static constexpr StringLiteral kNearestModes[] = {
      "round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (!llvm::is_contained(kNearestModes, adaptor.getNearestMode()))
    return emitOptionalError(loc, "unsupported nearest_mode \"",
                             adaptor.getNearestMode(), "\"");
  for (auto [s, f] : llvm::zip(adaptor.getSizes(), adaptor.getScales()))
    if (s <= 0 || f <= 0)
      return emitOptionalError(loc, "resize sizes and scales must be positive");
  return push(inferred, adaptor.getSizes(), input->getElementType());
}

//===----------------------------------------------------------------------===//
// Training ops (HPCTrainOps.td)
//===----------------------------------------------------------------------===//

ParseResult VariableOp::parse(OpAsmParser &parser, OperationState &result) {
  return parseNamedTensor(parser, result);
}

void VariableOp::print(OpAsmPrinter &p) {
  printNamedTensor(p, *this, getNameAttr(), getValue());
}

LogicalResult VariableOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty name");
  if (getRole() != "param" && getRole() != "buffer" && getRole() != "optimizer" &&
      getRole() != "rng" && getRole() != "error_feedback")
    return emitOpError("role must be \"param\", \"buffer\", \"optimizer\", \"rng\" or "
                       "\"error_feedback\", got \"")
           << getRole() << "\"";
  if (auto value = getValue())
    if (value->getType() != getType())
      return emitOpError("value type ") << value->getType()
                                        << " does not match result type " << getType();
  return success();
}

/// The update ops' state and gradient operands all have the parameter's type.
static LogicalResult checkSameAsParam(Operation *op, Value param,
                                      ArrayRef<std::pair<Value, StringRef>> others) {
  for (auto [v, what] : others)
    if (v && v.getType() != param.getType())
      return op->emitOpError() << what << " type " << v.getType()
                               << " does not match the parameter type " << param.getType();
  return success();
}

/// An update's clip operands: none, or the norm and the max norm.
static LogicalResult checkClip(Operation *op, ValueRange clip) {
  if (!clip.empty() && clip.size() != 2)
    return op->emitOpError("clip takes the gradient norm and the max norm, got ")
           << clip.size() << " operand" << (clip.size() == 1 ? "" : "s");
  return success();
}

LogicalResult SGDUpdateOp::verify() {
  if (failed(checkClip(*this, getClip())))
    return failure();
  if (getMomentum().convertToDouble() != 0 && !getMomentumBuffer())
    return emitOpError("momentum ") << getMomentum().convertToDouble() << " needs a momentum buffer";
  if (getNesterov() && getMomentum().convertToDouble() == 0)
    return emitOpError("nesterov needs a non-zero momentum");
  return checkSameAsParam(*this, getParam(),
                          {{getGrad(), "gradient"}, {getMomentumBuffer(), "momentum buffer"}});
}

LogicalResult AdamWUpdateOp::verify() {
  if (failed(checkClip(*this, getClip())))
    return failure();
  if (getBeta1().convertToDouble() < 0 || getBeta1().convertToDouble() >= 1 || getBeta2().convertToDouble() < 0 || getBeta2().convertToDouble() >= 1)
    return emitOpError("betas must be in [0, 1), got ") << getBeta1().convertToDouble() << ", " << getBeta2().convertToDouble();
  if (getEps().convertToDouble() < 0)
    return emitOpError("eps must not be negative");
  return checkSameAsParam(*this, getParam(),
                          {{getGrad(), "gradient"},
                           {getExpAvg(), "exp_avg"},
                           {getExpAvgSq(), "exp_avg_sq"}});
}

SmallVector<unsigned> hpc::inPlaceOperands(Operation *op) {
  if (auto sgd = dyn_cast<SGDUpdateOp>(op))
    return sgd.getMomentumBuffer() ? SmallVector<unsigned>{0, 3} : SmallVector<unsigned>{0};
  if (isa<AdamWUpdateOp>(op))
    return {0, 2, 3};
  if (isa<AssignOp>(op))
    return {0};
  return {};
}

namespace {

bool isRankedWeight(Value v, int64_t rank) {
  return v.getDefiningOp<WeightOp>() && cast<RankedTensorType>(v.getType()).getRank() == rank;
}

int64_t lastDimOf(Value x) { return cast<RankedTensorType>(x.getType()).getShape().back(); }

} // namespace

std::optional<hpc::SplitProjection> hpc::matchSplitProjection(SplitOp split) {
  auto type = cast<RankedTensorType>(split.getInput().getType());
  int64_t rank = type.getRank();
  int64_t axis = int64_t(split.getAxis());
  if (axis < 0)
    axis += rank;
  if (axis != rank - 1)
    return std::nullopt;
  SplitProjection p;
  Value v = split.getInput();
  if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
    if (!v.hasOneUse() || lastDimOf(reshape.getInput()) != lastDimOf(v))
      return std::nullopt;
    p.reshape = reshape;
    v = reshape.getInput();
  }
  if (!v.hasOneUse())
    return std::nullopt;
  int64_t n = lastDimOf(v);
  if (auto add = v.getDefiningOp<AddOp>()) {
    for (auto [a, b] : {std::pair(add.getLhs(), add.getRhs()),
                        std::pair(add.getRhs(), add.getLhs())}) {
      auto mm = a.getDefiningOp<MatMulOp>();
      if (mm && a.hasOneUse() && isRankedWeight(b, 1) && lastDimOf(b) == n) {
        p.op = mm;
        p.add = add;
        p.bias = b;
      }
    }
  } else if (auto mm = v.getDefiningOp<MatMulOp>()) {
    p.op = mm;
  } else if (auto gemm = v.getDefiningOp<GemmOp>()) {
    Value c = gemm.getC();
    if (gemm.getTransA() || (c && !(isRankedWeight(c, 1) && lastDimOf(c) == n)))
      return std::nullopt;
    p.op = gemm;
    p.bias = c;
    p.transposed = gemm.getTransB();
  }
  if (!p.op || !isRankedWeight(p.op->getOperand(1), 2))
    return std::nullopt;
  p.weight = p.op->getOperand(1);
  return p;
}

bool hpc::isViewOp(Operation *op) {
  return isa<ReshapeOp, SqueezeOp, UnsqueezeOp, DropoutOp>(op);
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                          Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  inferred.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult DropoutOp::verify() {
  double r = getRatio().convertToDouble();
  if (!(r >= 0 && r < 1))
    return emitOpError("ratio must be in [0, 1), got ") << r;
  return success();
}

LogicalResult DropoutMaskOp::verify() {
  double r = getRatio().convertToDouble();
  if (!(r >= 0 && r < 1))
    return emitOpError("ratio must be in [0, 1), got ") << r;
  if (!getType().hasStaticShape())
    return emitOpError("needs a static result shape");
  return success();
}

LogicalResult AssignOp::verify() {
  if (getValue().getType() != getTarget().getType())
    return emitOpError("value type ") << getValue().getType() << " does not match the target type "
                                      << getTarget().getType();
  return success();
}

LogicalResult ConvWeightGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                 Adaptor adaptor,
                                                 SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, adaptor.getInput().getType(), "input");
  auto dy = ranked(loc, adaptor.getGradOutput().getType(), "grad_output");
  if (failed(input) || failed(dy))
    return failure();
  int64_t spatial = input->getRank() - 2;
  if (spatial < 1 || dy->getRank() != input->getRank())
    return emitOptionalError(loc, "input and grad_output must be [N, C, D...] and "
                                  "[N, M, O...] of one rank");
  ArrayRef<int64_t> kernel = adaptor.getKernelShape();
  if (int64_t(kernel.size()) != spatial)
    return emitOptionalError(loc, "kernel_shape needs one entry per spatial dimension");
  if (failed(checkWindowAttrs(loc, spatial, kernel, adaptor.getStrides(), adaptor.getPads(),
                              adaptor.getDilations())))
    return failure();
  int64_t group = adaptor.getGroup();
  int64_t c = input->getDimSize(1), m = dy->getDimSize(1);
  if (group < 1 || c % group != 0 || m % group != 0)
    return emitOptionalError(loc, "channels ", c, " and ", m,
                             " must be divisible by group ", group);
  if (input->getDimSize(0) != dy->getDimSize(0))
    return emitOptionalError(loc, "input and grad_output have different batch sizes");
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t out = windowOutput(input->getDimSize(i + 2), kernel[i], adaptor.getStrides()[i],
                               adaptor.getPads()[i], adaptor.getPads()[i + spatial],
                               adaptor.getDilations()[i], false);
    if (out != dy->getDimSize(i + 2))
      return emitOptionalError(loc, "grad_output spatial dimension ", i, " is ",
                               dy->getDimSize(i + 2), " but the convolution gives ", out);
  }
  SmallVector<int64_t> shape{m, c / group};
  shape.append(kernel.begin(), kernel.end());
  return push(inferred, shape, input->getElementType());
}

/// A pooling gradient: grad_output must have the pooling's result type; the
/// result has the input's.
static LogicalResult inferPoolGrad(std::optional<Location> loc, Type input, Type gradOutput,
                                   ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                                   ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                                   bool ceilMode, SmallVectorImpl<Type> &inferred) {
  SmallVector<Type> forward;
  if (failed(hpc::detail::inferPool(loc, input, kernel, strides, pads, dilations, ceilMode,
                                    forward)))
    return failure();
  if (forward.front() != gradOutput)
    return emitOptionalError(loc, "grad_output type ", gradOutput,
                             " is not the pooling's result type ", forward.front());
  inferred.push_back(input);
  return success();
}

LogicalResult MaxPoolGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor a, SmallVectorImpl<Type> &inferred) {
  return inferPoolGrad(loc, a.getInput().getType(), a.getGradOutput().getType(),
                       a.getKernelShape(), a.getStrides(), a.getPads(), a.getDilations(),
                       a.getCeilMode(), inferred);
}

LogicalResult AvgPoolGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor a, SmallVectorImpl<Type> &inferred) {
  return inferPoolGrad(loc, a.getInput().getType(), a.getGradOutput().getType(),
                       a.getKernelShape(), a.getStrides(), a.getPads(), a.getDilations(),
                       a.getCeilMode(), inferred);
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                Adaptor a, SmallVectorImpl<Type> &inferred) {
  auto input = ranked(loc, a.getInput().getType(), "input");
  if (failed(input))
    return failure();
  auto axis = normalizeAxis(loc, a.getAxis(), input->getRank());
  if (failed(axis))
    return failure();
  auto scale = cast<RankedTensorType>(a.getScale().getType());
  if (scale.getShape() != input->getShape().drop_front(*axis) ||
      scale.getElementType() != input->getElementType())
    return emitOptionalError(loc, "scale type ", scale,
                             " is not the input's normalized dims of ", *input);
  if (a.getGradOutput().getType() != *input)
    return emitOptionalError(loc, "grad_output type ", a.getGradOutput().getType(),
                             " is not the input type ", *input);
  inferred.push_back(*input);
  return success();
}

LogicalResult GeluGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                           Adaptor a, SmallVectorImpl<Type> &inferred) {
  if (a.getInput().getType() != a.getGradOutput().getType())
    return emitOptionalError(loc, "grad_output type ", a.getGradOutput().getType(),
                             " is not the input type ", a.getInput().getType());
  inferred.push_back(a.getInput().getType());
  return success();
}

LogicalResult GeluGradOp::verify() { return verifyGeluApproximate(*this, getApproximate()); }

#define GET_OP_CLASSES
#include "HPC/HPCOps.cpp.inc"
