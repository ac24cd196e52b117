//===- ONNXImporter.cpp - ONNX model to hpc dialect -----------------------===//
//
// Model-level import: reading the protobuf (binary or text), checking the
// opset and the op list up front, fixing dynamic input dimensions, reading
// tensor data (inline, typed fields, or external files), walking the nodes in
// order and cross-checking every inferred type against ONNX shape inference.
// Protobuf and the ONNX library may throw; exceptions are caught here and
// never cross into MLIR code.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include "onnx/defs/parser.h"
#include "onnx/shape_inference/implementation.h"

#include <google/protobuf/io/coded_stream.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using namespace hpc;
using namespace hpc::detail;

int64_t hpc::detail::numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool hpc::isONNXPath(const std::string &path) {
  StringRef p(path);
  return p.ends_with(".onnx") || p.ends_with(".onnxtxt");
}

bool hpc::parseInputShape(const std::string &text, ImportOptions &options,
                          std::string &error) {
  auto [name, dims] = StringRef(text).split('=');
  if (name.empty() || dims.empty()) {
    error = "--input-shape expects NAME=D0,D1,... but got '" + text + "'";
    return false;
  }
  std::vector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, ',');
  for (StringRef part : parts) {
    int64_t d;
    if (part.trim().getAsInteger(10, d) || d <= 0) {
      error = "--input-shape " + name.str() + ": dimension '" + part.str() +
              "' is not a positive integer";
      return false;
    }
    shape.push_back(d);
  }
  options.inputShapes[name.str()] = shape;
  return true;
}

Importer::Importer(MLIRContext &context, const ImportOptions &options,
                   std::string path)
    : ctx(context), options(options), path(std::move(path)), b(&context),
      currentLoc(UnknownLoc::get(&context)) {
  modelDir = llvm::sys::path::parent_path(this->path).str();
}

LogicalResult Importer::fail(const llvm::Twine &message) {
  if (!errorText.empty())
    return failure(); // keep the first, most specific error
  std::string where = path + ": ";
  if (current)
    where += "node '" + (current->name().empty() ? std::string("<unnamed>") : current->name()) +
             "' (" + current->op_type() + "): ";
  errorText = where + message.str();
  return failure();
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

LogicalResult Importer::load() {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/true);
  if (!buffer)
    return fail("cannot read file: " + buffer.getError().message());
  StringRef data = (*buffer)->getBuffer();
  if (StringRef(path).ends_with(".onnxtxt")) {
    try {
      onnx::OnnxParser parser(data.data());
      auto status = parser.Parse(model);
      if (!status.IsOK())
        return fail("cannot parse ONNX text: " + status.ErrorMessage());
    } catch (const std::exception &e) {
      return fail(std::string("cannot parse ONNX text: ") + e.what());
    }
  } else {
    google::protobuf::io::CodedInputStream stream(
        reinterpret_cast<const uint8_t *>(data.data()), data.size());
    stream.SetTotalBytesLimit(INT32_MAX);
    if (!model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage())
      return fail("not a valid ONNX model (truncated or corrupt protobuf)");
  }
  if (!model.has_graph() || model.graph().output_size() == 0)
    return fail("not a valid ONNX model (no graph or no graph outputs)");
  return success();
}

LogicalResult Importer::checkOpset() {
  opsetVersion = 0;
  bool found = false;
  for (const auto &imp : model.opset_import()) {
    if (imp.domain().empty() || imp.domain() == "ai.onnx") {
      opsetVersion = imp.version();
      found = true;
    }
  }
  if (model.ir_version() > kMaxIRVersion)
    return fail("IR version " + llvm::Twine(model.ir_version()) +
                " is newer than the importer knows (at most " + llvm::Twine(kMaxIRVersion) + ")");
  if (found && (model.ir_version() == 1 || model.ir_version() == 2))
    return fail("IR version " + llvm::Twine(model.ir_version()) +
                " has no opset_import, but the model lists one");
  if (!found && model.ir_version() < 3)
    opsetVersion = 1; // IR versions before 3 had no opset_import
  if (!found && model.ir_version() >= 3) {
    std::string domains;
    for (const auto &imp : model.opset_import())
      domains += (domains.empty() ? "" : ", ") + imp.domain();
    return fail("the model imports no ai.onnx opset (only: " +
                (domains.empty() ? std::string("none") : domains) + ")");
  }
  if (opsetVersion < kMinOpset || opsetVersion > kMaxOpset)
    return fail("unsupported opset " + llvm::Twine(opsetVersion) +
                " (supported: " + llvm::Twine(kMinOpset) + " to " +
                llvm::Twine(kMaxOpset) + ")");
  return success();
}

LogicalResult Importer::checkSupportedOps() {
  // Collect every unsupported op type with its nodes, so the user sees the
  // whole list at once rather than one per run.
  std::map<std::string, std::vector<std::string>> unsupported;
  for (const auto &n : model.graph().node()) {
    bool defaultDomain = n.domain().empty() || n.domain() == "ai.onnx";
    if (defaultDomain && findConverter(n.op_type()))
      continue;
    std::string key = defaultDomain ? n.op_type() : n.domain() + "." + n.op_type();
    unsupported[key].push_back(n.name().empty() ? "<unnamed>" : n.name());
  }
  if (unsupported.empty())
    return validateModel();
  std::string list;
  for (auto &[op, nodes] : unsupported) {
    if (!list.empty())
      list += "; ";
    list += op + " (node";
    list += nodes.size() > 1 ? "s " : " ";
    for (size_t i = 0; i < nodes.size() && i < 8; ++i)
      list += (i ? ", '" : "'") + nodes[i] + "'";
    if (nodes.size() > 8)
      list += ", and " + std::to_string(nodes.size() - 8) + " more";
    list += ")";
  }
  return fail("unsupported ops: " + list);
}

/// Runs ONNX's own shape inference (after the input shapes are fixed and our
/// own import has checked every node) and records the types it finds, for
/// checkAgainstONNX. Failures are not errors: our own inference is
/// authoritative, this is a cross-check.
void Importer::runONNXShapeInference() {
  try {
    onnx::ModelProto copy = model;
    onnx::ShapeInferenceOptions opts(/*check_type=*/false, /*error_mode=*/0,
                                     /*data_prop=*/true);
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(),
                                       opts);
    for (const auto &vi : copy.graph().value_info())
      onnxTypes[vi.name()] = vi.type();
  } catch (const std::exception &) {
    onnxTypes.clear();
  }
}

FailureOr<Type> Importer::elementType(int32_t t, StringRef what) {
  switch (t) {
  case onnx::TensorProto::FLOAT: return b.getF32Type();
  case onnx::TensorProto::DOUBLE: return b.getF64Type();
  case onnx::TensorProto::FLOAT16: return b.getF16Type();
  case onnx::TensorProto::BFLOAT16: return b.getBF16Type();
  case onnx::TensorProto::INT8: return b.getIntegerType(8);
  case onnx::TensorProto::INT16: return b.getIntegerType(16);
  case onnx::TensorProto::INT32: return b.getIntegerType(32);
  case onnx::TensorProto::INT64: return b.getIntegerType(64);
  case onnx::TensorProto::UINT8: return b.getIntegerType(8, false);
  case onnx::TensorProto::UINT16: return b.getIntegerType(16, false);
  case onnx::TensorProto::UINT32: return b.getIntegerType(32, false);
  case onnx::TensorProto::UINT64: return b.getIntegerType(64, false);
  case onnx::TensorProto::BOOL: return b.getI1Type();
  default:
    break;
  }
  const char *name = onnx::TensorProto::DataType_IsValid(t)
                         ? onnx::TensorProto::DataType_Name(
                               static_cast<onnx::TensorProto::DataType>(t))
                               .c_str()
                         : "unknown";
  return fail(what + ": unsupported element type " + name);
}

//===----------------------------------------------------------------------===//
// Tensor data
//===----------------------------------------------------------------------===//

FailureOr<std::string> Importer::externalBytes(const onnx::TensorProto &t,
                                               int64_t expectedBytes, bool read) {
  auto ext = externalData(t, expectedBytes);
  if (failed(ext))
    return failure();
  std::string what = "tensor '" + t.name() + "'";
  SmallString<256> file(modelDir);
  llvm::sys::path::append(file, ext->location);
  std::string shown(file);
  // With its links resolved, the file must lie inside the model's folder and
  // be a regular file (a FIFO or a device would block or never end); it is
  // checked before it is opened, and again on the open descriptor.
  SmallString<256> realFile, realDir;
  if (std::error_code ec = llvm::sys::fs::real_path(file, realFile)) {
    if (!read && ec == std::errc::no_such_file_or_directory)
      return std::string(); // --shapes-only compiles without the weights at hand
    return fail(what + ": cannot read external data file '" + shown + "': " + ec.message());
  }
  if (std::error_code ec = llvm::sys::fs::real_path(modelDir.empty() ? "." : modelDir, realDir))
    return fail(what + ": cannot resolve the model's folder '" + modelDir + "': " + ec.message());
  std::string inside = realDir.str().str();
  if (!StringRef(inside).ends_with("/"))
    inside += "/";
  if (!StringRef(realFile).starts_with(inside))
    return fail(what + ": external data file '" + shown + "' resolves to '" +
                std::string(realFile) + "', outside the model's folder");
  struct stat st;
  if (::stat(realFile.c_str(), &st) != 0)
    return fail(what + ": cannot read external data file '" + shown + "': " +
                std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return fail(what + ": external data file '" + shown + "' is not a regular file");
  int fd = ::open(realFile.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0)
    return fail(what + ": cannot read external data file '" + shown + "': " +
                std::strerror(errno));
  llvm::scope_exit closeFd([&] { ::close(fd); });
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return fail(what + ": external data file '" + shown + "' is not a regular file");
  int64_t end = ext->offset + ext->length; // checked by externalData
  if (int64_t(st.st_size) < end)
    return fail(what + ": external data file '" + shown + "' is too short (" +
                llvm::Twine(int64_t(st.st_size)) + " bytes; the tensor needs bytes " +
                llvm::Twine(ext->offset) + " to " + llvm::Twine(end) + ")");
  if (!read)
    return std::string();
  std::string bytes(size_t(ext->length), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t got = ::pread(fd, bytes.data() + done, bytes.size() - done,
                          off_t(ext->offset + int64_t(done)));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return fail(what + ": cannot read external data file '" + shown + "': " +
                  std::strerror(errno));
    if (got == 0)
      return fail(what + ": external data file '" + shown + "' is too short");
    done += size_t(got);
  }
  return bytes;
}

/// Copies typed protobuf fields into little-endian bytes of the element type.
template <typename Src, typename Dst>
static std::string packField(const Src &field) {
  std::string bytes(field.size() * sizeof(Dst), '\0');
  Dst *out = reinterpret_cast<Dst *>(bytes.data());
  for (int i = 0; i < field.size(); ++i)
    out[i] = static_cast<Dst>(field.Get(i));
  return bytes;
}

FailureOr<ElementsAttr> Importer::tensorData(const onnx::TensorProto &t,
                                             bool allowResource) {
  auto checked = checkTensor(t);
  if (failed(checked))
    return failure();
  int64_t bytes = *checked;
  auto elt = elementType(t.data_type(), "tensor '" + t.name() + "'");
  if (failed(elt))
    return failure();
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  auto type = RankedTensorType::get(shape, *elt);

  std::string raw;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    auto ext = externalBytes(t, bytes);
    if (failed(ext))
      return failure();
    raw = std::move(*ext);
  } else if (t.has_raw_data()) {
    raw = t.raw_data();
  } else {
    switch (t.data_type()) {
    case onnx::TensorProto::FLOAT: raw = packField<decltype(t.float_data()), float>(t.float_data()); break;
    case onnx::TensorProto::DOUBLE: raw = packField<decltype(t.double_data()), double>(t.double_data()); break;
    case onnx::TensorProto::INT64: raw = packField<decltype(t.int64_data()), int64_t>(t.int64_data()); break;
    case onnx::TensorProto::UINT64: raw = packField<decltype(t.uint64_data()), uint64_t>(t.uint64_data()); break;
    case onnx::TensorProto::INT32: raw = packField<decltype(t.int32_data()), int32_t>(t.int32_data()); break;
    case onnx::TensorProto::UINT32: raw = packField<decltype(t.uint64_data()), uint32_t>(t.uint64_data()); break;
    case onnx::TensorProto::INT16: raw = packField<decltype(t.int32_data()), int16_t>(t.int32_data()); break;
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: raw = packField<decltype(t.int32_data()), uint16_t>(t.int32_data()); break;
    case onnx::TensorProto::INT8: raw = packField<decltype(t.int32_data()), int8_t>(t.int32_data()); break;
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL: raw = packField<decltype(t.int32_data()), uint8_t>(t.int32_data()); break;
    default: break;
    }
  }

  if (elt->isInteger(1)) {
    // Normalize to 0/1 bytes, the layout of both bool attribute forms.
    for (char &c : raw)
      c = c != 0;
    if (!allowResource || bytes <= hpc::kInlineDataBytes) {
      SmallVector<bool> bits(raw.begin(), raw.end());
      return cast<ElementsAttr>(DenseElementsAttr::get(type, bits));
    }
  }
  // (Large bools stay one byte each, in a resource blob.)
  bool isSplat = false;
  if (!elt->isInteger(1) &&
      !DenseElementsAttr::isValidRawBuffer(type, ArrayRef<char>(raw.data(), raw.size()), isSplat))
    return fail("tensor '" + t.name() + "' has malformed data");
  return hpc::elementsFromBytes(type, t.name(), ArrayRef<char>(raw.data(), raw.size()),
                                allowResource);
}

FailureOr<Value> Importer::materializeInitializer(const onnx::TensorProto &t) {
  auto it = values.find(t.name());
  if (it != values.end())
    return it->second;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  Location loc = NameLoc::get(b.getStringAttr(t.name()),
                              FileLineColLoc::get(&ctx, path, 0, 0));
  auto elt = elementType(t.data_type(), "initializer '" + t.name() + "'");
  if (failed(elt))
    return failure();
  SmallVector<int64_t> shape(t.dims().begin(), t.dims().end());
  auto type = RankedTensorType::get(shape, *elt);
  int64_t bytes = numElements(shape) *
                  (elt->isInteger(1) ? 1 : elt->getIntOrFloatBitWidth() / 8);
  // Floating-point initializers are parameters; large non-float ones (masks,
  // lookup tables) are named buffers; small non-float ones are constants the
  // folders can see through.
  // A single float is a constant of the model's arithmetic (a scale, an
  // epsilon), not a parameter. With --shapes-only, anything stored in an
  // external file stays unread.
  bool external = t.data_location() == onnx::TensorProto::EXTERNAL;
  bool isWeight = (isa<FloatType>(*elt) && numElements(shape) > 1) ||
                  bytes > hpc::kInlineDataBytes || (options.shapesOnly && external);
  Value v;
  if (isWeight) {
    ElementsAttr data;
    if (!options.shapesOnly) {
      auto d = tensorData(t, /*allowResource=*/true);
      if (failed(d))
        return failure();
      data = *d;
    } else if (external && failed(externalBytes(t, bytes, /*read=*/false))) {
      return failure(); // an external file that is there must be right
    }
    v = hpc::WeightOp::create(b, loc, type, b.getStringAttr(t.name()), data);
  } else {
    auto d = tensorData(t, /*allowResource=*/true);
    if (failed(d))
      return failure();
    v = hpc::ConstantOp::create(b, loc, *d);
  }
  values[t.name()] = v;
  return v;
}

FailureOr<DenseElementsAttr> Importer::boundInput(StringRef name) {
  auto it = graphInputIndex.find(name);
  if (options.bindInputsDir.empty() || it == graphInputIndex.end())
    return DenseElementsAttr();
  SmallString<256> file(options.bindInputsDir);
  llvm::sys::path::append(file, "input_" + std::to_string(it->second) + ".pb");
  auto buffer = llvm::MemoryBuffer::getFile(file);
  if (!buffer)
    return fail("cannot read bound input '" + std::string(file) + "'");
  onnx::TensorProto t;
  if (!t.ParseFromArray((*buffer)->getBufferStart(), (*buffer)->getBufferSize()))
    return fail("bound input '" + std::string(file) + "' is not a TensorProto");
  t.set_name(name.str());
  auto data = tensorData(t, /*allowResource=*/false);
  if (failed(data))
    return failure();
  return cast<DenseElementsAttr>(*data);
}

//===----------------------------------------------------------------------===//
// Node-level helpers used by the converters
//===----------------------------------------------------------------------===//

bool Importer::hasInput(int i) const {
  return i < current->input_size() && !current->input(i).empty();
}

bool Importer::hasOutput(int i) const {
  return i < current->output_size() && !current->output(i).empty();
}

FailureOr<Value> Importer::input(int i) {
  if (!hasInput(i))
    return fail("missing input " + llvm::Twine(i));
  const std::string &name = current->input(i);
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto init = initializers.find(name);
  if (init != initializers.end())
    return materializeInitializer(*init->second);
  return fail("input '" + name + "' is not produced by any earlier node");
}

FailureOr<DenseElementsAttr> Importer::constantInput(int i) {
  if (!hasInput(i))
    return DenseElementsAttr();
  const std::string &name = current->input(i);
  auto it = values.find(name);
  if (it != values.end()) {
    if (auto c = it->second.getDefiningOp<hpc::ConstantOp>())
      return dyn_cast<DenseElementsAttr>(c.getValue());
    if (isa<BlockArgument>(it->second))
      return boundInput(name);
    return DenseElementsAttr();
  }
  auto init = initializers.find(name);
  if (init != initializers.end()) {
    auto data = tensorData(*init->second, /*allowResource=*/false);
    if (failed(data))
      return failure();
    return cast<DenseElementsAttr>(*data);
  }
  return fail("input '" + name + "' is not produced by any earlier node");
}

FailureOr<SmallVector<int64_t>> Importer::intsInput(int i, StringRef what) {
  auto attr = constantInput(i);
  if (failed(attr))
    return failure();
  if (!*attr || !isa<IntegerType>(attr->getElementType()))
    return fail(what + " (input '" + (hasInput(i) ? current->input(i) : "") +
                "') must be a compile-time integer constant; fix the input "
                "shapes with --input-shape so shape computations fold");
  if (attr->getType().getRank() > 1)
    return fail(what + " (input '" + current->input(i) + "') must be a 1-D tensor, not rank " +
                llvm::Twine(attr->getType().getRank()));
  SmallVector<int64_t> out;
  for (const APInt &v : attr->getValues<APInt>())
    out.push_back(v.getSExtValue());
  return out;
}

FailureOr<double> Importer::scalarInput(int i, StringRef what) {
  auto attr = constantInput(i);
  if (failed(attr))
    return failure();
  if (!*attr || attr->getNumElements() != 1)
    return fail(what + " must be a compile-time scalar constant");
  if (isa<FloatType>(attr->getElementType()))
    return (*attr->getValues<APFloat>().begin()).convertToDouble();
  APInt v = *attr->getValues<APInt>().begin();
  return attr->getElementType().isUnsignedInteger() ? double(v.getZExtValue())
                                                    : double(v.getSExtValue());
}

const onnx::AttributeProto *Importer::attr(StringRef name) const {
  for (const auto &a : current->attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

const onnx::AttributeProto *Importer::typedAttr(StringRef name, int type) {
  const auto *a = attr(name);
  if (!a || a->type() == type)
    return a;
  (void)fail("attribute '" + name + "' is " + attributeTypeName(a->type()) +
             ", but the importer reads it as " + attributeTypeName(type));
  return nullptr;
}

int64_t Importer::attrInt(StringRef name, int64_t dflt) {
  const auto *a = typedAttr(name, onnx::AttributeProto::INT);
  return a ? a->i() : dflt;
}

bool Importer::attrBool(StringRef name, bool dflt) {
  const auto *a = typedAttr(name, onnx::AttributeProto::INT);
  if (!a)
    return dflt;
  if (a->i() != 0 && a->i() != 1)
    (void)fail("attribute '" + name + "' must be 0 or 1, got " + llvm::Twine(a->i()));
  return a->i() != 0;
}

double Importer::attrFloat(StringRef name, double dflt) {
  const auto *a = typedAttr(name, onnx::AttributeProto::FLOAT);
  if (!a)
    return dflt;
  // ONNX float attributes are single precision; widen through the shortest
  // decimal form so 1e-5f becomes 1e-5, not 9.99999974e-6.
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), a->f());
  if (ec != std::errc())
    return a->f();
  *end = 0;
  return std::strtod(text, nullptr);
}

std::string Importer::attrString(StringRef name, StringRef dflt) {
  const auto *a = typedAttr(name, onnx::AttributeProto::STRING);
  return a ? a->s() : dflt.str();
}

SmallVector<int64_t> Importer::attrInts(StringRef name) {
  SmallVector<int64_t> out;
  if (const auto *a = typedAttr(name, onnx::AttributeProto::INTS))
    out.assign(a->ints().begin(), a->ints().end());
  return out;
}

void Importer::setOutput(int i, Value v) {
  if (hasOutput(i))
    values[current->output(i)] = v;
}

FailureOr<Value> Importer::constantValueOf(const onnx::TensorProto &t) {
  auto data = tensorData(t, /*allowResource=*/true);
  if (failed(data))
    return failure();
  return hpc::ConstantOp::create(b, currentLoc, *data).getResult();
}

Value Importer::splat(Type elementType, ArrayRef<int64_t> shape, double value) {
  auto type = RankedTensorType::get(shape, elementType);
  Attribute element;
  if (isa<FloatType>(elementType))
    element = b.getFloatAttr(elementType, value);
  else
    element = b.getIntegerAttr(elementType, static_cast<int64_t>(value));
  return hpc::ConstantOp::create(b, currentLoc,
                                 DenseElementsAttr::get(type, element));
}

Value Importer::i64Constant(ArrayRef<int64_t> v, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, b.getI64Type());
  return hpc::ConstantOp::create(b, currentLoc, DenseElementsAttr::get(type, v));
}

FailureOr<SmallVector<Value>>
Importer::createGeneric(OperationName name, InferFn infer, ValueRange operands,
                        ArrayRef<NamedAttribute> attrs) {
  // Inference runs on a detached, result-less op so the attributes are in
  // their property form; a failure is a diagnostic, never a crash.
  Operation *probe = Operation::create(currentLoc, name, {}, operands,
                                       NamedAttrList(attrs), nullptr, {}, 0);
  SmallVector<Type> types;
  diagnostic.clear();
  LogicalResult inferred =
      infer(&ctx, currentLoc, operands, probe->getRawDictionaryAttrs(),
            probe->getPropertiesStorage(), {}, types);
  probe->destroy();
  if (failed(inferred))
    return fail(diagnostic.empty() ? "cannot infer result types" : diagnostic);
  Operation *op = Operation::create(currentLoc, name, types, operands,
                                    NamedAttrList(attrs), nullptr, {}, 0);
  b.insert(op);
  SmallVector<Value> results;
  if (succeeded(b.tryFold(op, results)) && !results.empty()) {
    op->erase();
    return results;
  }
  return SmallVector<Value>(op->getResults());
}

//===----------------------------------------------------------------------===//
// Graph
//===----------------------------------------------------------------------===//

FailureOr<RankedTensorType> Importer::inputType(const onnx::ValueInfoProto &vi) {
  const std::string &name = vi.name();
  if (!vi.type().has_tensor_type())
    return fail("graph input '" + name + "' is not a tensor");
  const auto &tt = vi.type().tensor_type();
  auto elt = elementType(tt.elem_type(), "graph input '" + name + "'");
  if (failed(elt))
    return failure();
  if (!tt.has_shape())
    return fail("graph input '" + name + "' has unknown rank");
  SmallVector<int64_t> dims;
  SmallVector<std::string> params;
  for (const auto &d : tt.shape().dim()) {
    dims.push_back(d.has_dim_value() ? d.dim_value() : ShapedType::kDynamic);
    params.push_back(d.has_dim_param() ? d.dim_param() : "");
  }
  auto given = options.inputShapes.find(name);
  if (given != options.inputShapes.end()) {
    const auto &shape = given->second;
    if (shape.size() != dims.size())
      return fail("--input-shape " + name + " gives rank " +
                  llvm::Twine(shape.size()) + " but the input has rank " +
                  llvm::Twine(dims.size()));
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] != ShapedType::kDynamic && dims[i] != shape[i])
        return fail("--input-shape " + name + ": dimension " + llvm::Twine(i) +
                    " is fixed to " + llvm::Twine(dims[i]) + " by the model, not " +
                    llvm::Twine(shape[i]));
      dims[i] = shape[i];
    }
  }
  int64_t elements = 1;
  for (int64_t d : dims)
    if (d > 0 && (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxElements))
      return fail("graph input '" + name + "' is too large (more than 2^48 elements)");
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] == ShapedType::kDynamic || dims[i] < 0)
      return fail("graph input '" + name + "' has dynamic dimension " +
                  llvm::Twine(i) +
                  (params[i].empty() ? "" : " ('" + params[i] + "')") +
                  "; fix it with --input-shape " + name + "=D0,D1,...");
  return RankedTensorType::get(dims, *elt);
}

LogicalResult Importer::prepareGraph() {
  const auto &graph = model.graph();
  for (const auto &t : graph.initializer())
    initializers[t.name()] = &t;

  // Not a structured binding: C++17 lambdas cannot capture one (clang).
  for (const auto &entry : options.inputShapes) {
    const std::string &name = entry.first;
    bool known = llvm::any_of(graph.input(), [&](const onnx::ValueInfoProto &vi) {
      return vi.name() == name && !initializers.count(name);
    });
    if (!known)
      return fail("--input-shape names '" + name + "', which is not a graph input");
  }

  SmallVector<Type> argTypes;
  SmallVector<const onnx::ValueInfoProto *> args;
  int index = 0;
  for (const auto &vi : graph.input()) {
    // Before IR version 4, initializers were also listed as graph inputs.
    if (initializers.count(vi.name()))
      continue;
    graphInputIndex[vi.name()] = index++;
    auto type = inputType(vi);
    if (failed(type))
      return failure();
    argTypes.push_back(*type);
    args.push_back(&vi);
  }

  // Fix the input dimensions in the model so ONNX's shape inference, used as
  // a cross-check, sees the same static shapes.
  for (size_t i = 0; i < args.size(); ++i) {
    for (auto &vi : *model.mutable_graph()->mutable_input()) {
      if (vi.name() != args[i]->name())
        continue;
      auto *shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
      auto dims = cast<RankedTensorType>(argTypes[i]).getShape();
      for (int d = 0; d < shape->dim_size(); ++d)
        shape->mutable_dim(d)->set_dim_value(dims[d]);
    }
  }
  return success();
}

LogicalResult Importer::checkAgainstONNX(const onnx::NodeProto &n) {
  for (int i = 0; i < n.output_size(); ++i) {
    auto it = onnxTypes.find(n.output(i));
    auto v = values.find(n.output(i));
    if (it == onnxTypes.end() || v == values.end() ||
        !it->second.has_tensor_type() || !it->second.tensor_type().has_shape())
      continue;
    const auto &shape = it->second.tensor_type().shape();
    auto ours = cast<RankedTensorType>(v->second.getType());
    bool allStatic = llvm::all_of(shape.dim(), [](const auto &d) {
      return d.has_dim_value();
    });
    if (!allStatic)
      continue;
    SmallVector<int64_t> theirs;
    for (const auto &d : shape.dim())
      theirs.push_back(d.dim_value());
    if (ArrayRef<int64_t>(theirs) != ours.getShape()) {
      std::string a, bstr;
      llvm::raw_string_ostream(a) << ours;
      for (int64_t d : theirs)
        bstr += (bstr.empty() ? "" : "x") + std::to_string(d);
      return fail("output '" + n.output(i) + "' imported as " + a +
                  " but ONNX shape inference gives shape [" + bstr + "]");
    }
  }
  return success();
}

LogicalResult Importer::importNode(const onnx::NodeProto &n) {
  current = &n;
  std::string label = n.name().empty() ? n.op_type() : n.name();
  currentLoc = NameLoc::get(b.getStringAttr(label),
                            FileLineColLoc::get(&ctx, path, 0, 0));
  Converter convert = findConverter(n.op_type());
  if (!convert)
    return fail("unsupported op");
  // A converter may have recorded an error (an attribute of the wrong type)
  // and gone on with a default: the node fails all the same.
  if (failed(convert(*this)) || !errorText.empty())
    return fail("cannot import this node");
  for (int i = 0; i < n.output_size(); ++i) {
    if (n.output(i).empty())
      continue;
    auto v = values.find(n.output(i));
    if (v == values.end())
      return fail("output " + llvm::Twine(i) + " ('" + n.output(i) +
                  "') is not supported by the importer");
    int64_t elements;
    if (!checkedNumElements(cast<RankedTensorType>(v->second.getType()).getShape(), elements))
      return fail("output '" + n.output(i) + "' is too large (more than 2^48 elements)");
  }
  if (failed(checkNodeTypes(n)))
    return failure();
  return checkDeclaredTypes(n);
}

LogicalResult Importer::checkDeclaredTypes(const onnx::NodeProto &n) {
  for (const auto &name : n.output()) {
    auto d = declared.find(name);
    auto v = values.find(name);
    if (name.empty() || d == declared.end() || v == values.end() || !d->second->has_type())
      continue;
    const auto &tt = d->second->type().tensor_type(); // validateGraph: a tensor
    auto ours = cast<RankedTensorType>(v->second.getType());
    std::string imported;
    llvm::raw_string_ostream(imported) << ours;
    if (tt.elem_type() != 0) {
      auto elt = elementType(tt.elem_type(), "the declared type of '" + name + "'");
      if (failed(elt))
        return failure();
      if (*elt != ours.getElementType())
        return fail("output '" + name + "' imported as " + imported +
                    " but the model declares element type " +
                    onnx::TensorProto::DataType_Name(
                        static_cast<onnx::TensorProto::DataType>(tt.elem_type())));
    }
    if (!tt.has_shape())
      continue;
    bool same = tt.shape().dim_size() == ours.getRank();
    std::string shape;
    for (const auto &[i, dim] : llvm::enumerate(tt.shape().dim())) {
      shape += (i ? "," : "") + (dim.has_dim_value() ? std::to_string(dim.dim_value()) : "?");
      if (same && dim.has_dim_value() && dim.dim_value() != ours.getDimSize(i))
        same = false;
    }
    if (!same)
      return fail("output '" + name + "' imported as " + imported +
                  " but the model declares shape [" + shape + "]");
  }
  return success();
}

OwningOpRef<ModuleOp> Importer::run() {
  // Diagnostics from op inference become the import error's text.
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && diagnostic.empty())
      diagnostic = diag.str();
    return success();
  });
  if (failed(load()) || failed(checkOpset()) || failed(checkSupportedOps()))
    return nullptr;

  ctx.loadDialect<hpc::HPCDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(FileLineColLoc::get(&ctx, path, 0, 0));
  b.setInsertionPointToEnd(module->getBody());
  if (failed(prepareGraph()))
    return nullptr;

  const auto &graph = model.graph();
  SmallVector<Type> argTypes;
  SmallVector<std::string> argNames;
  for (const auto &vi : graph.input()) {
    if (initializers.count(vi.name()))
      continue;
    auto type = inputType(vi);
    if (failed(type))
      return nullptr;
    argTypes.push_back(*type);
    argNames.push_back(vi.name());
  }
  b.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(b, FileLineColLoc::get(&ctx, path, 0, 0),
                                   "main", b.getFunctionType(argTypes, {}));
  entry = func.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(argNames)) {
    values[name] = entry->getArgument(i);
    func.setArgAttr(i, "hpc.name", b.getStringAttr(name));
  }
  b.setInsertionPointToEnd(entry);

  for (const auto &n : graph.node())
    if (failed(importNode(n)))
      return nullptr;
  // ONNX's shape inference runs only now, on a model every converter has
  // checked, as a cross-check of each node's result types.
  runONNXShapeInference();
  for (const auto &n : graph.node()) {
    current = &n;
    if (failed(checkAgainstONNX(n)))
      return nullptr;
  }
  current = nullptr;

  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const auto &out : graph.output()) {
    Value v;
    auto it = values.find(out.name());
    if (it != values.end()) {
      v = it->second;
    } else if (auto init = initializers.find(out.name()); init != initializers.end()) {
      auto m = materializeInitializer(*init->second);
      if (failed(m))
        return nullptr;
      v = *m;
    } else {
      (void)fail("graph output '" + out.name() + "' is not produced by any node");
      return nullptr;
    }
    results.push_back(v);
    resultTypes.push_back(v.getType());
  }
  SmallVector<std::string> resultNames;
  for (const auto &out : graph.output())
    resultNames.push_back(out.name());
  for (const std::string &name : options.extraOutputs) {
    if (llvm::is_contained(resultNames, name))
      continue;
    Value v;
    if (auto it = values.find(name); it != values.end()) {
      v = it->second;
    } else if (auto init = initializers.find(name); init != initializers.end()) {
      auto m = materializeInitializer(*init->second);
      if (failed(m))
        return nullptr;
      v = *m;
    } else {
      (void)fail("no tensor '" + name + "' in the model (not a node output, input or initializer)");
      return nullptr;
    }
    results.push_back(v);
    resultTypes.push_back(v.getType());
    resultNames.push_back(name);
  }
  b.setInsertionPointToEnd(entry);
  func::ReturnOp::create(b, func.getLoc(), results);
  func.setType(b.getFunctionType(argTypes, resultTypes));
  for (auto [i, name] : llvm::enumerate(resultNames))
    func.setResultAttr(i, "hpc.name", b.getStringAttr(name));

  // Drop ops that only fed folded shape computations.
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*entry))) {
      if (!op.hasTrait<OpTrait::IsTerminator>() && op.use_empty() &&
          isa<hpc::HPCDialect>(op.getDialect())) {
        op.erase();
        changed = true;
      }
    }
  }

  diagnostic.clear();
  if (failed(verify(*module))) {
    (void)fail("imported module does not verify: " + diagnostic);
    return nullptr;
  }
  return module;
}

OwningOpRef<ModuleOp> hpc::importONNXFile(MLIRContext &context,
                                          const std::string &path,
                                          const ImportOptions &options,
                                          std::string &error) {
  Importer importer(context, options, path);
  OwningOpRef<ModuleOp> module;
  try {
    module = importer.run();
  } catch (const std::exception &e) {
    error = path + ": " + e.what();
    return nullptr;
  }
  if (!module)
    error = importer.error().empty() ? path + ": import failed" : importer.error();
  // One line, whatever the parser's message or a node's name contains: line
  // breaks become spaces, other control characters \xNN.
  std::string line;
  for (char c : error) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r')
      line += ' ';
    else if ((u < 0x20 && c != '\t') || u == 0x7f)
      line += llvm::formatv("\\x{0:x-2}", unsigned(u)).str();
    else
      line += c;
  }
  error = std::move(line);
  return module;
}
