//===- ONNXValidate.cpp - checks of a model before anything trusts it -----===//
//
// Everything the importer, ONNX's shape inference and the op converters rely
// on is checked here first, so that a malformed model ends in one error line
// rather than a crash or a silent wrong answer:
//   * graph structure: every node input is a graph input, an initializer, an
//     earlier node's output or "" (absent optional); value names are defined
//     once; graph outputs are produced; declared types are well formed;
//   * nodes against their op schema: input and output counts, attribute
//     types, required and unknown attributes, window attributes in range;
//   * tensors (initializers, tensor attributes): element types, dimensions
//     and element counts in checked arithmetic, data of exactly the size the
//     shape needs, well-formed external data entries.
// One check needs the types our import gives: a node's input and output
// element types against its schema's type constraints (checkNodeTypes, run
// as each node is imported). Files are not touched here: external data is
// opened when it is read (externalBytes), so --shapes-only never needs the
// weights.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include "onnx/defs/schema.h"

using namespace mlir;
using namespace hpc;
using namespace hpc::detail;

bool hpc::detail::checkedNumElements(ArrayRef<int64_t> shape, int64_t &n) {
  n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      return false;
  return true;
}

std::string hpc::detail::attributeTypeName(int type) {
  if (!onnx::AttributeProto::AttributeType_IsValid(type))
    return "type " + std::to_string(type);
  return onnx::AttributeProto::AttributeType_Name(
      static_cast<onnx::AttributeProto::AttributeType>(type));
}

/// The kind of value an attribute holds, judged by its fields alone; -1 when
/// it holds several kinds, UNDEFINED when none.
static int attrKindOfFields(const onnx::AttributeProto &a) {
  using A = onnx::AttributeProto;
  int kind = A::UNDEFINED, count = 0;
  auto see = [&](bool present, int k) {
    if (present) {
      kind = k;
      ++count;
    }
  };
  see(a.has_f(), A::FLOAT);
  see(a.has_i(), A::INT);
  see(a.has_s(), A::STRING);
  see(a.has_t(), A::TENSOR);
  see(a.has_g(), A::GRAPH);
  see(a.has_sparse_tensor(), A::SPARSE_TENSOR);
  see(a.has_tp(), A::TYPE_PROTO);
  see(a.floats_size() > 0, A::FLOATS);
  see(a.ints_size() > 0, A::INTS);
  see(a.strings_size() > 0, A::STRINGS);
  see(a.tensors_size() > 0, A::TENSORS);
  see(a.graphs_size() > 0, A::GRAPHS);
  see(a.sparse_tensors_size() > 0, A::SPARSE_TENSORS);
  see(a.type_protos_size() > 0, A::TYPE_PROTOS);
  return count > 1 ? -1 : kind;
}

static bool isListKind(int kind) {
  using A = onnx::AttributeProto;
  return kind == A::FLOATS || kind == A::INTS || kind == A::STRINGS ||
         kind == A::TENSORS || kind == A::GRAPHS || kind == A::SPARSE_TENSORS ||
         kind == A::TYPE_PROTOS;
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

/// A strict non-negative decimal integer: digits only, no sign or spaces.
static bool parseNonNegative(StringRef text, int64_t &value) {
  if (text.empty() || !llvm::all_of(text, llvm::isDigit))
    return false;
  return !text.getAsInteger(10, value) && value >= 0;
}

FailureOr<Importer::ExternalData>
Importer::externalData(const onnx::TensorProto &t, int64_t expectedBytes) {
  std::string what = "tensor '" + t.name() + "'";
  ExternalData ext;
  ext.length = expectedBytes;
  llvm::StringSet<> seen;
  for (const auto &kv : t.external_data()) {
    if (!seen.insert(kv.key()).second)
      return fail(what + ": external data key '" + kv.key() + "' is given twice");
    if (kv.key() == "location") {
      ext.location = kv.value();
    } else if (kv.key() == "offset") {
      if (!parseNonNegative(kv.value(), ext.offset))
        return fail(what + ": external data offset '" + kv.value() +
                    "' is not a non-negative integer");
    } else if (kv.key() == "length") {
      int64_t length;
      if (!parseNonNegative(kv.value(), length))
        return fail(what + ": external data length '" + kv.value() +
                    "' is not a non-negative integer");
      if (length != expectedBytes)
        return fail(what + ": external data length " + llvm::Twine(length) +
                    " does not match its shape (" + llvm::Twine(expectedBytes) +
                    " bytes)");
    } else if (kv.key() != "checksum") {
      return fail(what + ": unknown external data key '" + kv.key() + "'");
    }
  }
  SmallVector<StringRef> parts;
  StringRef(ext.location).split(parts, '/');
  if (ext.location.empty() || llvm::sys::path::is_absolute(ext.location) ||
      llvm::is_contained(parts, ".."))
    return fail(what + ": external data location '" + ext.location +
                "' must be a relative path inside the model folder");
  int64_t end;
  if (__builtin_add_overflow(ext.offset, ext.length, &end))
    return fail(what + ": external data offset " + llvm::Twine(ext.offset) +
                " is too large");
  return ext;
}

FailureOr<int64_t> Importer::checkTensor(const onnx::TensorProto &t) {
  std::string what = "tensor '" + t.name() + "'";
  auto elt = elementType(t.data_type(), what);
  if (failed(elt))
    return failure();
  for (int64_t d : t.dims())
    if (d < 0)
      return fail(what + " has a negative dimension");
  int64_t n;
  if (!checkedNumElements(SmallVector<int64_t>(t.dims().begin(), t.dims().end()), n))
    return fail(what + " is too large (more than 2^48 elements)");
  int64_t eltBytes = elt->isInteger(1) ? 1 : elt->getIntOrFloatBitWidth() / 8;
  int64_t bytes = n * eltBytes; // < 2^51: no overflow

  // The number of values in the typed field this data type uses, and
  // whether any other field holds data too.
  using T = onnx::TensorProto;
  int64_t typed = 0;
  switch (t.data_type()) {
  case T::FLOAT: typed = t.float_data_size(); break;
  case T::DOUBLE: typed = t.double_data_size(); break;
  case T::INT64: typed = t.int64_data_size(); break;
  case T::UINT32:
  case T::UINT64: typed = t.uint64_data_size(); break;
  default: typed = t.int32_data_size(); break; // the narrow types and bool
  }
  int64_t fields = (t.float_data_size() > 0) + (t.double_data_size() > 0) +
                   (t.int64_data_size() > 0) + (t.uint64_data_size() > 0) +
                   (t.int32_data_size() > 0) + (t.string_data_size() > 0) +
                   t.has_raw_data();
  if (t.data_location() == T::EXTERNAL) {
    if (fields)
      return fail(what + " is stored externally but also holds data in the model");
    if (failed(externalData(t, bytes)))
      return failure();
    return bytes;
  }
  if (fields > 1)
    return fail(what + " holds data in more than one field");
  int64_t held = t.has_raw_data() ? int64_t(t.raw_data().size())
                 : typed          ? typed * eltBytes
                 : fields         ? -1
                                  : 0;
  if (held < 0)
    return fail(what + " holds its data in a field its element type does not use");
  if (held != bytes)
    return fail(what + " holds " + llvm::Twine(held) +
                " bytes of data but its shape needs " + llvm::Twine(bytes));
  return bytes;
}

//===----------------------------------------------------------------------===//
// Graph and nodes
//===----------------------------------------------------------------------===//

/// Checks a declared type (value_info, graph output) where one is given.
static std::string checkDeclaredType(const onnx::ValueInfoProto &vi) {
  if (!vi.has_type())
    return "";
  if (!vi.type().has_tensor_type())
    return "is declared as a non-tensor type";
  const auto &tt = vi.type().tensor_type();
  if (tt.elem_type() != 0 && !onnx::TensorProto::DataType_IsValid(tt.elem_type()))
    return "is declared with unknown element type " + std::to_string(tt.elem_type());
  for (const auto &d : tt.shape().dim())
    if (d.has_dim_value() && d.dim_value() < 0)
      return "is declared with a negative dimension";
  return "";
}

LogicalResult Importer::validateGraph() {
  const auto &graph = model.graph();
  if (graph.sparse_initializer_size())
    return fail("sparse initializers are not supported");
  // Every name a node may read, and the nodes that produce each name.
  llvm::StringSet<> defined, inputs;
  for (const auto &t : graph.initializer()) {
    if (!defined.insert(t.name()).second)
      return fail("initializer '" + t.name() + "' is defined twice");
    if (failed(checkTensor(t)))
      return failure();
  }
  for (const auto &vi : graph.input()) {
    if (!inputs.insert(vi.name()).second)
      return fail("graph input '" + vi.name() + "' is listed twice");
    defined.insert(vi.name());
  }
  llvm::StringMap<int> producer;
  for (const auto &[i, n] : llvm::enumerate(graph.node()))
    for (const auto &o : n.output())
      producer.try_emplace(o, int(i));

  for (const auto &[i, n] : llvm::enumerate(graph.node())) {
    current = &n;
    for (const auto &in : n.input()) {
      if (in.empty() || defined.contains(in))
        continue;
      auto p = producer.find(in);
      if (p == producer.end())
        return fail("input '" + in + "' is not produced by any earlier node");
      if (p->second == int(i))
        return fail("input '" + in + "' is an output of the same node (a self-loop)");
      return fail("input '" + in + "' is produced by a later node (the graph has a "
                  "cycle or is not in topological order)");
    }
    for (const auto &o : n.output()) {
      if (o.empty())
        continue;
      if (!defined.insert(o).second)
        return fail("output '" + o + "' is already defined (value names must be unique)");
    }
  }
  current = nullptr;

  for (const auto &out : graph.output()) {
    if (!defined.contains(out.name()))
      return fail("graph output '" + out.name() + "' is not produced by any node");
    if (std::string why = checkDeclaredType(out); !why.empty())
      return fail("graph output '" + out.name() + "' " + why);
  }
  // Declared types of intermediate values: one declaration each, of a value
  // the graph has.
  declared.clear();
  for (const auto &out : graph.output())
    declared.try_emplace(out.name(), &out);
  for (const auto &vi : graph.value_info()) {
    if (std::string why = checkDeclaredType(vi); !why.empty())
      return fail("value_info '" + vi.name() + "' " + why);
    auto [it, inserted] = declared.try_emplace(vi.name(), &vi);
    if (!inserted && it->second->type().SerializeAsString() != vi.type().SerializeAsString())
      return fail("value_info '" + vi.name() + "' conflicts with another declaration of it");
  }
  return success();
}

/// Ops whose inputs or attributes changed in opsets 18 to 21 (onnx's
/// changelog), beyond onnx 1.12's schemas, which end at opset 17.
static constexpr StringLiteral kChangedAfter17[] = {
    "AveragePool", "Cast", "CastLike", "Col2Im", "GroupNormalization", "LpPool",
    "Pad", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSumSquare", "Resize",
    "ScatterElements", "ScatterND", "Split"};

/// The attributes those ops gained (or lost) in opsets 18 to 21.
struct AttributeChange {
  StringLiteral op, attribute;
  int since;
  bool added;
};
static constexpr AttributeChange kAttributeChangesAfter17[] = {
    {"Split", "num_outputs", 18, true},
    {"Resize", "antialias", 18, true},
    {"Resize", "axes", 18, true},
    {"Resize", "keep_aspect_ratio_policy", 18, true},
    {"LpPool", "ceil_mode", 18, true},
    {"LpPool", "dilations", 18, true},
    {"AveragePool", "dilations", 19, true},
    {"Cast", "saturate", 19, true},
    {"CastLike", "saturate", 19, true},
    {"GroupNormalization", "stash_type", 21, true},
    {"ReduceL1", "axes", 18, false},
    {"ReduceL1", "noop_with_empty_axes", 18, true},
    {"ReduceL2", "axes", 18, false},
    {"ReduceL2", "noop_with_empty_axes", 18, true},
    {"ReduceLogSum", "axes", 18, false},
    {"ReduceLogSum", "noop_with_empty_axes", 18, true},
    {"ReduceLogSumExp", "axes", 18, false},
    {"ReduceLogSumExp", "noop_with_empty_axes", 18, true},
    {"ReduceMax", "axes", 18, false},
    {"ReduceMax", "noop_with_empty_axes", 18, true},
    {"ReduceMean", "axes", 18, false},
    {"ReduceMean", "noop_with_empty_axes", 18, true},
    {"ReduceMin", "axes", 18, false},
    {"ReduceMin", "noop_with_empty_axes", 18, true},
    {"ReduceProd", "axes", 18, false},
    {"ReduceProd", "noop_with_empty_axes", 18, true},
    {"ReduceSumSquare", "axes", 18, false},
    {"ReduceSumSquare", "noop_with_empty_axes", 18, true},
};

/// What onnx 1.12 lacks of the schemas of the ops the importer converts:
/// the opset that introduced them, their input and output counts, their
/// attributes.
struct NewerSchema {
  StringLiteral op;
  int since, minInputs, maxInputs, outputs;
  ArrayRef<std::pair<StringLiteral, int>> attributes;
};
static constexpr std::pair<StringLiteral, int> kGeluAttrs[] = {
    {"approximate", onnx::AttributeProto::STRING}};
static constexpr std::pair<StringLiteral, int> kRMSNormAttrs[] = {
    {"axis", onnx::AttributeProto::INT},
    {"epsilon", onnx::AttributeProto::FLOAT},
    {"stash_type", onnx::AttributeProto::INT}};
// RMSNormalization is opset 23, beyond kMaxOpset: it is accepted at every
// opset the importer reads (docs/testing.md, "Fuzzing the importer").
static const NewerSchema kNewerSchemas[] = {
    {"Gelu", 20, 1, 1, 1, kGeluAttrs},
    {"RMSNormalization", 1, 2, 2, 1, kRMSNormAttrs},
};

/// Checks a node whose op onnx 1.12 has no schema for at the model's opset:
/// an op defined only from a later opset, or one of kNewerSchemas. The
/// reason, or "" when it is fine.
static std::string checkWithoutSchema(const onnx::NodeProto &n, int64_t opset) {
  auto notYet = [&](int since) {
    return n.op_type() + " is not defined at opset " + std::to_string(opset) +
           " (ONNX defines it from opset " + std::to_string(since) + ")";
  };
  if (const auto *later = onnx::OpSchemaRegistry::Schema(n.op_type(), kMaxOpset, ""))
    return notYet(later->SinceVersion());
  for (const NewerSchema &newer : kNewerSchemas) {
    if (n.op_type() != newer.op)
      continue;
    if (opset < newer.since)
      return notYet(newer.since);
    if (n.input_size() < newer.minInputs || n.input_size() > newer.maxInputs ||
        n.output_size() != newer.outputs)
      return "has " + std::to_string(n.input_size()) + " inputs and " +
             std::to_string(n.output_size()) + " outputs, but " + n.op_type() + " takes " +
             std::to_string(newer.minInputs) + " to " + std::to_string(newer.maxInputs) +
             " and gives " + std::to_string(newer.outputs);
    for (const auto &a : n.attribute()) {
      const auto *known = llvm::find_if(newer.attributes,
                                        [&](const auto &p) { return p.first == a.name(); });
      if (known == newer.attributes.end())
        return "attribute '" + a.name() + "' is not part of " + n.op_type();
      if (a.type() != known->second)
        return "attribute '" + a.name() + "' is " + attributeTypeName(a.type()) + ", but " +
               n.op_type() + " declares it " + attributeTypeName(known->second);
    }
  }
  return "";
}

/// Checks one attribute: its type field against the value it holds, and
/// against the op's schema (null when onnx 1.12 has none). `fullSchema` is
/// false for an op that changed after opset 17 at a later opset: its
/// attributes are then those of kAttributeChangesAfter17 and of its opset-17
/// schema. The reason, or "" when it is fine.
static std::string checkAttribute(const onnx::AttributeProto &a, const onnx::OpSchema *schema,
                                  bool fullSchema, const onnx::NodeProto &n, int64_t opset,
                                  int64_t irVersion) {
  using A = onnx::AttributeProto;
  if (!a.ref_attr_name().empty())
    return "attribute '" + a.name() + "' refers to a function attribute outside a function";
  int kind = attrKindOfFields(a);
  int type = a.type();
  if (type == A::UNDEFINED && irVersion < 2)
    type = kind; // IR version 1 had no attribute types
  if (type == A::UNDEFINED)
    return "attribute '" + a.name() + "' has no type";
  if (kind == A::UNDEFINED && !isListKind(type))
    return "attribute '" + a.name() + "' of type " + attributeTypeName(type) + " holds no value";
  if (kind != A::UNDEFINED && kind != type)
    return "attribute '" + a.name() + "' of type " + attributeTypeName(type) +
           " holds a value of another type";
  if (a.tensors_size() || a.has_sparse_tensor() || a.sparse_tensors_size() || a.has_g() ||
      a.graphs_size())
    return "attribute '" + a.name() + "' of type " + attributeTypeName(type) +
           " is not supported";
  if (!schema)
    return "";
  const onnx::OpSchema::Attribute *declared = nullptr;
  if (auto it = schema->attributes().find(a.name()); it != schema->attributes().end())
    declared = &it->second;
  std::string op = n.op_type() + "-" + std::to_string(schema->SinceVersion());
  if (!fullSchema) {
    for (const AttributeChange &c : kAttributeChangesAfter17) {
      if (c.op != n.op_type() || c.attribute != a.name() || opset < c.since)
        continue;
      if (!c.added)
        declared = nullptr;
      else
        return ""; // an attribute of a later schema: the converter checks its type
    }
    op = n.op_type() + " at opset " + std::to_string(opset);
  }
  if (!declared)
    return "attribute '" + a.name() + "' is not part of " + op;
  if (declared->type != type)
    return "attribute '" + a.name() + "' is " + attributeTypeName(type) + ", but " + op +
           " declares it " + attributeTypeName(declared->type);
  return "";
}

/// Checks the window attributes of Conv, ConvTranspose and the pools: ONNX
/// divides by strides; kernels, dilations and pads take part in the
/// output-size arithmetic (checked again, in int64, by the converters once
/// the input sizes are known). The reason, or "" when they are fine.
static std::string checkWindow(const onnx::NodeProto &n) {
  static constexpr StringLiteral kWindowOps[] = {"Conv", "ConvTranspose", "MaxPool",
                                                 "AveragePool", "LpPool"};
  if (!llvm::is_contained(kWindowOps, n.op_type()))
    return "";
  const onnx::AttributeProto *autoPad = nullptr, *pads = nullptr;
  for (const auto &a : n.attribute()) {
    if (a.name() == "auto_pad")
      autoPad = &a;
    if (a.name() == "pads")
      pads = &a;
  }
  // ONNX: pads "cannot be used simultaneously with auto_pad"; onnx's own
  // inference then reads the pads, the importer the auto_pad. (Zero pads
  // with VALID mean the same to both.)
  if (autoPad && autoPad->s() != "NOTSET" && pads &&
      (autoPad->s() != "VALID" || llvm::any_of(pads->ints(), [](int64_t p) { return p != 0; })))
    return "pads cannot be given together with auto_pad=" + autoPad->s();
  for (const auto &a : n.attribute()) {
    bool positive = a.name() == "strides" || a.name() == "dilations" ||
                    a.name() == "kernel_shape";
    bool nonNegative = a.name() == "pads" || a.name() == "output_padding";
    for (int64_t v : a.ints()) {
      if (positive && v <= 0)
        return a.name() + " must be positive, got " + std::to_string(v);
      if (nonNegative && v < 0)
        return a.name() + " must not be negative, got " + std::to_string(v);
    }
  }
  return "";
}

LogicalResult Importer::validateNode(const onnx::NodeProto &n) {
  const onnx::OpSchema *schema =
      onnx::OpSchemaRegistry::Schema(n.op_type(), int(opsetVersion), "");
  if (!schema)
    if (std::string why = checkWithoutSchema(n, opsetVersion); !why.empty())
      return fail(why);
  // onnx 1.12 knows schemas up to opset 17. Where an op's inputs or
  // attributes changed in a later opset, the counts are left to the
  // converters; attribute types and required attributes are checked at
  // every opset.
  bool fullSchema = opsetVersion <= 17 || !llvm::is_contained(kChangedAfter17, n.op_type());
  if (schema && fullSchema) {
    std::string op = n.op_type() + "-" + std::to_string(schema->SinceVersion());
    if (n.input_size() < schema->min_input() || n.input_size() > schema->max_input())
      return fail("has " + llvm::Twine(n.input_size()) + " inputs, but " + op + " takes " +
                  llvm::Twine(schema->min_input()) + " to " +
                  llvm::Twine(schema->max_input()));
    if (n.output_size() < schema->min_output() || n.output_size() > schema->max_output())
      return fail("has " + llvm::Twine(n.output_size()) + " outputs, but " + op +
                  " gives " + llvm::Twine(schema->min_output()) + " to " +
                  llvm::Twine(schema->max_output()));
  }
  llvm::StringSet<> names;
  for (const auto &a : n.attribute()) {
    if (!names.insert(a.name()).second)
      return fail("attribute '" + a.name() + "' is given twice");
    if (std::string why = checkAttribute(a, schema, fullSchema, n, opsetVersion,
                                         model.ir_version());
        !why.empty())
      return fail(why);
    if (a.has_t() && failed(checkTensor(a.t())))
      return failure();
  }
  if (schema)
    for (const auto &[name, declared] : schema->attributes())
      if (declared.required && !names.contains(name))
        return fail("required attribute '" + name + "' is missing");
  if (std::string why = checkWindow(n); !why.empty())
    return fail(why);
  return success();
}

/// The ONNX data type of an hpc element type; 0 when there is none.
static int32_t onnxDataType(Type t) {
  using T = onnx::TensorProto;
  if (t.isF32()) return T::FLOAT;
  if (t.isF64()) return T::DOUBLE;
  if (t.isF16()) return T::FLOAT16;
  if (t.isBF16()) return T::BFLOAT16;
  if (t.isInteger(1)) return T::BOOL;
  auto i = dyn_cast<IntegerType>(t);
  if (!i)
    return 0;
  bool u = i.isUnsigned();
  switch (i.getWidth()) {
  case 8: return u ? T::UINT8 : T::INT8;
  case 16: return u ? T::UINT16 : T::INT16;
  case 32: return u ? T::UINT32 : T::INT32;
  case 64: return u ? T::UINT64 : T::INT64;
  default: return 0;
  }
}

int32_t Importer::dataTypeOf(StringRef name) const {
  if (auto v = values.find(name); v != values.end())
    return onnxDataType(cast<RankedTensorType>(v->second.getType()).getElementType());
  if (auto t = initializers.find(name); t != initializers.end())
    return t->second->data_type();
  return 0;
}

LogicalResult Importer::checkNodeTypes(const onnx::NodeProto &n) {
  // onnx 1.12's schemas end at opset 17; later opsets widened some type
  // constraints, which the op's inference then checks.
  if (opsetVersion > 17)
    return success();
  const onnx::OpSchema *schema =
      onnx::OpSchemaRegistry::Schema(n.op_type(), int(opsetVersion), "");
  if (!schema)
    return success();
  std::string op = n.op_type() + "-" + std::to_string(schema->SinceVersion());
  // The first value bound to each type parameter (T, T1, ...), by name.
  llvm::StringMap<std::pair<int32_t, std::string>> bound;
  auto check = [&](const std::vector<onnx::OpSchema::FormalParameter> &formals,
                   const auto &names, StringRef kind) -> LogicalResult {
    for (int i = 0; i < names.size() && !formals.empty(); ++i) {
      const std::string &name = names.Get(i);
      int32_t dt = name.empty() ? 0 : dataTypeOf(name);
      if (dt == 0 || !onnx::TensorProto::DataType_IsValid(dt))
        continue;
      bool last = i >= int(formals.size()) - 1;
      const auto &formal = formals[last ? formals.size() - 1 : i];
      std::string tensorType =
          "tensor(" +
          StringRef(onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(dt)))
              .lower() +
          ")";
      const auto &allowed = formal.GetTypes();
      bool ok = allowed.empty();
      for (const auto *t : allowed)
        ok = ok || *t == tensorType;
      if (!ok)
        return fail(kind + " '" + name + "' is " + tensorType + ", which " + op +
                    " does not take for " + formal.GetName());
      if (last && formal.GetOption() == onnx::OpSchema::Variadic && !formal.GetIsHomogeneous())
        continue;
      auto [it, inserted] = bound.try_emplace(formal.GetTypeStr(), dt, name);
      if (!inserted && it->second.first != dt)
        return fail("'" + it->second.second + "' and '" + name +
                    "' must have the same element type (" + formal.GetTypeStr() + " of " + op +
                    ")");
    }
    return success();
  };
  // Outputs too, except a Constant's: Constant-1 takes floats only, but the
  // PyTorch exports of ONNX's own test data hold int64 ones.
  if (failed(check(schema->inputs(), n.input(), "input")))
    return failure();
  if (n.op_type() == "Constant")
    return success();
  return check(schema->outputs(), n.output(), "output");
}

LogicalResult Importer::validateModel() {
  if (failed(validateGraph()))
    return failure();
  for (const auto &n : model.graph().node()) {
    current = &n;
    if (failed(validateNode(n)))
      return failure();
  }
  current = nullptr;
  return success();
}
