//===- DistDialect.cpp - dist dialect, attributes and types ---------------===//
//
// Registration, and the hand-written syntax of the mesh and sharding
// attributes:
//   #dist.mesh<dp = 2 : inter_node, tp = 4 : intra_node>
//   #dist.sharding<[[dp], [], [tp]], partial = sum[tp]>
//   #dist.int8_block<block = 256>
//   #dist.powersgd<rank = 4, pieces = [64x192, 192]>
//   #dist.topk<ratio = 0.01>
//
//===----------------------------------------------------------------------===//

#include "Dist/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace hpc::dist;

#include "Dist/DistDialect.cpp.inc"
#include "Dist/DistEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "Dist/DistAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "Dist/DistTypes.cpp.inc"

void DistDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Dist/DistAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "Dist/DistTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "Dist/DistOps.cpp.inc"
      >();
}

/// `dist.pieces_of = {shape = array<i64: ...>, dim = D}` says that the op's
/// result, tensor<G x piece>, is a weight of `shape` cut into G pieces along
/// `dim` and stored piece after piece.
LogicalResult DistDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName() != "dist.pieces_of")
    return success();
  auto dict = dyn_cast<DictionaryAttr>(attr.getValue());
  auto shape = dict ? dict.getAs<DenseI64ArrayAttr>("shape") : nullptr;
  auto dim = dict ? dict.getAs<IntegerAttr>("dim") : nullptr;
  if (!shape || !dim)
    return op->emitOpError("'dist.pieces_of' must be {shape = array<i64: ...>, dim = D}");
  auto type = op->getNumResults() == 1 ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                                       : RankedTensorType();
  int64_t rank = shape.size(), d = dim.getInt();
  if (!type || type.getRank() != rank + 1 || d < 0 || d >= rank)
    return op->emitOpError("'dist.pieces_of' needs one result of rank ")
           << rank + 1 << " (pieces, then the piece's dims) and a dim below " << rank;
  for (int64_t i = 0; i < rank; ++i) {
    int64_t expected = type.getDimSize(i + 1) * (i == d ? type.getDimSize(0) : 1);
    if (shape[i] != expected)
      return op->emitOpError("'dist.pieces_of': ")
             << type << " is not " << type.getDimSize(0) << " pieces along dim " << d
             << " of a tensor of shape [" << shape.asArrayRef() << "]";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// MeshAttr
//===----------------------------------------------------------------------===//

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  SmallVector<TopologyLevel> levels;
  if (parser.parseLess())
    return {};
  auto parseAxis = [&]() -> ParseResult {
    std::string name;
    int64_t size;
    std::string level;
    if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
        parser.parseInteger(size) || parser.parseColon() ||
        parser.parseKeywordOrString(&level))
      return failure();
    auto l = symbolizeTopologyLevel(level);
    if (!l)
      return parser.emitError(parser.getCurrentLocation(),
                              "topology level must be intra_node or "
                              "inter_node, not '")
             << level << "'";
    names.push_back(parser.getBuilder().getStringAttr(name));
    sizes.push_back(size);
    levels.push_back(*l);
    return success();
  };
  // `<>` parses, so the verifier can say what is wrong with it.
  if (failed(parser.parseOptionalGreater()) &&
      (parser.parseCommaSeparatedList(parseAxis) || parser.parseGreater()))
    return {};
  return parser.getChecked<MeshAttr>(parser.getContext(), names, sizes, levels);
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<";
  for (size_t i = 0; i < getNames().size(); ++i) {
    if (i)
      printer << ", ";
    printer.printKeywordOrString(getNames()[i].getValue());
    printer << " = " << getSizes()[i] << " : "
            << stringifyTopologyLevel(getLevels()[i]);
  }
  printer << ">";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<StringAttr> names, ArrayRef<int64_t> sizes,
                               ArrayRef<TopologyLevel> levels) {
  if (names.empty())
    return emitError() << "a mesh needs at least one axis";
  if (names.size() != sizes.size() || names.size() != levels.size())
    return emitError() << "mesh axis names, sizes and levels differ in number";
  llvm::SmallSet<StringRef, 8> seen;
  for (auto [name, size] : llvm::zip(names, sizes)) {
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue() << "' is repeated";
    if (size <= 0)
      return emitError() << "mesh axis '" << name.getValue()
                         << "' must have a positive size, not " << size;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Int8BlockAttr
//===----------------------------------------------------------------------===//

Attribute Int8BlockAttr::parse(AsmParser &parser, Type) {
  int64_t block = kDefaultInt8Block;
  if (succeeded(parser.parseOptionalLess()) &&
      (parser.parseKeyword("block") || parser.parseEqual() || parser.parseInteger(block) ||
       parser.parseGreater()))
    return {};
  return parser.getChecked<Int8BlockAttr>(parser.getContext(), block);
}

void Int8BlockAttr::print(AsmPrinter &printer) const {
  printer << "<block = " << getBlock() << ">";
}

LogicalResult Int8BlockAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    int64_t block) {
  if (block < 1 || block > (int64_t(1) << 24))
    return emitError() << "int8_block: block must be in [1, 16777216], not " << block;
  return success();
}

//===----------------------------------------------------------------------===//
// PowerSgdAttr
//===----------------------------------------------------------------------===//

Attribute PowerSgdAttr::parse(AsmParser &parser, Type) {
  int64_t rank = 0;
  bool feedback = true;
  SmallVector<int64_t> rows, cols;
  if (parser.parseLess() || parser.parseKeyword("rank") || parser.parseEqual() ||
      parser.parseInteger(rank))
    return {};
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return {};
    if (key == "pieces") {
      auto piece = [&]() -> ParseResult {
        SmallVector<int64_t> dims;
        if (parser.parseDimensionList(dims, /*allowDynamic=*/false, /*withTrailingX=*/false))
          return failure();
        if (dims.size() != 1 && dims.size() != 2)
          return parser.emitError(parser.getCurrentLocation(),
                                  "powersgd: a piece is N (values reduced exactly) or RxC "
                                  "(a matrix)");
        rows.push_back(dims[0]);
        cols.push_back(dims.size() == 2 ? dims[1] : 0);
        return success();
      };
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, piece))
        return {};
    } else if (key == "error_feedback") {
      if (succeeded(parser.parseOptionalKeyword("false")))
        feedback = false;
      else if (parser.parseKeyword("true"))
        return {};
    } else {
      parser.emitError(parser.getCurrentLocation(), "powersgd: unknown parameter '")
          << key << "' (pieces, error_feedback)";
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<PowerSgdAttr>(parser.getContext(), rank, rows, cols, feedback);
}

void PowerSgdAttr::print(AsmPrinter &printer) const {
  printer << "<rank = " << getRank();
  if (!getRows().empty()) {
    printer << ", pieces = [";
    for (auto [i, r] : llvm::enumerate(getRows())) {
      printer << (i ? ", " : "") << r;
      if (getCols()[i])
        printer << "x" << getCols()[i];
    }
    printer << "]";
  }
  if (!getErrorFeedback())
    printer << ", error_feedback = false";
  printer << ">";
}

LogicalResult PowerSgdAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t rank,
                                   ArrayRef<int64_t> rows, ArrayRef<int64_t> cols, bool) {
  if (rank < 1)
    return emitError() << "powersgd: rank must be at least 1, not " << rank;
  if (rows.size() != cols.size())
    return emitError() << "powersgd: " << rows.size() << " piece row counts, " << cols.size()
                       << " column counts";
  for (auto [i, r] : llvm::enumerate(rows)) {
    if (r < 1 || cols[i] < 0)
      return emitError() << "powersgd: piece " << i << " is empty";
    if (cols[i] && rank > std::min(r, cols[i]))
      return emitError() << "powersgd: rank " << rank << " is above the smaller dimension of "
                         << "matrix piece " << i << " (" << r << "x" << cols[i] << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// TopKAttr
//===----------------------------------------------------------------------===//

Attribute TopKAttr::parse(AsmParser &parser, Type) {
  double ratio = 0;
  if (parser.parseLess() || parser.parseKeyword("ratio") || parser.parseEqual() ||
      parser.parseFloat(ratio) || parser.parseGreater())
    return {};
  return parser.getChecked<TopKAttr>(parser.getContext(), llvm::APFloat(ratio));
}

void TopKAttr::print(AsmPrinter &printer) const {
  printer << "<ratio = ";
  printer.printFloat(getRatio());
  printer << ">";
}

LogicalResult TopKAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               llvm::APFloat ratio) {
  double r = ratio.convertToDouble();
  if (!(r > 0 && r <= 1))
    return emitError() << "topk: ratio must be in (0, 1], not " << r;
  return success();
}

int64_t MeshAttr::axisIndex(StringRef name) const {
  for (auto [i, n] : llvm::enumerate(getNames()))
    if (n.getValue() == name)
      return i;
  return -1;
}

int64_t MeshAttr::numDevices() const {
  int64_t n = 1;
  for (int64_t s : getSizes())
    n *= s;
  return n;
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

/// `[a, b]`: a list of axis names (bare or quoted).
static ParseResult parseAxisList(AsmParser &parser, SmallVectorImpl<StringAttr> &axes) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
    std::string name;
    if (parser.parseKeywordOrString(&name))
      return failure();
    axes.push_back(parser.getBuilder().getStringAttr(name));
    return success();
  });
}

static void printAxisList(AsmPrinter &printer, ArrayRef<Attribute> axes) {
  printer << "[";
  llvm::interleaveComma(axes, printer, [&](Attribute a) {
    printer.printKeywordOrString(cast<StringAttr>(a).getValue());
  });
  printer << "]";
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  SmallVector<ArrayAttr> dims;
  SmallVector<StringAttr> partial;
  ReductionKind kind = ReductionKind::sum;
  Builder &b = parser.getBuilder();
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
        SmallVector<StringAttr> axes;
        if (parseAxisList(parser, axes))
          return failure();
        dims.push_back(b.getArrayAttr(SmallVector<Attribute>(axes.begin(), axes.end())));
        return success();
      }))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    std::string kindName;
    if (parser.parseKeyword("partial") || parser.parseEqual() ||
        parser.parseKeywordOrString(&kindName))
      return {};
    auto k = symbolizeReductionKind(kindName);
    if (!k) {
      parser.emitError(parser.getCurrentLocation(), "unknown reduction '") << kindName << "'";
      return {};
    }
    kind = *k;
    if (parseAxisList(parser, partial))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(parser.getContext(), dims, partial, kind);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getDims(), printer,
                        [&](ArrayAttr axes) { printAxisList(printer, axes.getValue()); });
  printer << "]";
  if (!getPartial().empty()) {
    printer << ", partial = " << stringifyReductionKind(getPartialKind());
    printAxisList(printer, SmallVector<Attribute>(getPartial().begin(), getPartial().end()));
  }
  printer << ">";
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayRef<ArrayAttr> dims, ArrayRef<StringAttr> partial,
                                   ReductionKind) {
  llvm::SmallSet<StringRef, 8> seen;
  for (ArrayAttr axes : dims) {
    for (Attribute a : axes) {
      auto s = dyn_cast<StringAttr>(a);
      if (!s)
        return emitError() << "sharding axes must be names";
      if (!seen.insert(s.getValue()).second)
        return emitError() << "mesh axis '" << s.getValue()
                           << "' is used more than once in a sharding";
    }
  }
  for (StringAttr s : partial)
    if (!seen.insert(s.getValue()).second)
      return emitError() << "mesh axis '" << s.getValue()
                         << "' is used more than once in a sharding";
  return success();
}

SmallVector<StringRef> ShardingAttr::axesOf(unsigned dim) const {
  SmallVector<StringRef> out;
  if (dim < getDims().size())
    for (Attribute a : getDims()[dim])
      out.push_back(cast<StringAttr>(a).getValue());
  return out;
}

bool ShardingAttr::isReplicated() const {
  return getPartial().empty() &&
         llvm::all_of(getDims(), [](ArrayAttr a) { return a.empty(); });
}
