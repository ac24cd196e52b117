//===- TensorIO.cpp - .npy and ONNX TensorProto (.pb) files ----------------===//
//
// .npy: magic, version, little-endian header length, a Python dict literal
// with 'descr', 'fortran_order' and 'shape', then the data. TensorProto:
// protobuf wire format (varints, fixed32/64, length-delimited fields), with
// the data in raw_data or in the typed repeated fields.
//
//===----------------------------------------------------------------------===//

#include "TensorIO.h"

#include "../core/Context.h"

#include <cstring>
#include <fstream>
#include <iterator>

namespace hpcrt {

namespace {

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    fail(path + ": cannot open: " + strerror(errno));
  std::vector<uint8_t> data((std::istreambuf_iterator<char>(f)),
                            std::istreambuf_iterator<char>());
  if (f.bad())
    fail(path + ": read error");
  return data;
}

struct NpyType {
  const char *descr;
  int dtype;
};
const NpyType kNpyTypes[] = {
    {"f4", HPCRT_F32}, {"f8", HPCRT_F64}, {"f2", HPCRT_F16}, {"i1", HPCRT_I8},
    {"u1", HPCRT_U8},  {"i2", HPCRT_I16}, {"u2", HPCRT_U16}, {"i4", HPCRT_I32},
    {"u4", HPCRT_U32}, {"i8", HPCRT_I64}, {"u8", HPCRT_U64}, {"b1", HPCRT_BOOL},
    {"V2", HPCRT_BF16},
};

/// The text of a quoted value after `'key':` in the header dict.
std::string dictValue(const std::string &h, const std::string &key, const std::string &what) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos)
    k = h.find("\"" + key + "\"");
  if (k == std::string::npos)
    fail(what + ": malformed .npy header (no '" + key + "')");
  size_t colon = h.find(':', k + key.size() + 2);
  if (colon == std::string::npos)
    fail(what + ": malformed .npy header");
  size_t s = h.find_first_not_of(" \t", colon + 1);
  if (s == std::string::npos)
    fail(what + ": malformed .npy header");
  if (h[s] == '\'' || h[s] == '"') {
    size_t e = h.find(h[s], s + 1);
    if (e == std::string::npos)
      fail(what + ": malformed .npy header");
    return h.substr(s + 1, e - s - 1);
  }
  if (h[s] == '(') {
    size_t e = h.find(')', s);
    if (e == std::string::npos)
      fail(what + ": malformed .npy header");
    return h.substr(s, e - s + 1);
  }
  size_t e = h.find_first_of(",}", s);
  if (e == std::string::npos)
    fail(what + ": malformed .npy header");
  std::string v = h.substr(s, e - s);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t'))
    v.pop_back();
  return v;
}

} // namespace

NpyLayout parseNpyHeader(const uint8_t *b, size_t size, const std::string &what) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || memcmp(b, magic, 6) != 0)
    fail(what + ": not a .npy file (bad magic)");
  int major = b[6];
  size_t headerLen, pos;
  if (major == 1) {
    headerLen = b[8] | (static_cast<size_t>(b[9]) << 8);
    pos = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      fail(what + ": truncated .npy header");
    headerLen = b[8] | (static_cast<size_t>(b[9]) << 8) | (static_cast<size_t>(b[10]) << 16) |
                (static_cast<size_t>(b[11]) << 24);
    pos = 12;
  } else {
    fail(what + ": unsupported .npy version " + std::to_string(major));
  }
  if (headerLen > size - pos)
    fail(what + ": truncated .npy header");
  std::string h(reinterpret_cast<const char *>(b + pos), headerLen);
  pos += headerLen;

  std::string descr = dictValue(h, "descr", what);
  if (descr.size() < 2)
    fail(what + ": unsupported .npy dtype '" + descr + "'");
  char order = descr[0];
  std::string code = descr.substr(1);
  if (order != '<' && order != '|' && order != '=' && order != '>')
    code = descr, order = '|';
  NpyLayout t;
  for (const NpyType &n : kNpyTypes)
    if (code == n.descr)
      t.dtype = n.dtype;
  if (!t.dtype)
    fail(what + ": unsupported .npy dtype '" + descr + "'");
  size_t esize = dtypeSize(t.dtype);
  if (order == '>' && esize > 1)
    fail(what + ": big-endian .npy data ('" + descr + "') is not supported");

  std::string fortran = dictValue(h, "fortran_order", what);
  std::string shape = dictValue(h, "shape", what);
  if (shape.empty() || shape.front() != '(' || shape.back() != ')')
    fail(what + ": malformed .npy shape '" + shape + "'");
  size_t i = 1;
  while (i < shape.size() - 1) {
    while (i < shape.size() - 1 && (shape[i] == ' ' || shape[i] == ','))
      ++i;
    if (i >= shape.size() - 1)
      break;
    size_t j = i;
    while (j < shape.size() - 1 && isdigit(static_cast<unsigned char>(shape[j])))
      ++j;
    if (j == i || j - i > 15)
      fail(what + ": malformed .npy shape '" + shape + "'");
    t.shape.push_back(std::stoll(shape.substr(i, j - i)));
    i = j;
    while (i < shape.size() - 1 && (shape[i] == 'L' || shape[i] == ' '))
      ++i;
    if (i < shape.size() - 1 && shape[i] != ',')
      fail(what + ": malformed .npy shape '" + shape + "'");
  }
  int nontrivial = 0;
  for (int64_t d : t.shape)
    nontrivial += d > 1;
  if (fortran == "True" && nontrivial > 1)
    fail(what + ": Fortran-order .npy data is not supported (save it in C order)");
  if (fortran != "True" && fortran != "False")
    fail(what + ": malformed .npy header (fortran_order)");

  unsigned __int128 bytes = esize;
  for (int64_t d : t.shape) {
    bytes *= static_cast<uint64_t>(d);
    if (bytes > (static_cast<unsigned __int128>(1) << 62))
      fail(what + ": .npy shape is too large");
  }
  if (bytes > size - pos)
    fail(what + ": truncated .npy data (" + std::to_string(size - pos) + " bytes, shape " +
         shapeString(t.shape) + " needs " + std::to_string(static_cast<uint64_t>(bytes)) + ")");
  t.dataOffset = pos;
  t.dataBytes = static_cast<size_t>(bytes);
  return t;
}

HostTensor parseNpy(const uint8_t *b, size_t size, const std::string &what) {
  NpyLayout layout = parseNpyHeader(b, size, what);
  HostTensor t;
  t.dtype = layout.dtype;
  t.shape = std::move(layout.shape);
  t.data.assign(b + layout.dataOffset, b + layout.dataOffset + layout.dataBytes);
  if (t.dtype == HPCRT_BOOL)
    for (uint8_t &v : t.data)
      v = v != 0;
  return t;
}

//===----------------------------------------------------------------------===//
// TensorProto
//===----------------------------------------------------------------------===//

namespace {

struct Reader {
  const uint8_t *p, *end;
  const std::string &what;
  bool done() const { return p >= end; }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end)
        fail(what + ": malformed TensorProto (truncated varint)");
      uint8_t byte = *p++;
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return v;
    }
    fail(what + ": malformed TensorProto (varint too long)");
  }
  const uint8_t *take(uint64_t n) {
    if (n > static_cast<uint64_t>(end - p))
      fail(what + ": malformed TensorProto (field runs past the end)");
    const uint8_t *q = p;
    p += n;
    return q;
  }
};

template <typename T> void appendLE(std::vector<uint8_t> &out, T v) {
  uint8_t b[sizeof(T)];
  memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

} // namespace

HostTensor parseTensorProto(const uint8_t *bytes, size_t size, const std::string &what) {
  Reader r{bytes, bytes + size, what};
  HostTensor t;
  int64_t dataType = -1;
  bool hasRaw = false;
  std::vector<uint8_t> raw;
  std::vector<float> floats;
  std::vector<double> doubles;
  std::vector<int64_t> ints; // int32_data and int64_data
  std::vector<uint64_t> uints;
  int intField = 0;
  while (!r.done()) {
    uint64_t key = r.varint();
    uint64_t field = key >> 3, wire = key & 7;
    auto packedOr = [&](auto one) {
      if (wire == 2) {
        uint64_t n = r.varint();
        Reader sub{r.take(n), nullptr, what};
        sub.end = sub.p + n;
        while (!sub.done())
          one(sub, field == 4 ? 5 : field == 10 ? 1 : 0);
      } else {
        one(r, wire);
      }
    };
    auto readNum = [&](Reader &rr, uint64_t w, auto &vec) {
      using V = typename std::decay_t<decltype(vec)>::value_type;
      if (w == 0) {
        vec.push_back(static_cast<V>(rr.varint()));
      } else if (w == 5) {
        const uint8_t *q = rr.take(4);
        if constexpr (std::is_same_v<V, float>) {
          float f;
          memcpy(&f, q, 4);
          vec.push_back(f);
        } else {
          uint32_t u;
          memcpy(&u, q, 4);
          vec.push_back(static_cast<V>(u));
        }
      } else if (w == 1) {
        const uint8_t *q = rr.take(8);
        if constexpr (std::is_same_v<V, double>) {
          double d;
          memcpy(&d, q, 8);
          vec.push_back(d);
        } else {
          uint64_t u;
          memcpy(&u, q, 8);
          vec.push_back(static_cast<V>(u));
        }
      } else {
        fail(what + ": malformed TensorProto (wire type " + std::to_string(w) +
             " for field " + std::to_string(field) + ")");
      }
    };
    switch (field) {
    case 1: { // dims
      std::vector<int64_t> dims;
      packedOr([&](Reader &rr, uint64_t w) { readNum(rr, w, dims); });
      for (int64_t d : dims) {
        if (d < 0)
          fail(what + ": TensorProto has a negative dimension");
        t.shape.push_back(d);
      }
      break;
    }
    case 2:
      if (wire != 0)
        fail(what + ": malformed TensorProto (data_type)");
      dataType = static_cast<int64_t>(r.varint());
      break;
    case 4:
      packedOr([&](Reader &rr, uint64_t w) { readNum(rr, w, floats); });
      break;
    case 5:
    case 7:
      if (intField && intField != static_cast<int>(field))
        fail(what + ": TensorProto has both int32_data and int64_data");
      intField = static_cast<int>(field);
      packedOr([&](Reader &rr, uint64_t w) { readNum(rr, w, ints); });
      break;
    case 9:
      if (wire != 2)
        fail(what + ": malformed TensorProto (raw_data)");
      {
        uint64_t n = r.varint();
        const uint8_t *q = r.take(n);
        raw.assign(q, q + n);
        hasRaw = true;
      }
      break;
    case 10:
      packedOr([&](Reader &rr, uint64_t w) { readNum(rr, w, doubles); });
      break;
    case 11:
      packedOr([&](Reader &rr, uint64_t w) { readNum(rr, w, uints); });
      break;
    case 14: // data_location
      if (wire != 0)
        fail(what + ": malformed TensorProto (data_location)");
      if (r.varint() != 0)
        fail(what + ": TensorProto with external data is not supported");
      break;
    case 6:
      fail(what + ": string tensors are not supported");
    default: // name, doc_string, segment, external_data, metadata: skip
      if (wire == 0)
        r.varint();
      else if (wire == 1)
        r.take(8);
      else if (wire == 2)
        r.take(r.varint());
      else if (wire == 5)
        r.take(4);
      else
        fail(what + ": malformed TensorProto (wire type " + std::to_string(wire) + ")");
    }
  }
  if (dataType < 0)
    fail(what + ": TensorProto has no data_type");
  t.dtype = static_cast<int>(dataType);
  size_t esize = dtypeSize(t.dtype);
  if (!esize)
    fail(what + ": TensorProto data_type " + std::to_string(dataType) + " is not supported");
  unsigned __int128 n = 1;
  for (int64_t d : t.shape) {
    n *= static_cast<uint64_t>(d);
    if (n > (static_cast<unsigned __int128>(1) << 60))
      fail(what + ": TensorProto shape is too large");
  }
  size_t numel = static_cast<size_t>(n);
  auto mismatch = [&](size_t have) {
    fail(what + ": TensorProto has " + std::to_string(have) + " values, shape " +
         shapeString(t.shape) + " needs " + std::to_string(numel));
  };
  if (hasRaw) {
    if (raw.size() != numel * esize)
      fail(what + ": TensorProto raw_data has " + std::to_string(raw.size()) +
           " bytes, shape " + shapeString(t.shape) + " needs " +
           std::to_string(numel * esize));
    t.data = std::move(raw);
  } else {
    switch (t.dtype) {
    case HPCRT_F32:
      if (floats.size() != numel) mismatch(floats.size());
      for (float f : floats) appendLE(t.data, f);
      break;
    case HPCRT_F64:
      if (doubles.size() != numel) mismatch(doubles.size());
      for (double d : doubles) appendLE(t.data, d);
      break;
    case HPCRT_I64:
      if (ints.size() != numel) mismatch(ints.size());
      for (int64_t v : ints) appendLE(t.data, v);
      break;
    case HPCRT_U32:
      if (uints.size() != numel) mismatch(uints.size());
      for (uint64_t v : uints) appendLE(t.data, static_cast<uint32_t>(v));
      break;
    case HPCRT_U64:
      if (uints.size() != numel) mismatch(uints.size());
      for (uint64_t v : uints) appendLE(t.data, v);
      break;
    default: // int32_data: i32, i16, i8, u16, u8, bool, f16/bf16 bits
      if (ints.size() != numel) mismatch(ints.size());
      for (int64_t v : ints) {
        if (esize == 4) appendLE(t.data, static_cast<int32_t>(v));
        else if (esize == 2) appendLE(t.data, static_cast<uint16_t>(v));
        else appendLE(t.data, static_cast<uint8_t>(t.dtype == HPCRT_BOOL ? v != 0 : v));
      }
    }
  }
  if (t.dtype == HPCRT_BOOL)
    for (uint8_t &v : t.data)
      v = v != 0;
  return t;
}

HostTensor readTensorFile(const std::string &path) {
  std::vector<uint8_t> data = readFile(path);
  auto endsWith = [&](const char *s) {
    size_t n = strlen(s);
    return path.size() >= n && path.compare(path.size() - n, n, s) == 0;
  };
  bool npy = endsWith(".npy");
  if (!npy && !endsWith(".pb"))
    npy = data.size() >= 6 && data[0] == 0x93 && memcmp(data.data() + 1, "NUMPY", 5) == 0;
  return npy ? parseNpy(data.data(), data.size(), path)
             : parseTensorProto(data.data(), data.size(), path);
}

//===----------------------------------------------------------------------===//
// Writing .npy
//===----------------------------------------------------------------------===//

std::vector<uint8_t> npyBytes(int dtype, const std::vector<int64_t> &shape, const void *data) {
  const char *descr = nullptr;
  for (const NpyType &n : kNpyTypes)
    if (n.dtype == dtype)
      descr = n.descr;
  if (!descr)
    fail("cannot write dtype " + dtypeName(dtype) + " to .npy");
  size_t esize = dtypeSize(dtype);
  std::string order = (esize == 1 || dtype == HPCRT_BF16) ? "|" : "<";
  std::string shapeText = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    shapeText += std::to_string(shape[i]) + (shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : ""));
  shapeText += ")";
  std::string h = "{'descr': '" + order + descr + "', 'fortran_order': False, 'shape': " +
                  shapeText + ", }";
  size_t total = 10 + h.size() + 1;
  h.append((64 - total % 64) % 64, ' ');
  h += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<uint8_t>(h.size() & 0xff));
  out.push_back(static_cast<uint8_t>(h.size() >> 8));
  out.insert(out.end(), h.begin(), h.end());
  size_t bytes = static_cast<size_t>(numElements(shape)) * esize;
  const uint8_t *p = static_cast<const uint8_t *>(data);
  if (bytes)
    out.insert(out.end(), p, p + bytes);
  return out;
}

void writeNpy(const std::string &path, int dtype, const std::vector<int64_t> &shape,
              const void *data) {
  std::vector<uint8_t> bytes = npyBytes(dtype, shape, data);
  std::ofstream f(path, std::ios::binary);
  if (!f)
    fail(path + ": cannot write: " + strerror(errno));
  f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f)
    fail(path + ": write error");
}

} // namespace hpcrt
