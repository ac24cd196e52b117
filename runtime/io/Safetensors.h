//===- Safetensors.h - safetensors headers ----------------------*- C++ -*-===//
//
// The safetensors layout the train driver reads and writes (checkpoint
// shards, `train --save`, `train --init-weights`): an 8-byte little-endian
// header size, a JSON header with one entry per tensor (dtype, shape,
// data_offsets into the data section) and "__metadata__" (string values
// only), then the data section. Files it writes have their records packed
// in order without gaps (as the format requires) and the header padded with
// spaces so that the data section starts at a multiple of 64 bytes.
// Malformed files are an hpcrt::Error naming the file and the reason.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_IO_SAFETENSORS_H
#define HPCRT_IO_SAFETENSORS_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hpcrt {

/// The safetensors dtype name of a dtype code ("F32", "BF16", "I64",
/// "BOOL", ...); "" for a code safetensors has no name for.
std::string safetensorsDtype(int dtype);

/// One tensor of a parsed header.
struct SafetensorsRecord {
  std::string name;
  std::string dtypeName; ///< as written in the file ("F32")
  int dtype = 0;         ///< its dtype code (0 when the runtime has none)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; ///< data_offsets (relative to the data section)
};

struct SafetensorsFile {
  std::vector<SafetensorsRecord> records; ///< in the order of the header
  std::map<std::string, std::string> metadata;
  uint64_t dataOffset = 0; ///< 8 + header size: where the data section starts
  uint64_t dataBytes = 0;
  const SafetensorsRecord *find(const std::string &name) const;
};

/// The longest header accepted (the safetensors format's own limit).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100000000;

/// Parses the header of the safetensors file at `bytes` (`size` bytes, the
/// whole file) and checks it: a JSON object of at most
/// kMaxSafetensorsHeaderBytes, no key twice, every tensor entry an object
/// of exactly dtype, shape and data_offsets, lying in the data section, of
/// the bytes its dtype and shape need (a dtype the runtime lacks keeps
/// dtype 0 and is not size-checked), no two entries overlapping. `what`
/// names the file.
SafetensorsFile parseSafetensors(const uint8_t *bytes, size_t size, const std::string &what);

/// A tensor to write.
struct SafetensorsEntry {
  std::string name;
  int dtype = 0;
  std::vector<int64_t> shape;
  size_t bytes = 0; ///< numel * element size
};

/// The 8-byte size and the JSON header of a file holding `entries` packed
/// in order; the data section follows it.
std::vector<uint8_t> safetensorsHeader(const std::vector<SafetensorsEntry> &entries,
                                       const std::map<std::string, std::string> &metadata);

} // namespace hpcrt

#endif // HPCRT_IO_SAFETENSORS_H
