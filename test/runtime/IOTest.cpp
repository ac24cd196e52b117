//===- IOTest.cpp - .npy and TensorProto readers and the .npy writer -------===//

#include "RuntimeTestUtils.h"
#include "io/TensorIO.h"

#include <cstdio>
#include <fstream>
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
  auto withHeader = [](const std::string &h) {
    std::vector<uint8_t> f = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                              static_cast<uint8_t>(h.size()), 0};
    f.insert(f.end(), h.begin(), h.end());
    f.resize(f.size() + 64, 0);
    return f;
  };
  auto err = [&](const std::string &h) {
    auto f = withHeader(h);
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
  EXPECT_EQ(err("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }"), "");
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
