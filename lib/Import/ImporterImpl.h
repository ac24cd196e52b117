//===- ImporterImpl.h - internals shared by the ONNX importer ----*- C++ -*-===//
//
// The Importer holds the state of one import: the ModelProto, the values made
// so far, the initializers, and the current node for error messages. The
// model-level code (loading, tensors, graph walk) is in ONNXImporter.cpp; the
// checks of the whole model that run before anything trusts it are in
// ONNXValidate.cpp; one converter per ONNX op type lives in ONNXOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef HPC_LIB_IMPORT_IMPORTERIMPL_H
#define HPC_LIB_IMPORT_IMPORTERIMPL_H

#include "HPC/HPCOps.h"
#include "hpc/Import/ONNXImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include "onnx/onnx_pb.h"

#include <functional>

namespace hpc::detail {

using mlir::Attribute;
using mlir::FailureOr;
using mlir::LogicalResult;
using mlir::NamedAttribute;
using mlir::Type;
using mlir::Value;
using llvm::ArrayRef;
using llvm::SmallVector;
using llvm::StringRef;

/// Lowest and highest default-domain opset the importer handles. Opset 6 is
/// accepted beyond the 7..21 contract because many exported models use it;
/// its legacy broadcast attributes are handled by the converters.
constexpr int64_t kMinOpset = 6;
constexpr int64_t kMaxOpset = 21;

/// Newest ONNX IR version the importer reads: that of the onnx the tests
/// check models with (the test venv's onnx 1.23).
constexpr int64_t kMaxIRVersion = 14;

/// Most elements a tensor of the model may have (inputs, initializers, node
/// results): element and byte counts below it never overflow int64.
constexpr int64_t kMaxElements = int64_t(1) << 48;

class Importer {
public:
  Importer(mlir::MLIRContext &context, const ImportOptions &options,
           std::string path);

  /// Runs the whole import; on failure `error()` holds the one-line reason.
  mlir::OwningOpRef<mlir::ModuleOp> run();
  const std::string &error() const { return errorText; }

  //===--- Used by the op converters ---------------------------------------===//

  /// Records an error about the current node (or the model) and fails.
  LogicalResult fail(const llvm::Twine &message);

  const onnx::NodeProto &node() const { return *current; }
  int64_t opset() const { return opsetVersion; }
  mlir::OpBuilder &builder() { return b; }
  mlir::MLIRContext *context() { return &ctx; }
  mlir::Location loc() const { return currentLoc; }

  /// Whether input `i` of the current node is present (not "" or missing).
  bool hasInput(int i) const;
  /// Whether output `i` of the current node is present and named.
  bool hasOutput(int i) const;
  /// Input `i` as a value; fails if it is absent or unknown.
  FailureOr<Value> input(int i);
  /// Input `i` as a value, or a null value when the optional input is absent.
  FailureOr<Value> optionalInput(int i) {
    return hasInput(i) ? input(i) : FailureOr<Value>(Value());
  }
  /// Input `i` as a compile-time constant (initializer, folded constant, or a
  /// bound test input); null attribute when it is not one.
  FailureOr<mlir::DenseElementsAttr> constantInput(int i);
  /// Input `i` as integers; fails when it is not a compile-time constant.
  FailureOr<SmallVector<int64_t>> intsInput(int i, StringRef what);
  /// Input `i` as one floating-point scalar; fails when not constant.
  FailureOr<double> scalarInput(int i, StringRef what);

  const onnx::AttributeProto *attr(StringRef name) const;
  /// Attribute values; an attribute of another type than the one read is an
  /// error of the node (recorded; the node's import then fails) and reads
  /// as the default.
  int64_t attrInt(StringRef name, int64_t dflt);
  /// An INT attribute that is a flag: 0 or 1, anything else is an error.
  bool attrBool(StringRef name, bool dflt);
  double attrFloat(StringRef name, double dflt);
  std::string attrString(StringRef name, StringRef dflt);
  SmallVector<int64_t> attrInts(StringRef name);

  /// Binds output `i` of the current node to `v`.
  void setOutput(int i, Value v);

  /// Builds op `OpTy` with inferred result types and folds it; fails with the
  /// inference diagnostic when the operands and attributes do not fit.
  template <typename OpTy>
  FailureOr<SmallVector<Value>> createMulti(mlir::ValueRange operands,
                                            ArrayRef<NamedAttribute> attrs = {}) {
    return createGeneric(mlir::OperationName(OpTy::getOperationName(), &ctx),
                         [](mlir::MLIRContext *c, std::optional<mlir::Location> l,
                            mlir::ValueRange o, mlir::DictionaryAttr a,
                            mlir::OpaqueProperties p, mlir::RegionRange r,
                            SmallVectorImpl<Type> &t) {
                           return OpTy::inferReturnTypes(c, l, o, a, p, r, t);
                         },
                         operands, attrs);
  }
  template <typename OpTy>
  FailureOr<Value> create(mlir::ValueRange operands,
                          ArrayRef<NamedAttribute> attrs = {}) {
    auto results = createMulti<OpTy>(operands, attrs);
    if (mlir::failed(results))
      return mlir::failure();
    return (*results)[0];
  }

  /// An hpc.constant holding the data of `t` (a Constant node's value).
  FailureOr<Value> constantValueOf(const onnx::TensorProto &t);
  /// A constant of the given element type and shape, every element `value`.
  Value splat(Type elementType, ArrayRef<int64_t> shape, double value);
  /// A constant holding `values` as an i64 tensor of the given shape.
  Value i64Constant(ArrayRef<int64_t> values, ArrayRef<int64_t> shape);

  /// hpc element type of an ONNX TensorProto data type.
  FailureOr<Type> elementType(int32_t onnxType, StringRef what);

  NamedAttribute named(StringRef name, Attribute value) {
    return b.getNamedAttr(name, value);
  }
  NamedAttribute i64Array(StringRef name, ArrayRef<int64_t> v) {
    return named(name, b.getDenseI64ArrayAttr(v));
  }
  NamedAttribute i64(StringRef name, int64_t v) {
    return named(name, b.getI64IntegerAttr(v));
  }
  NamedAttribute f64(StringRef name, double v) {
    return named(name, b.getF64FloatAttr(v));
  }
  NamedAttribute boolean(StringRef name, bool v) {
    return named(name, b.getBoolAttr(v));
  }
  NamedAttribute str(StringRef name, StringRef v) {
    return named(name, b.getStringAttr(v));
  }

  /// Diagnostic text captured while building an op.
  std::string diagnostic;

private:
  using InferFn = std::function<LogicalResult(
      mlir::MLIRContext *, std::optional<mlir::Location>, mlir::ValueRange,
      mlir::DictionaryAttr, mlir::OpaqueProperties, mlir::RegionRange,
      SmallVectorImpl<Type> &)>;
  FailureOr<SmallVector<Value>> createGeneric(mlir::OperationName name,
                                              InferFn infer,
                                              mlir::ValueRange operands,
                                              ArrayRef<NamedAttribute> attrs);

  LogicalResult load();
  LogicalResult checkOpset();
  LogicalResult checkSupportedOps();
  /// Checks the whole model before ONNX's shape inference or any converter
  /// reads it (ONNXValidate.cpp): validateGraph, then validateNode of each.
  LogicalResult validateModel();
  /// Value names, initializers, graph outputs and declared types.
  LogicalResult validateGraph();
  /// A node against its op schema: counts, attribute types, required
  /// attributes, window attributes.
  LogicalResult validateNode(const onnx::NodeProto &n);
  /// Element type, dims, element count and data size of a tensor; its size
  /// in bytes.
  FailureOr<int64_t> checkTensor(const onnx::TensorProto &t);
  struct ExternalData {
    std::string location;
    int64_t offset = 0, length = 0;
  };
  /// The external data entries of `t`, parsed strictly.
  FailureOr<ExternalData> externalData(const onnx::TensorProto &t, int64_t expectedBytes);
  void runONNXShapeInference();
  /// Indexes initializers and inputs, fixes input dims, runs ONNX inference.
  LogicalResult prepareGraph();
  LogicalResult importNode(const onnx::NodeProto &n);
  LogicalResult checkAgainstONNX(const onnx::NodeProto &n);
  /// The element types of a node's inputs and outputs against its schema's
  /// type constraints (ONNXValidate.cpp; runs once the node is imported).
  LogicalResult checkNodeTypes(const onnx::NodeProto &n);
  /// ONNX data type of a value imported so far or of an initializer; 0 if
  /// unknown.
  int32_t dataTypeOf(StringRef name) const;
  /// The types the model declares (graph outputs, value_info) against ours.
  LogicalResult checkDeclaredTypes(const onnx::NodeProto &n);
  /// An attribute of the current node if it has `type`; null if absent.
  const onnx::AttributeProto *typedAttr(StringRef name, int type);
  FailureOr<mlir::RankedTensorType> inputType(const onnx::ValueInfoProto &vi);
  /// Value of an initializer used as an operand: hpc.weight or hpc.constant.
  FailureOr<Value> materializeInitializer(const onnx::TensorProto &t);
  /// The data of a tensor as an attribute; `allowResource` stores large data
  /// as a dense_resource blob.
  FailureOr<mlir::ElementsAttr> tensorData(const onnx::TensorProto &t,
                                           bool allowResource);
  /// The external data of `t`: a regular file inside the model's folder
  /// once links are resolved, read exactly. With `read` false (--shapes-only)
  /// only checked, and a missing file is no error.
  FailureOr<std::string> externalBytes(const onnx::TensorProto &t,
                                       int64_t expectedBytes, bool read = true);
  FailureOr<mlir::DenseElementsAttr> boundInput(StringRef name);

  mlir::MLIRContext &ctx;
  const ImportOptions &options;
  std::string path, modelDir;
  onnx::ModelProto model;
  int64_t opsetVersion = 0;
  mlir::OpBuilder b;
  mlir::Location currentLoc;
  const onnx::NodeProto *current = nullptr;
  std::string errorText;
  llvm::StringMap<Value> values;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<int> graphInputIndex;
  llvm::StringMap<onnx::TypeProto> onnxTypes;
  /// Declared types by value name (graph outputs, then value_info).
  llvm::StringMap<const onnx::ValueInfoProto *> declared;
  mlir::Block *entry = nullptr;
};

/// A converter turns the current node into hpc ops.
using Converter = LogicalResult (*)(Importer &);

/// The converter of an ONNX op type (default domain), or null.
Converter findConverter(StringRef opType);

/// Number of elements of a static shape.
int64_t numElements(ArrayRef<int64_t> shape);

/// The name of an AttributeProto type ("INTS"), or "type N" when unknown.
std::string attributeTypeName(int type);

/// Number of elements of `shape` in checked arithmetic: false when a dim is
/// negative or the count overflows or passes kMaxElements.
bool checkedNumElements(ArrayRef<int64_t> shape, int64_t &n);

} // namespace hpc::detail

#endif // HPC_LIB_IMPORT_IMPORTERIMPL_H
