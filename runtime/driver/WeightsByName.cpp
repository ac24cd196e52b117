//===- WeightsByName.cpp - a plan's weights from named tensors ------------===//
//
// Reads the entries of the binary's own weights file (planEntries: the name
// of the model's tensor each one holds, the slice it takes, its piece-major
// layout), checks every one against the by-name file's tensor (dtype,
// shape, the slice inside the tensor), and gathers its bytes: every entry
// is a strided box of its source tensor, so one odometer copy serves whole
// tensors, slices and piece-major layouts alike.
//
//===----------------------------------------------------------------------===//

#include "WeightsByName.h"

#include "Files.h"
#include "../core/Float16.h"
#include "../io/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <set>

using json = nlohmann::json;

namespace hpcrt::driver {

namespace {

/// One entry of the plan's weights file, as a box of the model's tensor
/// `source`: element (i_0, ...) of the stored entry is element
/// start + sum_k i_k * stride_k of the source (strides in elements of the
/// source's row-major layout, once its shape is known).
struct PlanEntry {
  const SafetensorsRecord *record = nullptr; ///< the entry in the own file
  std::string name;   ///< the entry's name without a "#n" suffix
  std::string source; ///< the model's tensor it holds (part of)
  bool constant = false;
  bool sliced = false;                 ///< `source[starts:ends:steps]`
  std::vector<int64_t> starts, steps;  ///< per dimension of the slice
  std::vector<int64_t> ends;           ///< as the name writes them
  std::vector<int64_t> logical;        ///< the entry's shape in the model
  int64_t piecesDim = -1;              ///< piece-major along this dim (-1: no)
};

bool isFloating(int dtype) {
  return dtype == HPCRT_F32 || dtype == HPCRT_F16 || dtype == HPCRT_BF16 ||
         dtype == HPCRT_F64;
}

/// Whether an entry stored as `entry` may take an f32 tensor of `source`
/// dtype, rounded (to nearest even): a `--precision=bf16` binary's bf16
/// weights from an f32 training run's file.
bool narrows(int source, int entry) {
  return source == HPCRT_F32 && (entry == HPCRT_BF16 || entry == HPCRT_F16);
}

/// Rounds `n` floats to the 16-bit `dtype` (HPCRT_BF16 or HPCRT_F16).
void narrowFloats(const float *src, size_t n, int dtype, uint8_t *dst) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits = dtype == HPCRT_BF16 ? floatToBf16(src[i]) : floatToHalf(src[i]);
    memcpy(dst + 2 * i, &bits, 2);
  }
}

bool allDigits(const std::string &s) {
  if (s.empty())
    return false;
  for (char c : s)
    if (c < '0' || c > '9')
      return false;
  return true;
}

/// Parses "a:b" or "a:b:c" (integers, possibly negative).
bool parseRange(const std::string &text, int64_t &start, int64_t &end, int64_t &step) {
  std::vector<int64_t> v;
  size_t pos = 0;
  while (true) {
    size_t colon = text.find(':', pos);
    std::string part = text.substr(pos, colon == std::string::npos ? std::string::npos
                                                                   : colon - pos);
    std::string digits = !part.empty() && part[0] == '-' ? part.substr(1) : part;
    if (!allDigits(digits) || digits.size() > 18)
      return false;
    v.push_back(std::stoll(part));
    if (colon == std::string::npos)
      break;
    pos = colon + 1;
  }
  if (v.size() != 2 && v.size() != 3)
    return false;
  start = v[0];
  end = v[1];
  step = v.size() == 3 ? v[2] : 1;
  return step != 0;
}

/// `name` = "<source>[r0,r1,...]": fills the slice of `e` (false when the
/// name has no such suffix).
bool parseSlice(const std::string &name, PlanEntry &e) {
  if (name.empty() || name.back() != ']')
    return false;
  size_t open = name.rfind('[');
  if (open == std::string::npos || open == 0)
    return false;
  std::string inner = name.substr(open + 1, name.size() - open - 2);
  std::vector<int64_t> starts, ends, steps;
  size_t pos = 0;
  while (true) {
    size_t comma = inner.find(',', pos);
    int64_t a, b, c;
    if (!parseRange(inner.substr(pos, comma == std::string::npos ? std::string::npos
                                                                 : comma - pos),
                    a, b, c))
      return false;
    starts.push_back(a);
    ends.push_back(b);
    steps.push_back(c);
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  e.source = name.substr(0, open);
  e.sliced = true;
  e.starts = std::move(starts);
  e.ends = std::move(ends);
  e.steps = std::move(steps);
  return true;
}

/// The piece-major layout of `e` from its metadata entry
/// pieces_of.<key> = {"dim": D, "shape": [...]}; checks that the stored
/// shape is [G, piece...] with G pieces of the model's shape along D.
void parsePieces(PlanEntry &e, const std::string &layout, const std::string &what) {
  std::string where = what + ": pieces_of." + e.record->name;
  json j;
  try {
    j = json::parse(layout);
  } catch (const json::exception &) {
    fail(where + " is not JSON");
  }
  if (!j.is_object() || !j.contains("dim") || !j["dim"].is_number_integer() ||
      !j.contains("shape") || !j["shape"].is_array())
    fail(where + " has no integer \"dim\" and \"shape\" array");
  std::vector<int64_t> shape;
  for (const json &d : j["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      fail(where + " has a negative or non-integer dimension");
    shape.push_back(d.get<int64_t>());
  }
  int64_t dim = j["dim"].get<int64_t>();
  const std::vector<int64_t> &stored = e.record->shape;
  bool fits = dim >= 0 && dim < static_cast<int64_t>(shape.size()) &&
              stored.size() == shape.size() + 1 && stored[0] > 0;
  for (size_t k = 0; fits && k < shape.size(); ++k)
    fits = static_cast<int64_t>(k) == dim ? shape[k] == stored[0] * stored[k + 1]
                                          : shape[k] == stored[k + 1];
  if (!fits)
    fail(where + " (shape " + shapeString(shape) + ", dim " + std::to_string(dim) +
         ") does not fit the stored shape " + shapeString(stored));
  e.logical = std::move(shape);
  e.piecesDim = dim;
}

/// The entries of the binary's own weights file.
std::vector<PlanEntry> planEntries(const SafetensorsFile &own, const std::string &what) {
  std::vector<PlanEntry> entries;
  for (const SafetensorsRecord &r : own.records) {
    PlanEntry e;
    e.record = &r;
    e.name = r.name;
    // Keys stay unique with "#n" when one initializer is stored twice.
    size_t hash = r.name.rfind('#');
    if (hash != std::string::npos && allDigits(r.name.substr(hash + 1)))
      e.name = r.name.substr(0, hash);
    e.source = e.name;
    e.constant = e.name.rfind("const.", 0) == 0 && allDigits(e.name.substr(6));
    if (e.constant) {
      entries.push_back(std::move(e));
      continue;
    }
    e.logical = r.shape;
    auto layout = own.metadata.find("pieces_of." + r.name);
    if (layout != own.metadata.end())
      parsePieces(e, layout->second, what);
    if (parseSlice(e.name, e) && e.starts.size() != e.logical.size())
      fail(what + ": entry '" + r.name + "' names a slice of rank " +
           std::to_string(e.starts.size()) + " for a tensor of shape " +
           shapeString(e.logical));
    entries.push_back(std::move(e));
  }
  return entries;
}

std::string describe(const std::string &dtypeName, const std::vector<int64_t> &shape) {
  return dtypeName + " " + shapeString(shape);
}

/// What entry `e` needs of its source tensor, for messages.
std::string need(const PlanEntry &e) {
  std::string what = describe(e.record->dtypeName, e.logical);
  if (!e.sliced)
    return "the program's weight " + what;
  return "the program reads " + e.name.substr(e.source.size()) + " of it, " + what;
}

/// Checks that `t` can give entry `e` (its dtype; its shape, or for a
/// slice that the slice lies inside it). `file` names the by-name file.
void checkSource(const PlanEntry &e, const SafetensorsRecord &t, bool sliced,
                 const std::string &file) {
  std::string mine = describe(e.record->dtypeName, e.logical);
  if (t.dtypeName != e.record->dtypeName && !narrows(t.dtype, e.record->dtype))
    fail(file + ": tensor '" + t.name + "' is " + describe(t.dtypeName, t.shape) +
         ", the program's weight is " + mine);
  if (!sliced) {
    if (t.shape != e.logical)
      fail(file + ": tensor '" + t.name + "' is " + describe(t.dtypeName, t.shape) +
           ", the program's weight is " + mine);
    return;
  }
  bool inside = t.shape.size() == e.logical.size();
  for (size_t k = 0; inside && k < t.shape.size(); ++k) {
    int64_t n = e.logical[k], s = e.starts[k], st = e.steps[k];
    // The end the compiler writes: one step past the last element taken.
    int64_t end = n ? s + (n - 1) * st + (st > 0 ? 1 : -1) : s;
    int64_t last = s + (n - 1) * st;
    inside = end == e.ends[k] &&
             (n == 0 || (s >= 0 && s < t.shape[k] && last >= 0 && last < t.shape[k]));
  }
  if (!inside)
    fail(file + ": tensor '" + t.name + "' is " + describe(t.dtypeName, t.shape) +
         ", the program reads " + e.name.substr(e.source.size()) + " of it (" + mine + ")");
}

/// Copies entry `e` out of source tensor data `src` (shape `srcShape`,
/// `elt`-byte elements) into `dst`, in the entry's stored layout.
void gather(const PlanEntry &e, const uint8_t *src, const std::vector<int64_t> &srcShape,
            size_t elt, uint8_t *dst) {
  size_t rank = srcShape.size();
  std::vector<int64_t> srcStride(rank, 1);
  for (size_t k = rank; k-- > 1;)
    srcStride[k - 1] = srcStride[k] * srcShape[k];
  int64_t base = 0;
  std::vector<int64_t> dims, strides;
  for (size_t k = 0; k < rank; ++k) {
    int64_t step = e.sliced ? e.steps[k] : 1;
    if (e.sliced)
      base += e.starts[k] * srcStride[k];
    dims.push_back(e.logical[k]);
    strides.push_back(step * srcStride[k]);
  }
  if (e.piecesDim >= 0) {
    // [G, piece...]: piece g is block g along piecesDim.
    int64_t groups = e.record->shape[0];
    size_t d = static_cast<size_t>(e.piecesDim);
    dims[d] /= groups;
    dims.insert(dims.begin(), groups);
    strides.insert(strides.begin(), dims[d + 1] * strides[d]);
  }
  int64_t count = numElements(dims);
  if (count == 0)
    return;
  if (dims.empty()) {
    memcpy(dst, src, elt);
    return;
  }
  size_t last = dims.size() - 1;
  std::vector<int64_t> index(dims.size(), 0);
  while (true) {
    int64_t at = base;
    for (size_t k = 0; k < last; ++k)
      at += index[k] * strides[k];
    if (strides[last] == 1) {
      size_t run = static_cast<size_t>(dims[last]) * elt;
      memcpy(dst, src + at * static_cast<int64_t>(elt), run);
      dst += run;
    } else {
      for (int64_t i = 0; i < dims[last]; ++i, dst += elt)
        memcpy(dst, src + (at + i * strides[last]) * static_cast<int64_t>(elt), elt);
    }
    size_t k = last;
    while (k > 0 && ++index[k - 1] == dims[k - 1])
      index[--k] = 0;
    if (k == 0)
      return;
  }
}

/// The tensor of `file` entry `e` reads, and whether it reads a slice of
/// it: the entry's own name first (a file may hold the slice itself), then
/// the sliced tensor's.
const SafetensorsRecord *sourceOf(const PlanEntry &e, const SafetensorsFile &file,
                                  bool &sliced) {
  sliced = false;
  if (const SafetensorsRecord *r = file.find(e.name))
    return r;
  sliced = e.sliced;
  return e.sliced ? file.find(e.source) : nullptr;
}

/// Fails when `file` has none of the tensors the plan reads (the weights of
/// another model), naming the first weight it lacks.
void checkSameModel(const std::vector<PlanEntry> &entries, const SafetensorsFile &file,
                    const std::string &path) {
  const PlanEntry *first = nullptr;
  for (const PlanEntry &e : entries) {
    if (e.constant)
      continue;
    bool sliced;
    if (sourceOf(e, file, sliced))
      return;
    if (!first || (isFloating(e.record->dtype) && !isFloating(first->record->dtype)))
      first = &e;
  }
  if (first)
    fail(path + ": no tensor '" + first->source + "' (" + need(*first) +
         "), nor any other of the " +
         "program's weights among its " + std::to_string(file.records.size()) +
         " tensors (weights of another model?)");
}

} // namespace

bool isByNameWeights(const std::string &path) {
  try {
    MappedFile f(path);
    SafetensorsFile st = parseSafetensors(f.data(), f.size(), path);
    return !st.metadata.count("hpc_hash");
  } catch (const Error &) {
    return false;
  }
}

ByNameReport loadWeightsByName(Context &ctx, const std::string &ownPath,
                               const std::string &path) {
  ctx.loadWeightsFile(ownPath);
  MappedFile ownFile(ownPath);
  SafetensorsFile own = parseSafetensors(ownFile.data(), ownFile.size(), ownPath);
  MappedFile byName(path);
  SafetensorsFile file = parseSafetensors(byName.data(), byName.size(), path);
  std::vector<PlanEntry> entries = planEntries(own, ownPath);
  checkSameModel(entries, file, path);

  ByNameReport report;
  report.mappedBytes = ownFile.size() + byName.size();
  // Constants and padding are the binary's own bytes; every entry the file
  // gives is written over them.
  Buffer data(ctx.weightsBytes());
  if (data.size())
    memcpy(data.data(), ctx.weightsData(), data.size());
  std::set<std::string> used;
  for (const PlanEntry &e : entries) {
    if (e.constant) {
      ++report.fromOwn;
      continue;
    }
    bool sliced;
    const SafetensorsRecord *t = sourceOf(e, file, sliced);
    if (!t) {
      if (!isFloating(e.record->dtype)) {
        ++report.fromOwn;
        continue;
      }
      fail(path + ": no tensor '" + e.source + "' (" + need(e) + ")");
    }
    checkSource(e, *t, sliced, path);
    PlanEntry copy = e;
    copy.sliced = sliced;
    const uint8_t *src = byName.data() + file.dataOffset + t->begin;
    uint8_t *dst = static_cast<uint8_t *>(data.data()) + e.record->begin;
    if (t->dtype == e.record->dtype) {
      gather(copy, src, t->shape, dtypeSize(e.record->dtype), dst);
    } else {
      // Gathered in f32, then rounded once into the entry's precision.
      size_t n = static_cast<size_t>(numElements(e.record->shape));
      std::vector<float> wide(n);
      gather(copy, src, t->shape, sizeof(float), reinterpret_cast<uint8_t *>(wide.data()));
      narrowFloats(wide.data(), n, e.record->dtype, dst);
      ++report.narrowed;
    }
    used.insert(t->name);
    ++report.fromFile;
  }
  for (const SafetensorsRecord &r : file.records)
    if (!used.count(r.name))
      report.unused.push_back(r.name);
  ctx.adoptWeightsData(std::move(data));
  return report;
}

} // namespace hpcrt::driver
