//===- OnnxInitializers.cpp - new initializers for an ONNX model ----------===//
//
// A protobuf wire-format walk over ModelProto -> GraphProto -> TensorProto
// (onnx.proto: ModelProto.graph = 7; GraphProto.initializer = 5;
// TensorProto dims = 1, data_type = 2, float_data = 4, int32_data = 5,
// string_data = 6, int64_data = 7, name = 8, raw_data = 9, double_data = 10,
// uint64_data = 11, external_data = 13, data_location = 14;
// StringStringEntryProto key = 1, value = 2). Fields are copied as the
// bytes they were (key, length and payload), so whatever this file does not
// know survives unchanged; only rewritten messages get new lengths.
//
//===----------------------------------------------------------------------===//

#include "OnnxInitializers.h"

#include "InputFile.h"

#include "../core/Context.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

namespace hpcrt {

namespace {

constexpr uint64_t kModelGraph = 7;
constexpr uint64_t kGraphInitializer = 5;
constexpr uint64_t kTensorDims = 1, kTensorDataType = 2, kTensorName = 8, kTensorRawData = 9,
                   kTensorExternalData = 13, kTensorDataLocation = 14;
/// TensorProto fields that hold (or locate) the data: dropped when the
/// data is replaced by raw_data.
bool isDataField(uint64_t field) {
  return field == 4 || field == 5 || field == 6 || field == 7 || field == kTensorRawData ||
         field == 10 || field == 11 || field == kTensorExternalData ||
         field == kTensorDataLocation;
}
constexpr int64_t kExternal = 1; // TensorProto.DataLocation.EXTERNAL

/// One field of a message: its number, wire type, the bytes of the whole
/// field (key included) and of its payload (for wire type 2, after the
/// length; else the value's bytes) and, for wire type 0, its value.
struct Field {
  uint64_t number = 0;
  int wire = 0;
  const uint8_t *begin = nullptr, *end = nullptr;
  const uint8_t *payload = nullptr;
  size_t payloadBytes = 0;
  uint64_t value = 0;
};

class Reader {
public:
  Reader(const uint8_t *p, size_t n, const std::string &what, const char *message)
      : p_(p), end_(p + n), what_(what), message_(message) {}
  bool done() const { return p_ == end_; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_)
        malformed("truncated varint");
      uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        return v;
    }
    malformed("varint too long");
  }

  Field next() {
    Field f;
    f.begin = p_;
    uint64_t key = varint();
    f.number = key >> 3;
    f.wire = static_cast<int>(key & 7);
    if (f.number == 0)
      malformed("field number 0");
    switch (f.wire) {
    case 0:
      f.payload = p_;
      f.value = varint();
      break;
    case 1:
    case 5: {
      size_t n = f.wire == 1 ? 8 : 4;
      need(n);
      f.payload = p_;
      p_ += n;
      break;
    }
    case 2: {
      uint64_t n = varint();
      need(n);
      f.payload = p_;
      p_ += n;
      break;
    }
    default:
      malformed("wire type " + std::to_string(f.wire));
    }
    f.end = p_;
    f.payloadBytes = static_cast<size_t>(f.end - f.payload);
    return f;
  }

  [[noreturn]] void malformed(const std::string &why) const {
    fail(what_ + ": malformed " + message_ + " (" + why + ")");
  }

private:
  const uint8_t *p_, *end_;
  const std::string &what_;
  const char *message_;

  void need(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_))
      malformed("a field runs past the end");
  }
};

void putVarint(std::vector<uint8_t> &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

void putBytes(std::vector<uint8_t> &out, const void *data, size_t n) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  out.insert(out.end(), p, p + n);
}

/// A length-delimited field `number` holding `payload`.
void putMessage(std::vector<uint8_t> &out, uint64_t number, const void *payload, size_t n) {
  putVarint(out, number << 3 | 2);
  putVarint(out, n);
  putBytes(out, payload, n);
}

void copyField(std::vector<uint8_t> &out, const Field &f) {
  putBytes(out, f.begin, static_cast<size_t>(f.end - f.begin));
}

/// What an initializer says about itself.
struct TensorHeader {
  std::string name;
  int64_t dataType = 0;
  std::vector<int64_t> dims;
  bool external = false;
  std::map<std::string, std::string> externalData; ///< location, offset, length
};

TensorHeader readTensorHeader(const Field &tensor, const std::string &what) {
  TensorHeader h;
  Reader r(tensor.payload, tensor.payloadBytes, what, "TensorProto (an initializer)");
  while (!r.done()) {
    Field f = r.next();
    if (f.number == kTensorName && f.wire == 2) {
      h.name.assign(reinterpret_cast<const char *>(f.payload), f.payloadBytes);
    } else if (f.number == kTensorDataType && f.wire == 0) {
      h.dataType = static_cast<int64_t>(f.value);
    } else if (f.number == kTensorDims && f.wire == 0) {
      h.dims.push_back(static_cast<int64_t>(f.value));
    } else if (f.number == kTensorDims && f.wire == 2) {
      Reader packed(f.payload, f.payloadBytes, what, "TensorProto dims");
      while (!packed.done())
        h.dims.push_back(static_cast<int64_t>(packed.varint()));
    } else if (f.number == kTensorDataLocation && f.wire == 0) {
      h.external = static_cast<int64_t>(f.value) == kExternal;
    } else if (f.number == kTensorExternalData && f.wire == 2) {
      Reader entry(f.payload, f.payloadBytes, what, "TensorProto external_data");
      std::string key, value;
      while (!entry.done()) {
        Field e = entry.next();
        std::string text(reinterpret_cast<const char *>(e.payload), e.payloadBytes);
        if (e.number == 1 && e.wire == 2)
          key = text;
        else if (e.number == 2 && e.wire == 2)
          value = text;
      }
      h.externalData[key] = value;
    }
  }
  return h;
}

/// The tensor `tensor` with raw_data `data` in place of its data fields.
std::vector<uint8_t> withRawData(const Field &tensor, const void *data, size_t bytes,
                                 const std::string &what) {
  std::vector<uint8_t> out;
  out.reserve(tensor.payloadBytes + bytes + 16);
  Reader r(tensor.payload, tensor.payloadBytes, what, "TensorProto (an initializer)");
  while (!r.done()) {
    Field f = r.next();
    if (!isDataField(f.number))
      copyField(out, f);
  }
  putMessage(out, kTensorRawData, data, bytes);
  return out;
}

uint64_t parseCount(const std::string &text, const std::string &where) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    fail(where + " is not a byte count: '" + text + "'");
  return std::stoull(text);
}

/// The bytes of an external initializer, read from its file.
std::vector<uint8_t> readExternal(const TensorHeader &h, const std::string &modelDir,
                                  const std::string &what) {
  std::string where = what + ": initializer '" + h.name + "' external_data";
  auto loc = h.externalData.find("location");
  if (loc == h.externalData.end() || loc->second.empty())
    fail(where + " has no location");
  std::string path = loc->second[0] == '/' ? loc->second : modelDir + "/" + loc->second;
  uint64_t offset = 0, length = 0;
  bool haveLength = false;
  if (auto it = h.externalData.find("offset"); it != h.externalData.end())
    offset = parseCount(it->second, where + " offset");
  if (auto it = h.externalData.find("length"); it != h.externalData.end()) {
    length = parseCount(it->second, where + " length");
    haveLength = true;
  }
  std::string of = " (the external data of initializer '" + h.name + "' of " + what + ")";
  std::string cannotOpen = "cannot open the external data of initializer '" + h.name + "' of " + what;
  // Links resolved, the file must lie inside the model's directory.
  char *real = realpath(path.c_str(), nullptr);
  int err = errno;
  char *realDir = realpath(modelDir.c_str(), nullptr);
  std::string resolved = real ? real : "", dir = realDir ? realDir : "";
  free(real);
  free(realDir);
  if (resolved.empty())
    fail(path + ": " + cannotOpen + ": " + strerror(err));
  if (dir.empty() || resolved.compare(0, dir.size() + 1, dir + "/") != 0)
    fail(path + ": outside the model's directory " + modelDir + " after resolving links" + of);
  InputFile f(resolved, cannotOpen);
  if (offset > f.size() || (haveLength && length > f.size() - offset))
    fail(path + ": bytes " + std::to_string(offset) + ".." +
         (haveLength ? std::to_string(offset + length) : std::string("end")) +
         " are past its end (" + std::to_string(f.size()) + " bytes)" + of);
  if (!haveLength)
    length = f.size() - offset;
  std::vector<uint8_t> data(static_cast<size_t>(length));
  f.readAt(offset, data.data(), data.size());
  return data;
}

std::string describe(int64_t dtype, const std::vector<int64_t> &dims) {
  return dtypeName(static_cast<int>(dtype)) + " " + shapeString(dims);
}

/// The graph with its initializers rewritten; `seen` collects the names
/// of the initializers replaced.
std::vector<uint8_t> rewriteGraph(const Field &graph,
                                  const std::map<std::string, InitializerData> &values,
                                  const std::string &modelDir, const std::string &what,
                                  std::set<std::string> &seen, InitializerRewrite &report) {
  std::vector<uint8_t> out;
  out.reserve(graph.payloadBytes);
  Reader r(graph.payload, graph.payloadBytes, what, "GraphProto");
  while (!r.done()) {
    Field f = r.next();
    if (f.number != kGraphInitializer || f.wire != 2) {
      copyField(out, f);
      continue;
    }
    TensorHeader h = readTensorHeader(f, what);
    auto it = values.find(h.name);
    if (it != values.end()) {
      const InitializerData &v = it->second;
      if (h.dataType != v.dtype || h.dims != v.shape)
        fail(what + ": initializer '" + h.name + "' is " + describe(h.dataType, h.dims) +
             ", the trained parameter is " + describe(v.dtype, v.shape));
      if (v.bytes != static_cast<size_t>(numElements(v.shape)) * dtypeSize(v.dtype))
        fail(what + ": initializer '" + h.name + "': " + std::to_string(v.bytes) +
             " bytes of trained data for " + describe(v.dtype, v.shape));
      std::vector<uint8_t> t = withRawData(f, v.data, v.bytes, what);
      putMessage(out, kGraphInitializer, t.data(), t.size());
      seen.insert(h.name);
      ++report.replaced;
    } else if (h.external) {
      std::vector<uint8_t> data = readExternal(h, modelDir, what);
      uint64_t need = 0;
      size_t esize = dtypeSize(static_cast<int>(h.dataType));
      if (esize && (!checkedTensorBytes(h.dims, esize, need) || data.size() != need))
        fail(what + ": initializer '" + h.name + "' has " + std::to_string(data.size()) +
             " bytes of external data, " + describe(h.dataType, h.dims) + " needs " +
             std::to_string(need));
      std::vector<uint8_t> t = withRawData(f, data.data(), data.size(), what);
      putMessage(out, kGraphInitializer, t.data(), t.size());
      ++report.inlined;
    } else {
      copyField(out, f);
    }
  }
  return out;
}

} // namespace

InitializerRewrite replaceInitializers(const uint8_t *model, size_t size,
                                       const std::map<std::string, InitializerData> &values,
                                       const std::string &modelDir, const std::string &what) {
  InitializerRewrite report;
  std::vector<uint8_t> &out = report.model;
  out.reserve(size);
  std::set<std::string> seen;
  bool haveGraph = false;
  Reader r(model, size, what, "ONNX model");
  while (!r.done()) {
    Field f = r.next();
    if (f.number != kModelGraph || f.wire != 2) {
      copyField(out, f);
      continue;
    }
    haveGraph = true;
    std::vector<uint8_t> g = rewriteGraph(f, values, modelDir, what, seen, report);
    putMessage(out, kModelGraph, g.data(), g.size());
  }
  if (!haveGraph)
    fail(what + ": not an ONNX model (no graph)");
  for (const auto &[name, v] : values)
    if (!seen.count(name))
      fail(what + ": no initializer '" + name + "' (a trained parameter, " +
           describe(v.dtype, v.shape) + ")");
  return report;
}

} // namespace hpcrt
