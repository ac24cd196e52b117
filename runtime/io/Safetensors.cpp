//===- Safetensors.cpp - safetensors headers: parse and build -------------===//
//
// The JSON header through nlohmann::json: dtype names of the format (F64,
// F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL), shapes,
// data_offsets checked against the data section and against each other,
// keys unique, and "__metadata__" whose values must be strings.
//
//===----------------------------------------------------------------------===//

#include "Safetensors.h"

#include "InputFile.h"

#include "../core/Context.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

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

namespace {

/// Parses the JSON header; a key given twice in one object is an error
/// (nlohmann would keep the last one silently).
json parseHeaderJson(const uint8_t *p, size_t bytes, const std::string &what) {
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto check = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(p, p + bytes, check);
  } catch (const json::exception &) {
    fail(what + ": not a safetensors file (header is not JSON)");
  }
  if (!duplicate.empty())
    fail(what + ": safetensors header has the key '" + duplicate + "' twice");
  if (!header.is_object())
    fail(what + ": not a safetensors file (header is not a JSON object)");
  return header;
}

/// One tensor entry: exactly dtype, shape and data_offsets, in the data
/// section, with the bytes its dtype and shape need (when the runtime
/// knows the dtype).
SafetensorsRecord parseRecord(const std::string &name, const json &v, uint64_t dataBytes,
                              const std::string &what) {
  std::string where = what + ": tensor '" + name + "'";
  if (!v.is_object())
    fail(where + " is not an object");
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      fail(where + " has an unknown field '" + it.key() + "'");
  if (!v.contains("dtype") || !v["dtype"].is_string())
    fail(where + " has no dtype string");
  if (!v.contains("shape") || !v["shape"].is_array())
    fail(where + " has no shape array");
  if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
      v["data_offsets"].size() != 2 || !v["data_offsets"][0].is_number_unsigned() ||
      !v["data_offsets"][1].is_number_unsigned())
    fail(where + " has no data_offsets [begin, end] of two non-negative integers");
  SafetensorsRecord r;
  r.name = name;
  r.dtypeName = v["dtype"].get<std::string>();
  for (const DtypeName &d : kDtypeNames)
    if (r.dtypeName == d.name)
      r.dtype = d.dtype;
  // The format's other dtypes are kept (dtype 0: a tensor the runtime
  // cannot use, which is an error only where it is read); a name outside
  // the format is a malformed file.
  static const char *const kOtherFormatDtypes[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                                  "F6_E3M2", "F4", "C64"};
  if (!r.dtype && std::none_of(std::begin(kOtherFormatDtypes), std::end(kOtherFormatDtypes),
                               [&](const char *n) { return r.dtypeName == n; }))
    fail(where + " has dtype '" + r.dtypeName + "', not a safetensors dtype");
  for (const json &d : v["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxTensorBytes)
      fail(where + " has a negative, non-integer or too large dimension");
    r.shape.push_back(d.get<int64_t>());
  }
  uint64_t need = 0;
  if (!checkedTensorBytes(r.shape, r.dtype ? dtypeSize(r.dtype) : 1, need))
    fail(where + " has a shape too large");
  r.begin = v["data_offsets"][0].get<uint64_t>();
  r.end = v["data_offsets"][1].get<uint64_t>();
  if (r.begin > r.end)
    fail(where + " has data_offsets [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
         "] that end before they begin");
  if (r.end > dataBytes)
    fail(where + " lies outside the data section (data_offsets end at " + std::to_string(r.end) +
         ", the section has " + std::to_string(dataBytes) + " bytes; truncated?)");
  if (r.dtype && r.end - r.begin != need)
    fail(where + " has " + std::to_string(r.end - r.begin) + " bytes, its dtype and shape need " +
         std::to_string(need));
  return r;
}

/// No two records share a byte (empty ones may sit anywhere).
void checkOverlaps(const std::vector<SafetensorsRecord> &records, const std::string &what) {
  std::vector<const SafetensorsRecord *> sorted;
  for (const SafetensorsRecord &r : records)
    if (r.end > r.begin)
      sorted.push_back(&r);
  std::sort(sorted.begin(), sorted.end(),
            [](const SafetensorsRecord *a, const SafetensorsRecord *b) {
              return a->begin < b->begin || (a->begin == b->begin && a->name < b->name);
            });
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i]->begin < sorted[i - 1]->end)
      fail(what + ": tensors '" + sorted[i - 1]->name + "' and '" + sorted[i]->name +
           "' overlap in the data section");
}

} // namespace

SafetensorsFile parseSafetensors(const uint8_t *p, size_t size, const std::string &what) {
  if (size < 8)
    fail(what + ": not a safetensors file (shorter than its 8-byte header size)");
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= static_cast<uint64_t>(p[i]) << (8 * i);
  if (headerBytes > size - 8)
    fail(what + ": not a safetensors file (header size " + std::to_string(headerBytes) +
         " exceeds the file; truncated?)");
  if (headerBytes > kMaxSafetensorsHeaderBytes)
    fail(what + ": safetensors header of " + std::to_string(headerBytes) +
         " bytes is longer than " + std::to_string(kMaxSafetensorsHeaderBytes));
  json header = parseHeaderJson(p + 8, static_cast<size_t>(headerBytes), what);
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
    f.records.push_back(parseRecord(it.key(), v, f.dataBytes, what));
  }
  checkOverlaps(f.records, what);
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
