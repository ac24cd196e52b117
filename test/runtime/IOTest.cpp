//===- IOTest.cpp - .npy and TensorProto readers and the .npy writer -------===//

#include "RuntimeTestUtils.h"
#include "io/Safetensors.h"
#include "io/TensorIO.h"

#include <cmath>

#include <cstdio>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace hpcrt;
using namespace hpcrt::test;

namespace {

// --- a tiny protobuf encoder for TensorProto fixtures ---
void varint(std::vector<uint8_t> &o, uint64_t v) {
  while (v >= 0x80) {
    o.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  o.push_back(static_cast<uint8_t>(v));
}
void key(std::vector<uint8_t> &o, int field, int wire) { varint(o, (field << 3) | wire); }
void bytesField(std::vector<uint8_t> &o, int field, const std::vector<uint8_t> &b) {
  key(o, field, 2);
  varint(o, b.size());
  o.insert(o.end(), b.begin(), b.end());
}
std::vector<uint8_t> dimsPacked(const std::vector<int64_t> &dims) {
  std::vector<uint8_t> o, body;
  for (int64_t d : dims)
    varint(body, static_cast<uint64_t>(d));
  bytesField(o, 1, body);
  return o;
}
template <typename T> std::vector<uint8_t> le(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  memcpy(b.data(), v.data(), b.size());
  return b;
}
std::vector<uint8_t> operator+(std::vector<uint8_t> a, const std::vector<uint8_t> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<uint8_t> dtypeField(int dt) {
  std::vector<uint8_t> o;
  key(o, 2, 0);
  varint(o, dt);
  return o;
}

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/hpcrt_io_" + std::to_string(getpid()) + "_" + name;
}

} // namespace

TEST(Npy, RoundTripEveryDtype) {
  int dtypes[] = {HPCRT_F32, HPCRT_U8, HPCRT_I8,  HPCRT_U16, HPCRT_I16, HPCRT_I32, HPCRT_I64,
                  HPCRT_BOOL, HPCRT_F16, HPCRT_F64, HPCRT_U32, HPCRT_U64, HPCRT_BF16};
  for (int dt : dtypes)
    for (auto shape : {std::vector<int64_t>{}, std::vector<int64_t>{5}, std::vector<int64_t>{2, 3},
                       std::vector<int64_t>{2, 0, 4}}) {
      size_t n = static_cast<size_t>(numElements(shape)) * dtypeSize(dt);
      std::vector<uint8_t> data(n);
      for (size_t i = 0; i < n; ++i)
        data[i] = dt == HPCRT_BOOL ? i % 2 : static_cast<uint8_t>(i * 37 + 1);
      std::vector<uint8_t> file = npyBytes(dt, shape, data.data());
      EXPECT_EQ((file.size() - n) % 64, 0u) << "header padded to 64 bytes";
      HostTensor t = parseNpy(file.data(), file.size(), "x.npy");
      EXPECT_EQ(t.dtype, dt);
      EXPECT_EQ(t.shape, shape);
      EXPECT_EQ(t.data, data) << dtypeName(dt);
    }
}

TEST(Npy, NumpyHeadersV1V2AndFortran1D) {
  std::string h = "{'descr': '<i8', 'fortran_order': True, 'shape': (3,), }";
  std::vector<uint8_t> f = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0};
  uint32_t len = static_cast<uint32_t>(h.size());
  for (int i = 0; i < 4; ++i)
    f.push_back(static_cast<uint8_t>(len >> (8 * i)));
  f.insert(f.end(), h.begin(), h.end());
  std::vector<int64_t> v = {7, -1, 3};
  f = f + le(v);
  HostTensor t = parseNpy(f.data(), f.size(), "v2.npy");
  EXPECT_EQ(t.dtype, HPCRT_I64);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(t.data, le(v));
}

TEST(Npy, MalformedFilesAreErrors) {
  float one = 1;
  std::vector<uint8_t> good = npyBytes(HPCRT_F32, {2, 2}, std::vector<float>(4, one).data());
  std::vector<uint8_t> bad = good;
  bad[1] = 'X';
  EXPECT_NE(errorOf([&] { parseNpy(bad.data(), bad.size(), "a.npy"); }).find("a.npy: not a .npy file"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { parseNpy(good.data(), good.size() - 3, "b.npy"); }).find("truncated"),
            std::string::npos);
  auto withHeader = [](const std::string &h, size_t dataBytes) {
    std::vector<uint8_t> f = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              static_cast<uint8_t>(h.size()), 0};
    f.insert(f.end(), h.begin(), h.end());
    f.resize(f.size() + dataBytes, 0);
    return f;
  };
  auto err = [&](const std::string &h, size_t dataBytes = 8) {
    auto f = withHeader(h, dataBytes);
    return errorOf([&] { parseNpy(f.data(), f.size(), "c.npy"); });
  };
  EXPECT_NE(err("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }").find("big-endian"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }").find("Fortran"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }").find("unsupported .npy dtype"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False, 'shape': (2,x), }").find("malformed"),
            std::string::npos);
  EXPECT_NE(err("{'descr': '<f4', 'fortran_order': False}").find("no 'shape'"), std::string::npos);
  EXPECT_EQ(err("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 16), "");
  // numpy writes and reads minor version 0 only.
  auto minor = withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 16);
  minor[7] = 4;
  EXPECT_EQ(errorOf([&] { parseNpy(minor.data(), minor.size(), "m.npy"); }),
            "m.npy: unsupported .npy version 1.4");
}

TEST(Npy, DataSizeIsExactAndHeaderStrict) {
  auto err = [&](const std::string &h, size_t dataBytes) {
    std::vector<uint8_t> f = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              static_cast<uint8_t>(h.size()), 0};
    f.insert(f.end(), h.begin(), h.end());
    f.resize(f.size() + dataBytes, 0);
    return errorOf([&] { parseNpy(f.data(), f.size(), "d.npy"); });
  };
  std::string f4x2 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  EXPECT_EQ(err(f4x2, 8), "");
  EXPECT_EQ(err(f4x2, 9), "d.npy: 1 bytes after the .npy data (shape [2] needs 8)");
  EXPECT_EQ(err(f4x2, 7), "d.npy: truncated .npy data (7 bytes, shape [2] needs 8)");
  // 2^40 * 2^40 elements: the product overflows 64 bits.
  EXPECT_EQ(err("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, "
                "1099511627776), }", 0),
            "d.npy: .npy shape [1099511627776, 1099511627776] is too large");
  EXPECT_EQ(err("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8),
            "d.npy: malformed .npy header (unexpected key 'x')");
  EXPECT_EQ(err("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8),
            "d.npy: malformed .npy header (key 'descr' given twice)");
  EXPECT_EQ(err("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", 8),
            "d.npy: malformed .npy header (fortran_order is not True or False)");
  EXPECT_EQ(err("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", 8),
            "d.npy: malformed .npy header (text after the dict)");
  EXPECT_EQ(err("{'descr': '|f4', 'fortran_order': False, 'shape': (2,)}", 8),
            "d.npy: unsupported .npy dtype '|f4' (no byte order)");
  // The text 'shape' inside a value is not the key.
  EXPECT_EQ(err("{'descr': 'shape', 'fortran_order': False}", 8),
            "d.npy: malformed .npy header (no 'shape')");
}

TEST(Errors, AreOneLineWhateverTheyQuote) {
  // A key of a corrupted header may hold a newline; the error stays one line.
  EXPECT_EQ(errorOf([] { fail("key 'a\nb\x1e' \xe2\x80\xa8!"); }),
            "key 'a\\x0ab\\x1e' \\xe2\\x80\\xa8!");
}

TEST(Npy, FiniteCheck) {
  HostTensor t;
  t.dtype = HPCRT_F32;
  t.shape = {2, 3};
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  t.data = le(v);
  EXPECT_EQ(errorOf([&] { checkFinite(t, "input 'x'", "--check-inputs"); }), "");
  v[4] = -INFINITY;
  t.data = le(v);
  EXPECT_EQ(errorOf([&] { checkFinite(t, "input 'x'", "--check-inputs"); }),
            "input 'x': element 4 (index [1, 1]) is -Inf (--check-inputs)");
  t.dtype = HPCRT_BF16;
  t.shape = {2};
  t.data = le(std::vector<uint16_t>{0x3f80, 0x7fc0});
  EXPECT_EQ(errorOf([&] { checkFinite(t, "x", "f"); }), "x: element 1 (index [1]) is NaN (f)");
  t.dtype = HPCRT_F16;
  t.data = le(std::vector<uint16_t>{0x7c00, 0});
  EXPECT_EQ(errorOf([&] { checkFinite(t, "x", "f"); }), "x: element 0 (index [0]) is +Inf (f)");
  t.dtype = HPCRT_I16; // integers always pass
  EXPECT_EQ(errorOf([&] { checkFinite(t, "x", "f"); }), "");
}

TEST(TensorProto, EveryDataField) {
  // raw_data
  std::vector<float> f = {1.5f, -2, 3, 4};
  auto raw = dimsPacked({2, 2}) + dtypeField(HPCRT_F32);
  bytesField(raw, 9, le(f));
  HostTensor t = parseTensorProto(raw.data(), raw.size(), "raw.pb");
  EXPECT_EQ(t.dtype, HPCRT_F32);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.data, le(f));
  // float_data, packed; a name field (8) in between is skipped
  auto fd = dtypeField(HPCRT_F32);
  bytesField(fd, 8, {'x'});
  bytesField(fd, 4, le(f));
  fd = fd + dimsPacked({4});
  t = parseTensorProto(fd.data(), fd.size(), "fd.pb");
  EXPECT_EQ(t.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(t.data, le(f));
  // int64_data unpacked, dims unpacked
  std::vector<uint8_t> id;
  key(id, 1, 0);
  varint(id, 3);
  id = id + dtypeField(HPCRT_I64);
  for (int64_t v : std::vector<int64_t>{-5, 0, 1LL << 40}) {
    key(id, 7, 0);
    varint(id, static_cast<uint64_t>(v));
  }
  t = parseTensorProto(id.data(), id.size(), "i64.pb");
  EXPECT_EQ(t.data, le(std::vector<int64_t>{-5, 0, 1LL << 40}));
  // int32_data carrying f16 bits and bools; uint64_data for u32; double_data
  std::vector<uint8_t> h = dimsPacked({2}) + dtypeField(HPCRT_F16), body;
  varint(body, 0x3c00);
  varint(body, 0xc000);
  bytesField(h, 5, body);
  t = parseTensorProto(h.data(), h.size(), "f16.pb");
  EXPECT_EQ(t.data, le(std::vector<uint16_t>{0x3c00, 0xc000}));
  std::vector<uint8_t> b = dimsPacked({3}) + dtypeField(HPCRT_BOOL);
  body.clear();
  for (int v : {1, 0, 1})
    varint(body, v);
  bytesField(b, 5, body);
  EXPECT_EQ(parseTensorProto(b.data(), b.size(), "b.pb").data, (std::vector<uint8_t>{1, 0, 1}));
  std::vector<uint8_t> u = dimsPacked({1}) + dtypeField(HPCRT_U32);
  key(u, 11, 0);
  varint(u, 4000000000u);
  EXPECT_EQ(parseTensorProto(u.data(), u.size(), "u.pb").data, le(std::vector<uint32_t>{4000000000u}));
  std::vector<uint8_t> d = dtypeField(HPCRT_F64); // scalar: no dims
  bytesField(d, 10, le(std::vector<double>{2.25}));
  t = parseTensorProto(d.data(), d.size(), "d.pb");
  EXPECT_TRUE(t.shape.empty());
  EXPECT_EQ(t.data, le(std::vector<double>{2.25}));
}

TEST(TensorProto, SizesAndFieldsAreChecked) {
  auto err = [](const std::vector<uint8_t> &p) {
    return errorOf([&] { parseTensorProto(p.data(), p.size(), "p.pb"); });
  };
  // dims whose product overflows 64 bits.
  std::vector<uint8_t> big = dimsPacked({1LL << 40, 1LL << 40}) + dtypeField(HPCRT_F32);
  bytesField(big, 9, {});
  EXPECT_EQ(err(big), "p.pb: TensorProto shape [1099511627776, 1099511627776] is too large");
  std::vector<uint8_t> neg = dimsPacked({-1}) + dtypeField(HPCRT_F32);
  EXPECT_EQ(err(neg), "p.pb: TensorProto has a negative dimension");
  // raw_data and float_data together.
  std::vector<uint8_t> both = dimsPacked({1}) + dtypeField(HPCRT_F32);
  bytesField(both, 9, le(std::vector<float>{1}));
  bytesField(both, 4, le(std::vector<float>{1}));
  EXPECT_EQ(err(both), "p.pb: TensorProto has both raw_data and typed data fields");
  // int64_data for an i32 tensor; a u8 value of 300.
  std::vector<uint8_t> wrong = dimsPacked({1}) + dtypeField(HPCRT_I32);
  key(wrong, 7, 0);
  varint(wrong, 1);
  EXPECT_EQ(err(wrong), "p.pb: TensorProto of i32 has values in field 7, expected field 5");
  std::vector<uint8_t> range = dimsPacked({1}) + dtypeField(HPCRT_U8);
  key(range, 5, 0);
  varint(range, 300);
  EXPECT_EQ(err(range), "p.pb: TensorProto value 300 is out of the range of u8");
  // float_data as a varint.
  std::vector<uint8_t> wire = dimsPacked({1}) + dtypeField(HPCRT_F32);
  key(wire, 4, 0);
  varint(wire, 1);
  EXPECT_EQ(err(wire), "p.pb: malformed TensorProto (wire type 0 for field 4)");
}

TEST(Safetensors, HeaderIsValidated) {
  auto file = [](const std::string &header, size_t dataBytes) {
    std::vector<uint8_t> f(8);
    for (int i = 0; i < 8; ++i)
      f[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
    f.insert(f.end(), header.begin(), header.end());
    f.resize(f.size() + dataBytes, 0);
    return f;
  };
  auto err = [&](const std::string &header, size_t dataBytes = 16) {
    std::vector<uint8_t> f = file(header, dataBytes);
    return errorOf([&] { parseSafetensors(f.data(), f.size(), "s.st"); });
  };
  EXPECT_EQ(err(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})"),
            "");
  EXPECT_EQ(err(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"),
            "s.st: tensors 'a' and 'b' overlap in the data section");
  EXPECT_EQ(err(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})"),
            "s.st: safetensors header has the key 'a' twice");
  EXPECT_EQ(err(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})"),
            "s.st: tensor 'a' has a shape too large");
  EXPECT_EQ(err(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})"),
            "s.st: tensor 'a' has a negative, non-integer or too large dimension");
  EXPECT_EQ(err(R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})"),
            "s.st: tensor 'a' lies outside the data section (data_offsets end at 32, the "
            "section has 16 bytes; truncated?)");
  EXPECT_EQ(err(R"({"a":[1,2]})"), "s.st: tensor 'a' is not an object");
  // The format's dtypes the runtime lacks are kept; any other name is an error.
  EXPECT_EQ(err(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})"), "");
  EXPECT_EQ(err(R"({"a":{"dtype":"F32 ","shape":[2],"data_offsets":[0,8]}})"),
            "s.st: tensor 'a' has dtype 'F32 ', not a safetensors dtype");
  EXPECT_EQ(err(R"([1])"), "s.st: not a safetensors file (header is not a JSON object)");
  std::vector<uint8_t> huge(8, 0xff);
  EXPECT_NE(errorOf([&] { parseSafetensors(huge.data(), huge.size(), "h.st"); })
                .find("exceeds the file"),
            std::string::npos);
}

TEST(TensorProto, MalformedIsAnError) {
  std::vector<float> f = {1, 2, 3};
  auto p = dimsPacked({2, 2}) + dtypeField(HPCRT_F32);
  bytesField(p, 9, le(f));
  EXPECT_NE(errorOf([&] { parseTensorProto(p.data(), p.size(), "n.pb"); }).find("needs 16"),
            std::string::npos);
  auto q = dimsPacked({3}) + dtypeField(HPCRT_F32);
  bytesField(q, 9, le(f));
  EXPECT_NE(errorOf([&] { parseTensorProto(q.data(), q.size() - 2, "t.pb"); }).find("malformed"),
            std::string::npos);
  std::vector<uint8_t> noType = dimsPacked({1});
  EXPECT_NE(errorOf([&] { parseTensorProto(noType.data(), noType.size(), "x.pb"); }).find("no data_type"),
            std::string::npos);
  auto ext = dimsPacked({1}) + dtypeField(HPCRT_F32);
  key(ext, 14, 0);
  varint(ext, 1);
  EXPECT_NE(errorOf([&] { parseTensorProto(ext.data(), ext.size(), "e.pb"); }).find("external"),
            std::string::npos);
  auto str = dtypeField(8);
  EXPECT_NE(errorOf([&] { parseTensorProto(str.data(), str.size(), "s.pb"); }).find("not supported"),
            std::string::npos);
}

TEST(TensorFiles, ReadByExtensionAndWriteNpy) {
  std::vector<int32_t> v = {1, 2, 3, 4, 5, 6};
  std::string npy = tempPath("a.npy");
  writeNpy(npy, HPCRT_I32, {3, 2}, v.data());
  HostTensor t = readTensorFile(npy);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t.data, le(v));
  std::string pb = tempPath("a.pb");
  auto bytes = dimsPacked({6}) + dtypeField(HPCRT_I32);
  bytesField(bytes, 9, le(v));
  std::ofstream(pb, std::ios::binary).write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  t = readTensorFile(pb);
  EXPECT_EQ(t.dtype, HPCRT_I32);
  EXPECT_EQ(t.data, le(v));
  EXPECT_NE(errorOf([&] { readTensorFile(tempPath("missing.npy")); }).find("cannot open"), std::string::npos);
  EXPECT_EQ(errorOf([&] { readTensorFile(npy, 10); }),
            npy + ": " + std::to_string(npyBytes(HPCRT_I32, {3, 2}, v.data()).size()) +
                " bytes, more than 10 (the most a file of the expected tensor can have)");
  EXPECT_EQ(errorOf([&] { readTensorFile(::testing::TempDir()); }),
            ::testing::TempDir() + ": not a regular file");
  std::string fifo = tempPath("fifo.npy");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(errorOf([&] { readTensorFile(fifo); }), fifo + ": not a regular file");
  std::remove(fifo.c_str());
  std::remove(npy.c_str());
  std::remove(pb.c_str());
}

TEST(TensorFiles, OnnxBackendDataAbs) {
  std::string dir = "/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0/";
  if (access((dir + "input_0.pb").c_str(), R_OK) != 0)
    GTEST_SKIP() << "ONNX backend test data not installed";
  HostTensor in = readTensorFile(dir + "input_0.pb"), out = readTensorFile(dir + "output_0.pb");
  ASSERT_EQ(in.dtype, HPCRT_F32);
  ASSERT_EQ(in.shape, out.shape);
  Val x{HPCRT_F32, in.shape, {}};
  for (size_t i = 0; i < in.data.size() / 4; ++i) {
    float v;
    memcpy(&v, in.data.data() + 4 * i, 4);
    x.v.push_back(v);
  }
  std::vector<double> want;
  for (size_t i = 0; i < out.data.size() / 4; ++i) {
    float v;
    memcpy(&v, out.data.data() + 4 * i, 4);
    want.push_back(v);
  }
  EXPECT_EQ(run1({hpcrt_abs, {x}, {{HPCRT_F32, in.shape}}}), want);
}
