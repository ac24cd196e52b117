//===- TensorIO.cpp - .npy and ONNX TensorProto (.pb) files ----------------===//
//
// .npy: magic, version, little-endian header length, a Python dict literal
// with 'descr', 'fortran_order' and 'shape', then the data. TensorProto:
// protobuf wire format (varints, fixed32/64, length-delimited fields), with
// the data in raw_data or in the typed repeated fields.
//
//===----------------------------------------------------------------------===//

#include "TensorIO.h"

#include "InputFile.h"

#include "../core/Context.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hpcrt {

namespace {

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

/// The header dict of a .npy file, as numpy writes it: exactly the keys
/// 'descr' (a string), 'fortran_order' (True or False) and 'shape' (a
/// tuple of non-negative integers), each once, then only padding.
struct NpyDict {
  std::string descr, fortran;
  std::vector<int64_t> shape;
};

class NpyDictParser {
public:
  NpyDictParser(const std::string &h, const std::string &what) : h_(h), what_(what) {}

  NpyDict parse() {
    NpyDict d;
    bool seen[3] = {false, false, false};
    skip();
    expect('{');
    while (true) {
      skip();
      if (peek() == '}')
        break;
      std::string key = quoted();
      skip();
      expect(':');
      skip();
      int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
      if (k < 0)
        bad("unexpected key '" + key + "'");
      if (seen[k])
        bad("key '" + key + "' given twice");
      seen[k] = true;
      if (k == 0)
        d.descr = quoted();
      else if (k == 1)
        d.fortran = word();
      else
        d.shape = tuple();
      skip();
      if (peek() == ',')
        ++i_;
      else if (peek() != '}')
        bad("expected ',' or '}'");
    }
    ++i_;
    for (; i_ < h_.size(); ++i_)
      if (h_[i_] != ' ' && h_[i_] != '\n')
        bad("text after the dict");
    const char *names[3] = {"descr", "fortran_order", "shape"};
    for (int k = 0; k < 3; ++k)
      if (!seen[k])
        fail(what_ + ": malformed .npy header (no '" + names[k] + "')");
    return d;
  }

private:
  const std::string &h_;
  const std::string &what_;
  size_t i_ = 0;

  [[noreturn]] void bad(const std::string &why) {
    fail(what_ + ": malformed .npy header (" + why + ")");
  }
  char peek() const { return i_ < h_.size() ? h_[i_] : '\0'; }
  void skip() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n')
      ++i_;
  }
  void expect(char c) {
    if (peek() != c)
      bad(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string quoted() {
    char q = peek();
    if (q != '\'' && q != '"')
      bad("expected a quoted string");
    size_t e = h_.find(q, i_ + 1);
    if (e == std::string::npos)
      bad("unterminated string");
    std::string s = h_.substr(i_ + 1, e - i_ - 1);
    i_ = e + 1;
    return s;
  }
  std::string word() {
    size_t s = i_;
    while (isalpha(static_cast<unsigned char>(peek())))
      ++i_;
    std::string w = h_.substr(s, i_ - s);
    if (w != "True" && w != "False")
      bad("fortran_order is not True or False");
    return w;
  }
  /// A Python tuple literal of integers: (), (3,), (2, 3), (2, 3,); not
  /// (3), which is the integer 3, nor Python 2's (3L).
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    size_t open = i_;
    bool comma = false; ///< the last dimension was followed by ','
    expect('(');
    while (true) {
      skip();
      if (peek() == ')')
        break;
      size_t s = i_;
      while (isdigit(static_cast<unsigned char>(peek())))
        ++i_;
      if (i_ == s || i_ - s > 18)
        shapeError(open);
      dims.push_back(std::stoll(h_.substr(s, i_ - s)));
      skip();
      comma = peek() == ',';
      if (comma)
        ++i_;
      else if (peek() != ')')
        shapeError(open);
    }
    if (dims.size() == 1 && !comma)
      shapeError(open);
    ++i_;
    return dims;
  }
  [[noreturn]] void shapeError(size_t open) {
    size_t close = h_.find(')', open);
    fail(what_ + ": malformed .npy shape '" +
         h_.substr(open, close == std::string::npos ? std::string::npos : close - open + 1) +
         "'");
  }
};

/// The dtype of a .npy descr ('<f4', '|u1', '|V2' for bf16, ...).
int npyDtype(const std::string &descr, const std::string &what) {
  char order = descr.empty() ? '\0' : descr[0];
  std::string code = descr.size() > 1 ? descr.substr(1) : "";
  if (order != '<' && order != '|' && order != '=' && order != '>')
    code = descr, order = '|';
  int dtype = 0;
  for (const NpyType &n : kNpyTypes)
    if (code == n.descr)
      dtype = n.dtype;
  if (!dtype)
    fail(what + ": unsupported .npy dtype '" + descr + "'");
  size_t esize = dtypeSize(dtype);
  if (order == '>' && esize > 1)
    fail(what + ": big-endian .npy data ('" + descr + "') is not supported");
  if (order == '|' && esize > 1 && dtype != HPCRT_BF16)
    fail(what + ": unsupported .npy dtype '" + descr + "' (no byte order)");
  return dtype;
}

} // namespace

NpyLayout parseNpyHeader(const uint8_t *b, size_t size, const std::string &what) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || memcmp(b, magic, 6) != 0)
    fail(what + ": not a .npy file (bad magic)");
  int major = b[6];
  size_t headerLen, pos;
  // numpy writes minor version 0 only, and refuses any other.
  if (b[7] != 0)
    fail(what + ": unsupported .npy version " + std::to_string(major) + "." +
         std::to_string(b[7]));
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
  if (headerLen > kMaxNpyHeaderBytes)
    fail(what + ": .npy header of " + std::to_string(headerLen) + " bytes is longer than " +
         std::to_string(kMaxNpyHeaderBytes));
  if (headerLen > size - pos)
    fail(what + ": truncated .npy header");
  std::string h(reinterpret_cast<const char *>(b + pos), headerLen);
  pos += headerLen;

  NpyDict d = NpyDictParser(h, what).parse();
  NpyLayout t;
  t.dtype = npyDtype(d.descr, what);
  t.shape = std::move(d.shape);
  int nontrivial = 0;
  for (int64_t dim : t.shape)
    nontrivial += dim > 1;
  if (d.fortran == "True" && nontrivial > 1)
    fail(what + ": Fortran-order .npy data is not supported (save it in C order)");

  uint64_t bytes = 0;
  if (!checkedTensorBytes(t.shape, dtypeSize(t.dtype), bytes))
    fail(what + ": .npy shape " + shapeString(t.shape) + " is too large");
  if (bytes > size - pos)
    fail(what + ": truncated .npy data (" + std::to_string(size - pos) + " bytes, shape " +
         shapeString(t.shape) + " needs " + std::to_string(bytes) + ")");
  if (bytes < size - pos)
    fail(what + ": " + std::to_string(size - pos - bytes) +
         " bytes after the .npy data (shape " + shapeString(t.shape) + " needs " +
         std::to_string(bytes) + ")");
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
      if (shift == 63 && byte > 1)
        fail(what + ": malformed TensorProto (varint overflows 64 bits)");
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

/// Whether `v`, from int32_data, is a value of `dtype` (the field holds
/// i32, i16, i8, u16, u8, bool, and f16/bf16 as their 16 bits).
bool int32DataFits(int dtype, int64_t v) {
  switch (dtype) {
  case HPCRT_I32: return v >= INT32_MIN && v <= INT32_MAX;
  case HPCRT_I16: return v >= INT16_MIN && v <= INT16_MAX;
  case HPCRT_I8: return v >= INT8_MIN && v <= INT8_MAX;
  case HPCRT_U16: case HPCRT_F16: case HPCRT_BF16: return v >= 0 && v <= UINT16_MAX;
  case HPCRT_U8: return v >= 0 && v <= UINT8_MAX;
  case HPCRT_BOOL: return v == 0 || v == 1;
  default: return true;
  }
}

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
    // The wire type of one value of a numeric field: fixed32 for
    // float_data, fixed64 for double_data, varint for the others.
    uint64_t valueWire = field == 4 ? 5 : field == 10 ? 1 : 0;
    auto packedOr = [&](auto one) {
      if (wire != 2 && wire != valueWire)
        fail(what + ": malformed TensorProto (wire type " + std::to_string(wire) +
             " for field " + std::to_string(field) + ")");
      if (wire == 2) {
        uint64_t n = r.varint();
        Reader sub{r.take(n), nullptr, what};
        sub.end = sub.p + n;
        while (!sub.done())
          one(sub, valueWire);
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
      if (t.shape.size() > kMaxTensorProtoDims)
        fail(what + ": TensorProto has more than " + std::to_string(kMaxTensorProtoDims) +
             " dimensions");
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
  uint64_t n = 0, total = 0;
  if (!checkedTensorBytes(t.shape, esize, total, &n))
    fail(what + ": TensorProto shape " + shapeString(t.shape) + " is too large");
  size_t numel = static_cast<size_t>(n);
  bool typed = !floats.empty() || !doubles.empty() || !ints.empty() || !uints.empty();
  if (hasRaw && typed)
    fail(what + ": TensorProto has both raw_data and typed data fields");
  // The one typed field the dtype's values belong in (onnx.proto).
  int want = t.dtype == HPCRT_F32   ? 4
             : t.dtype == HPCRT_F64 ? 10
             : t.dtype == HPCRT_I64 ? 7
             : (t.dtype == HPCRT_U32 || t.dtype == HPCRT_U64) ? 11
                                                                : 5;
  int have = !floats.empty() ? 4 : !doubles.empty() ? 10 : !uints.empty() ? 11 : intField;
  bool several = (!floats.empty()) + (!doubles.empty()) + (!uints.empty()) + (!ints.empty()) > 1;
  if (typed && (several || have != want))
    fail(what + ": TensorProto of " + dtypeName(t.dtype) + " has values in field " +
         std::to_string(several ? 0 : have) + ", expected field " + std::to_string(want));
  auto mismatch = [&](size_t have) {
    fail(what + ": TensorProto has " + std::to_string(have) + " values, shape " +
         shapeString(t.shape) + " needs " + std::to_string(numel));
  };
  auto outOfRange = [&](int64_t v) {
    fail(what + ": TensorProto value " + std::to_string(v) + " is out of the range of " +
         dtypeName(t.dtype));
  };
  if (hasRaw) {
    if (raw.size() != total)
      fail(what + ": TensorProto raw_data has " + std::to_string(raw.size()) +
           " bytes, shape " + shapeString(t.shape) + " needs " + std::to_string(total));
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
      for (uint64_t v : uints) {
        if (v > UINT32_MAX)
          outOfRange(static_cast<int64_t>(v));
        appendLE(t.data, static_cast<uint32_t>(v));
      }
      break;
    case HPCRT_U64:
      if (uints.size() != numel) mismatch(uints.size());
      for (uint64_t v : uints) appendLE(t.data, v);
      break;
    default: // int32_data: i32, i16, i8, u16, u8, bool, f16/bf16 bits
      if (ints.size() != numel) mismatch(ints.size());
      for (int64_t v : ints) {
        if (!int32DataFits(t.dtype, v))
          outOfRange(v);
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

uint64_t tensorFileLimit(uint64_t bytes, uint64_t numel) {
  uint64_t limit = kMaxNpyHeaderBytes + 12;
  uint64_t perValue = 0;
  if (__builtin_mul_overflow(numel, uint64_t(16), &perValue) ||
      __builtin_add_overflow(limit, std::max(bytes, perValue), &limit))
    return UINT64_MAX;
  return limit;
}

HostTensor readTensorFile(const std::string &path, uint64_t maxBytes) {
  InputFile file(path);
  std::vector<uint8_t> data =
      file.readAll(maxBytes, maxBytes == UINT64_MAX
                                 ? std::string("the reader can hold")
                                 : std::to_string(maxBytes) +
                                       " (the most a file of the expected tensor can have)");
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
// Non-finite values
//===----------------------------------------------------------------------===//

namespace {
/// 0: finite; 1: NaN; 2: +Inf; 3: -Inf (of one element's bits).
template <typename Bits>
int classify(Bits bits, Bits expMask, Bits mantMask, Bits signMask) {
  if ((bits & expMask) != expMask)
    return 0;
  if (bits & mantMask)
    return 1;
  return bits & signMask ? 3 : 2;
}

int classifyAt(int dtype, const uint8_t *p) {
  switch (dtype) {
  case HPCRT_F32: {
    uint32_t b;
    memcpy(&b, p, 4);
    return classify<uint32_t>(b, 0x7f800000u, 0x007fffffu, 0x80000000u);
  }
  case HPCRT_F64: {
    uint64_t b;
    memcpy(&b, p, 8);
    return classify<uint64_t>(b, 0x7ff0000000000000ull, 0x000fffffffffffffull,
                              0x8000000000000000ull);
  }
  case HPCRT_F16: {
    uint16_t b;
    memcpy(&b, p, 2);
    return classify<uint16_t>(b, 0x7c00, 0x03ff, 0x8000);
  }
  case HPCRT_BF16: {
    uint16_t b;
    memcpy(&b, p, 2);
    return classify<uint16_t>(b, 0x7f80, 0x007f, 0x8000);
  }
  default:
    return 0;
  }
}
} // namespace

void checkFinite(const HostTensor &t, const std::string &what, const std::string &flag) {
  checkFinite(t.dtype, t.shape, t.data.data(), t.data.size(), what, flag);
}

void checkFinite(int dtype, const std::vector<int64_t> &shape, const uint8_t *data,
                 size_t bytes, const std::string &what, const std::string &flag) {
  if (dtype != HPCRT_F32 && dtype != HPCRT_F64 && dtype != HPCRT_F16 && dtype != HPCRT_BF16)
    return;
  size_t esize = dtypeSize(dtype);
  size_t n = bytes / esize;
  for (size_t i = 0; i < n; ++i) {
    int kind = classifyAt(dtype, data + i * esize);
    if (!kind)
      continue;
    std::vector<int64_t> index(shape.size());
    uint64_t rest = i;
    for (size_t d = shape.size(); d-- > 0;) {
      index[d] = static_cast<int64_t>(rest % static_cast<uint64_t>(shape[d]));
      rest /= static_cast<uint64_t>(shape[d]);
    }
    static const char *names[] = {"", "NaN", "+Inf", "-Inf"};
    fail(what + ": element " + std::to_string(i) + " (index " + shapeString(index) + ") is " +
         names[kind] + " (" + flag + ")");
  }
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
  FILE *f = fopen(path.c_str(), "wb");
  if (!f)
    fail(path + ": cannot write: " + strerror(errno));
  // A full disk may show only when the buffer is flushed or the file closed.
  bool ok = fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && fflush(f) == 0;
  int err = errno;
  if (fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok)
    fail(path + ": write error: " + strerror(err));
}

} // namespace hpcrt
