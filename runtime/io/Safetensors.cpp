//===- Safetensors.cpp - safetensors headers: parse and build -------------===//
//
// The JSON header through nlohmann::json: dtype names of the format (F64,
// F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL), shapes,
// data_offsets checked against the data section, and "__metadata__" whose
// values must be strings.
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"

#include "../core/Context.h"

#include <nlohmann/json.hpp>

#include <cstring>

using json = nlohmann::json;

namespace hpcrt {

namespace {
struct DtypeName {
  int dtype;
  const char *name;
};
const DtypeName kDtypeNames[] = {
    {HPCRT_F64, "F64"}, {HPCRT_F32, "F32"}, {HPCRT_F16, "F16"}, {HPCRT_BF16, "BF16"},
    {HPCRT_I64, "I64"}, {HPCRT_I32, "I32"}, {HPCRT_I16, "I16"}, {HPCRT_I8, "I8"},
    {HPCRT_U64, "U64"}, {HPCRT_U32, "U32"}, {HPCRT_U16, "U16"}, {HPCRT_U8, "U8"},
    {HPCRT_BOOL, "BOOL"},
};
} // namespace

std::string safetensorsDtype(int dtype) {
  for (const DtypeName &d : kDtypeNames)
    if (d.dtype == dtype)
      return d.name;
  return "";
}

const SafetensorsRecord *SafetensorsFile::find(const std::string &name) const {
  for (const SafetensorsRecord &r : records)
    if (r.name == name)
      return &r;
  return nullptr;
}

SafetensorsFile parseSafetensors(const uint8_t *p, size_t size, const std::string &what) {
  if (size < 8)
    fail(what + ": not a safetensors file (shorter than its 8-byte header size)");
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= static_cast<uint64_t>(p[i]) << (8 * i);
  if (headerBytes > size - 8)
    fail(what + ": not a safetensors file (header size " + std::to_string(headerBytes) +
         " exceeds the file; truncated?)");
  json header;
  try {
    header = json::parse(p + 8, p + 8 + headerBytes);
  } catch (const json::exception &) {
    fail(what + ": not a safetensors file (header is not JSON)");
  }
  if (!header.is_object())
    fail(what + ": not a safetensors file (header is not a JSON object)");
  SafetensorsFile f;
  f.dataOffset = 8 + headerBytes;
  f.dataBytes = size - f.dataOffset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const json &v = it.value();
    if (it.key() == "__metadata__") {
      if (!v.is_object())
        fail(what + ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail(what + ": __metadata__." + m.key() + " is not a string");
        f.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    std::string where = what + ": tensor '" + it.key() + "'";
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() ||
        !v.contains("shape") || !v["shape"].is_array() || !v.contains("data_offsets") ||
        !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      fail(where + " has no dtype, shape and data_offsets");
    SafetensorsRecord r;
    r.name = it.key();
    r.dtypeName = v["dtype"].get<std::string>();
    for (const DtypeName &d : kDtypeNames)
      if (r.dtypeName == d.name)
        r.dtype = d.dtype;
    unsigned __int128 numel = 1;
    for (const json &d : v["shape"]) {
      if (!d.is_number_unsigned())
        fail(where + " has a negative or non-integer dimension");
      r.shape.push_back(d.get<int64_t>());
      numel *= d.get<uint64_t>();
      if (numel > (static_cast<unsigned __int128>(1) << 60))
        fail(where + " has a shape too large");
    }
    const json &off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail(where + " has malformed data_offsets");
    r.begin = off[0].get<uint64_t>();
    r.end = off[1].get<uint64_t>();
    if (r.begin > r.end || r.end > f.dataBytes)
      fail(where + " lies outside the data section (" + std::to_string(f.dataBytes) +
           " bytes; truncated?)");
    if (r.dtype && static_cast<unsigned __int128>(r.end - r.begin) != numel * dtypeSize(r.dtype))
      fail(where + " has " + std::to_string(r.end - r.begin) + " bytes, its dtype and shape need " +
           std::to_string(static_cast<uint64_t>(numel * dtypeSize(r.dtype))));
    f.records.push_back(std::move(r));
  }
  return f;
}

std::vector<uint8_t> safetensorsHeader(const std::vector<SafetensorsEntry> &entries,
                                       const std::map<std::string, std::string> &metadata) {
  json h = json::object();
  if (!metadata.empty())
    h["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntry &e : entries) {
    std::string dt = safetensorsDtype(e.dtype);
    if (dt.empty())
      fail("tensor '" + e.name + "': dtype " + dtypeName(e.dtype) +
           " has no safetensors name");
    h[e.name] = {{"dtype", dt},
                 {"shape", e.shape},
                 {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  std::string text = h.dump();
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');
  uint64_t n = text.size();
  std::vector<uint8_t> out(8 + text.size());
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<uint8_t>(n >> (8 * i));
  memcpy(out.data() + 8, text.data(), text.size());
  return out;
}

} // namespace hpcrt
