//===- Cluster.cpp - cluster presets and the JSON cluster format ----------===//
//
// Presets use public spec-sheet figures (docs/cost-model.md lists them and
// their sources). The JSON reader checks every field and names the first bad
// one by its path, so a typo in a cluster file is one clear line; the same
// holds for the "calibration" section of hpc-calibrate's files (its raw
// measurements), which clusterToJSON prints back.
//
//===----------------------------------------------------------------------===//

#include "hpc/CostModel/Cluster.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace hpc::cost;

static constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
static constexpr double kGB = 1e9;
static constexpr double kTera = 1e12;
static constexpr double kMicro = 1e-6;

const char *hpc::cost::dtypeName(DType t) {
  switch (t) {
  case DType::FP32: return "fp32";
  case DType::TF32: return "tf32";
  case DType::BF16: return "bf16";
  case DType::FP16: return "fp16";
  case DType::FP8: return "fp8";
  }
  return "?";
}

bool hpc::cost::parseDType(const std::string &name, DType &out) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == dtypeName(DType(i))) {
      out = DType(i);
      return true;
    }
  return false;
}

int hpc::cost::dtypeBytes(DType t) {
  switch (t) {
  case DType::FP32:
  case DType::TF32: return 4;
  case DType::BF16:
  case DType::FP16: return 2;
  case DType::FP8: return 1;
  }
  return 4;
}

namespace {

/// One preset: a node type; the node count comes from the spelling.
struct Preset {
  const char *name;
  const char *kind;
  int devicesPerNode;
  double tflops[kNumDTypes]; // fp32, tf32, bf16, fp16, fp8 (dense)
  double memoryGiB;
  double memoryGBps;
  const char *intraName;
  double intraGBps, intraLatencyUs;
  const char *interName;
  double interGBps, interLatencyUs;
};

// Figures: NVIDIA A100/H100/H200 datasheets and DGX/HGX system specs, Huawei
// Ascend 910 / Atlas 800 material; docs/cost-model.md gives the details.
// Link bandwidths are per device and per direction.
const Preset kPresets[] = {
    {"dgx-a100-40g", "A100-SXM4-40GB", 8, {19.5, 156, 312, 312, 0}, 40, 1555,
     "nvlink3", 300, 3, "ib-hdr-200", 25, 6},
    {"dgx-a100-80g", "A100-SXM4-80GB", 8, {19.5, 156, 312, 312, 0}, 80, 2039,
     "nvlink3", 300, 3, "ib-hdr-200", 25, 6},
    {"dgx-h100", "H100-SXM5-80GB", 8, {66.9, 494.7, 989.4, 989.4, 1978.9}, 80,
     3350, "nvlink4", 450, 3, "ib-ndr-400", 50, 6},
    {"h200", "H200-SXM5-141GB", 8, {66.9, 494.7, 989.4, 989.4, 1978.9}, 140,
     4800, "nvlink4", 450, 3, "ib-ndr-400", 50, 6},
    {"ascend-910", "Ascend-910", 8, {0, 0, 0, 256, 0}, 32, 1200, "hccs", 30, 5,
     "roce-100g", 12.5, 10},
};

} // namespace

// The same factors are used for every device kind (docs/cost-model.md).
Efficiency hpc::cost::calibratedEfficiency() {
  Efficiency e;
  e.matmul = 0.85;
  e.memory = 0.70;
  e.network = 0.70;
  e.networkInter = 0.90;
  e.kernelOverhead = 4e-6;
  e.overlap = 0.7;
  return e;
}

namespace {

void fillFromPreset(const Preset &p, int64_t nodes, ClusterSpec &c) {
  c.nodes = nodes;
  c.devicesPerNode = p.devicesPerNode;
  c.device.kind = p.kind;
  for (int i = 0; i < kNumDTypes; ++i)
    c.device.peakFlops[i] = p.tflops[i] * kTera;
  c.device.memoryBytes = p.memoryGiB * kGiB;
  c.device.memoryBandwidth = p.memoryGBps * kGB;
  c.device.reservedBytes = 2 * kGiB;
  c.intraNode = {p.intraName, p.intraGBps * kGB, p.intraLatencyUs * kMicro};
  c.interNode = {p.interName, p.interGBps * kGB, p.interLatencyUs * kMicro};
  c.efficiency = calibratedEfficiency();
}

} // namespace

std::vector<std::string> hpc::cost::clusterPresetNames() {
  std::vector<std::string> names;
  for (const Preset &p : kPresets)
    names.push_back(p.name);
  return names;
}

bool hpc::cost::clusterFromPreset(const std::string &spec, ClusterSpec &out,
                                  std::string &error) {
  llvm::StringRef s(spec);
  auto [name, count] = s.split(':');
  int64_t nodes = 1;
  if (s.contains(':')) {
    if (count.getAsInteger(10, nodes) || nodes < 1 || nodes > (1 << 20)) {
      error = "cluster '" + spec + "': the node count after ':' must be a "
              "positive integer";
      return false;
    }
  }
  for (const Preset &p : kPresets)
    if (name == p.name) {
      out = ClusterSpec();
      fillFromPreset(p, nodes, out);
      out.name = std::string(name) + ":" + std::to_string(nodes);
      return true;
    }
  std::string known;
  for (const Preset &p : kPresets)
    known += std::string(known.empty() ? "" : ", ") + p.name;
  error = "cluster '" + spec + "': unknown preset '" + name.str() +
          "' (presets: " + known + "; or a .json file)";
  return false;
}

namespace {

/// Reads JSON fields with their paths for error messages.
class Reader {
public:
  Reader(std::string file, std::string &error) : file(std::move(file)), error(error) {}

  bool fail(const std::string &path, const std::string &reason) {
    error = file + ": " + path + ": " + reason;
    return false;
  }

  const llvm::json::Object *object(const llvm::json::Value *v,
                                   const std::string &path) {
    if (!v) {
      fail(path, "missing");
      return nullptr;
    }
    const llvm::json::Object *o = v->getAsObject();
    if (!o)
      fail(path, "expected an object");
    return o;
  }

  /// A number at `key` of `o`; `required` or absent (then `value` stays).
  bool number(const llvm::json::Object &o, const std::string &path,
              llvm::StringRef key, double &value, bool required, double min,
              bool minExclusive) {
    const llvm::json::Value *v = o.get(key);
    std::string p = path.empty() ? key.str() : path + "." + key.str();
    if (!v)
      return required ? fail(p, "missing") : true;
    std::optional<double> d = v->getAsNumber();
    if (!d || !std::isfinite(*d))
      return fail(p, "expected a number");
    if (minExclusive ? !(*d > min) : !(*d >= min)) {
      return fail(p, std::string("expected a number ") +
                         (minExclusive ? "> " : ">= ") + format(min) +
                         ", got " + format(*d));
    }
    value = *d;
    return true;
  }

  bool integer(const llvm::json::Object &o, const std::string &path,
               llvm::StringRef key, int64_t &value, int64_t min = 1) {
    std::string p = path.empty() ? key.str() : path + "." + key.str();
    return integerValue(o.get(key), p, value, min);
  }

  /// An integer >= `min` at `path` (the value itself, e.g. an array entry).
  bool integerValue(const llvm::json::Value *v, const std::string &p,
                    int64_t &value, int64_t min) {
    if (!v)
      return fail(p, "missing");
    std::optional<int64_t> i = v->getAsInteger();
    if (!i)
      return fail(p, "expected an integer");
    if (*i < min)
      return fail(p, "expected an integer >= " + std::to_string(min) +
                         ", got " + std::to_string(*i));
    value = *i;
    return true;
  }

  bool boolean(const llvm::json::Object &o, const std::string &path,
               llvm::StringRef key, bool &value) {
    const llvm::json::Value *v = o.get(key);
    std::string p = path.empty() ? key.str() : path + "." + key.str();
    if (!v)
      return fail(p, "missing");
    std::optional<bool> b = v->getAsBoolean();
    if (!b)
      return fail(p, "expected true or false");
    value = *b;
    return true;
  }

  /// The array at `key` of `o` (required); null after a failure.
  const llvm::json::Array *array(const llvm::json::Object &o,
                                 const std::string &path, llvm::StringRef key) {
    const llvm::json::Value *v = o.get(key);
    std::string p = path.empty() ? key.str() : path + "." + key.str();
    if (!v) {
      fail(p, "missing");
      return nullptr;
    }
    const llvm::json::Array *a = v->getAsArray();
    if (!a)
      fail(p, "expected an array");
    return a;
  }

  bool string(const llvm::json::Object &o, const std::string &path,
              llvm::StringRef key, std::string &value, bool required) {
    const llvm::json::Value *v = o.get(key);
    std::string p = path.empty() ? key.str() : path + "." + key.str();
    if (!v)
      return required ? fail(p, "missing") : true;
    std::optional<llvm::StringRef> s = v->getAsString();
    if (!s)
      return fail(p, "expected a string");
    if (s->empty())
      return fail(p, "expected a non-empty string");
    value = s->str();
    return true;
  }

  bool onlyKeys(const llvm::json::Object &o, const std::string &path,
                std::initializer_list<llvm::StringRef> keys) {
    for (const auto &kv : o) {
      bool known = false;
      for (llvm::StringRef k : keys)
        known |= llvm::StringRef(kv.first) == k;
      if (!known) {
        std::string list;
        for (llvm::StringRef k : keys)
          list += (list.empty() ? "" : ", ") + k.str();
        std::string p = path.empty() ? kv.first.str()
                                     : path + "." + kv.first.str();
        return fail(p, "unknown field (expected one of: " + list + ")");
      }
    }
    return true;
  }

  static std::string format(double d) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << llvm::format("%g", d);
    return s;
  }

private:
  std::string file;
  std::string &error;
};

/// What the "shape" of a gemm or conv row lists (docs/cost-model.md).
struct ShapeLayout {
  llvm::StringRef key;   ///< "gemm" or "conv"
  size_t length;
  const char *names;     ///< for the error message
  size_t mayBeZero;      ///< index of the entry that may be 0 (or length)
};
const ShapeLayout kGemmShape = {"gemm", 4, "batch, m, k, n", 4};
const ShapeLayout kConvShape = {
    "conv", 9, "n, c, h, w, out_channels, kernel_h, kernel_w, stride, pad", 8};

/// One gemm or conv row: name, shape, dtype, seconds, gflops.
bool parseKernelRow(Reader &r, const llvm::json::Value &v,
                    const std::string &path, const ShapeLayout &layout,
                    KernelTiming &row) {
  const llvm::json::Object *o = r.object(&v, path);
  if (!o || !r.onlyKeys(*o, path, {"name", "shape", "dtype", "seconds", "gflops"}))
    return false;
  std::string dtype;
  double gflops = 0;
  if (!r.string(*o, path, "name", row.name, true) ||
      !r.string(*o, path, "dtype", dtype, true))
    return false;
  if (!parseDType(dtype, row.dtype))
    return r.fail(path + ".dtype", "expected fp32, tf32, bf16, fp16 or fp8, "
                                   "got \"" + dtype + "\"");
  const llvm::json::Array *shape = r.array(*o, path, "shape");
  if (!shape)
    return false;
  if (shape->size() != layout.length)
    return r.fail(path + ".shape", "expected " + std::to_string(layout.length) +
                                       " integers (" + layout.names + "), got " +
                                       std::to_string(shape->size()));
  row.shape.assign(layout.length, 0);
  for (size_t i = 0; i < layout.length; ++i)
    if (!r.integerValue(&(*shape)[i], path + ".shape[" + std::to_string(i) + "]",
                        row.shape[i], i == layout.mayBeZero ? 0 : 1))
      return false;
  if (!r.number(*o, path, "seconds", row.seconds, true, 0, true) ||
      !r.number(*o, path, "gflops", gflops, true, 0, true))
    return false;
  row.flopRate = gflops * kGB;
  return true;
}

bool parseKernelRows(Reader &r, const llvm::json::Object &cal,
                     const ShapeLayout &layout, std::vector<KernelTiming> &rows) {
  const llvm::json::Array *a = r.array(cal, "calibration", layout.key);
  if (!a)
    return false;
  rows.assign(a->size(), KernelTiming());
  for (size_t i = 0; i < a->size(); ++i)
    if (!parseKernelRow(r, (*a)[i],
                        "calibration." + layout.key.str() + "[" +
                            std::to_string(i) + "]",
                        layout, rows[i]))
      return false;
  return true;
}

bool parseMemoryRows(Reader &r, const llvm::json::Object &cal,
                     std::vector<MemoryTiming> &rows) {
  const llvm::json::Array *a = r.array(cal, "calibration", "memory");
  if (!a)
    return false;
  rows.assign(a->size(), MemoryTiming());
  for (size_t i = 0; i < a->size(); ++i) {
    std::string path = "calibration.memory[" + std::to_string(i) + "]";
    const llvm::json::Object *o = r.object(&(*a)[i], path);
    if (!o ||
        !r.onlyKeys(*o, path, {"kernel", "bytes", "seconds", "gbytes_per_s"}))
      return false;
    MemoryTiming &m = rows[i];
    double gbps = 0;
    if (!r.string(*o, path, "kernel", m.kernel, true) ||
        !r.integer(*o, path, "bytes", m.bytes) ||
        !r.number(*o, path, "seconds", m.seconds, true, 0, true) ||
        !r.number(*o, path, "gbytes_per_s", gbps, true, 0, true))
      return false;
    m.bandwidth = gbps * kGB;
  }
  return true;
}

/// The sizes and times of a collective row: equally long, non-empty.
bool parseCollectiveSamples(Reader &r, const llvm::json::Object &o,
                            const std::string &path, CollectiveTiming &c) {
  const llvm::json::Array *sizes = r.array(o, path, "sizes_bytes");
  if (!sizes)
    return false;
  if (sizes->empty())
    return r.fail(path + ".sizes_bytes", "expected at least one size");
  const llvm::json::Array *times = r.array(o, path, "seconds");
  if (!times)
    return false;
  if (times->size() != sizes->size())
    return r.fail(path + ".seconds", "expected " + std::to_string(sizes->size()) +
                                         " times (one per size), got " +
                                         std::to_string(times->size()));
  c.sizes.assign(sizes->size(), 0);
  c.seconds.assign(sizes->size(), 0);
  for (size_t i = 0; i < sizes->size(); ++i) {
    std::string at = "[" + std::to_string(i) + "]";
    std::optional<double> t = (*times)[i].getAsNumber();
    if (!r.integerValue(&(*sizes)[i], path + ".sizes_bytes" + at, c.sizes[i], 1))
      return false;
    // The cost model interpolates between neighbouring sizes.
    if (i > 0 && c.sizes[i] <= c.sizes[i - 1])
      return r.fail(path + ".sizes_bytes" + at,
                    "expected sizes in increasing order, got " + std::to_string(c.sizes[i]) +
                        " after " + std::to_string(c.sizes[i - 1]));
    if (!t || !std::isfinite(*t) || !(*t > 0))
      return r.fail(path + ".seconds" + at, "expected a number > 0");
    c.seconds[i] = *t;
  }
  return true;
}

bool parseCollectiveRow(Reader &r, const llvm::json::Value &v,
                        const std::string &path, CollectiveTiming &c) {
  const llvm::json::Object *o = r.object(&v, path);
  if (!o || !r.onlyKeys(*o, path,
                        {"level", "kind", "group_size", "alpha_us",
                         "beta_gbytes_per_s", "sizes_bytes", "seconds"}))
    return false;
  double alphaUs = 0, betaGB = 0;
  if (!r.string(*o, path, "level", c.level, true))
    return false;
  if (c.level != "intra-node" && c.level != "inter-node")
    return r.fail(path + ".level", "expected \"intra-node\" or \"inter-node\", "
                                   "got \"" + c.level + "\"");
  if (!r.string(*o, path, "kind", c.kind, true))
    return false;
  const std::vector<std::string> &kinds = calibrationCollectiveKinds();
  if (std::find(kinds.begin(), kinds.end(), c.kind) == kinds.end()) {
    std::string list;
    for (const std::string &k : kinds)
      list += (list.empty() ? "" : ", ") + k;
    return r.fail(path + ".kind", "expected one of " + list + ", got \"" +
                                      c.kind + "\"");
  }
  if (!r.integer(*o, path, "group_size", c.groupSize, 2) ||
      !r.number(*o, path, "alpha_us", alphaUs, true, 0, false) ||
      !r.number(*o, path, "beta_gbytes_per_s", betaGB, true, 0, true))
    return false;
  c.alpha = alphaUs * kMicro;
  c.beta = betaGB * kGB;
  return parseCollectiveSamples(r, *o, path, c);
}

bool parseCollectiveRows(Reader &r, const llvm::json::Object &cal,
                         std::vector<CollectiveTiming> &rows) {
  const llvm::json::Array *a = r.array(cal, "calibration", "collectives");
  if (!a)
    return false;
  rows.assign(a->size(), CollectiveTiming());
  for (size_t i = 0; i < a->size(); ++i) {
    std::string path = "calibration.collectives[" + std::to_string(i) + "]";
    if (!parseCollectiveRow(r, (*a)[i], path, rows[i]))
      return false;
    for (size_t j = 0; j < i; ++j)
      if (rows[j].level == rows[i].level && rows[j].kind == rows[i].kind)
        return r.fail(path, rows[i].kind + " on level \"" + rows[i].level +
                                "\" given twice");
  }
  return true;
}

/// The "calibration" section (hpc-calibrate's raw measurements).
bool parseCalibration(Reader &r, const llvm::json::Value &v, Calibration &cal) {
  const llvm::json::Object *o = r.object(&v, "calibration");
  if (!o || !r.onlyKeys(*o, "calibration",
                        {"date", "ranks", "threads", "quick", "gemm", "conv",
                         "memory", "kernel_overhead_us", "collective_overhead_us",
                         "collectives", "overlap"}))
    return false;
  double overheadUs = 0;
  if (!r.string(*o, "calibration", "date", cal.date, true) ||
      !r.integer(*o, "calibration", "ranks", cal.ranks) ||
      !r.integer(*o, "calibration", "threads", cal.threads) ||
      !r.boolean(*o, "calibration", "quick", cal.quick) ||
      !parseKernelRows(r, *o, kGemmShape, cal.gemm) ||
      !parseKernelRows(r, *o, kConvShape, cal.conv) ||
      !parseMemoryRows(r, *o, cal.memory) ||
      !r.number(*o, "calibration", "kernel_overhead_us", overheadUs, true, 0,
                false) ||
      !parseCollectiveRows(r, *o, cal.collectives))
    return false;
  if (o->get("collective_overhead_us")) {
    double us = 0;
    if (!r.number(*o, "calibration", "collective_overhead_us", us, true, 0, false))
      return false;
    cal.collectiveOverhead = us * kMicro;
  }
  if (const llvm::json::Value *ov = o->get("overlap")) {
    const llvm::json::Object *x = r.object(ov, "calibration.overlap");
    OverlapTiming &t = cal.overlap;
    const char *where = "calibration.overlap";
    if (!x || !r.onlyKeys(*x, where, {"bytes", "compute_s", "comm_s", "both_s", "fraction"}) ||
        !r.integer(*x, where, "bytes", t.bytes) ||
        !r.number(*x, where, "compute_s", t.computeS, true, 0, true) ||
        !r.number(*x, where, "comm_s", t.commS, true, 0, true) ||
        !r.number(*x, where, "both_s", t.bothS, true, 0, true) ||
        !r.number(*x, where, "fraction", t.fraction, true, 0, false))
      return false;
    if (t.fraction > 1)
      return r.fail(std::string(where) + ".fraction",
                    "expected a number in [0, 1], got " + r.format(t.fraction));
    t.present = true;
  }
  cal.kernelOverhead = overheadUs * kMicro;
  cal.present = true;
  return true;
}

} // namespace

const std::vector<std::string> &hpc::cost::calibrationCollectiveKinds() {
  static const std::vector<std::string> kinds = {
      "all_reduce", "reduce_scatter", "all_gather",
      "all_to_all", "broadcast",      "send_recv"};
  return kinds;
}

bool hpc::cost::clusterFromJSON(const std::string &text,
                                const std::string &fileName, ClusterSpec &out,
                                std::string &error) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed) {
    error = fileName + ": invalid JSON: " + llvm::toString(parsed.takeError());
    return false;
  }
  Reader r(fileName, error);
  const llvm::json::Object *root = r.object(&*parsed, "(root)");
  if (!root)
    return false;
  if (!r.onlyKeys(*root, "",
                  {"name", "nodes", "devices_per_node", "device", "links",
                   "efficiency", "calibration"}))
    return false;

  ClusterSpec c;
  c.efficiency = calibratedEfficiency();
  c.name = fileName;
  if (!r.string(*root, "", "name", c.name, false) ||
      !r.integer(*root, "", "nodes", c.nodes) ||
      !r.integer(*root, "", "devices_per_node", c.devicesPerNode))
    return false;

  const llvm::json::Object *dev = r.object(root->get("device"), "device");
  if (!dev)
    return false;
  if (!r.onlyKeys(*dev, "device",
                  {"kind", "memory_gib", "reserved_gib",
                   "memory_bandwidth_gbytes_per_s", "peak_tflops", "core_share",
                   "core_lending"}))
    return false;
  double memGiB = 0, reservedGiB = 2, bwGB = 0;
  if (!r.string(*dev, "device", "kind", c.device.kind, true) ||
      !r.number(*dev, "device", "memory_gib", memGiB, true, 0, true) ||
      !r.number(*dev, "device", "reserved_gib", reservedGiB, false, 0, false) ||
      !r.number(*dev, "device", "memory_bandwidth_gbytes_per_s", bwGB, true, 0,
                true) ||
      !r.number(*dev, "device", "core_share", c.device.coreShare, false, 0, true) ||
      !r.number(*dev, "device", "core_lending", c.device.coreLending, false, 0, false))
    return false;
  for (auto [key, v] : {std::pair<const char *, double>{"core_share", c.device.coreShare},
                        {"core_lending", c.device.coreLending}})
    if (v > 1)
      return r.fail(std::string("device.") + key,
                    "expected a fraction <= 1, got " + Reader::format(v));
  if (reservedGiB >= memGiB)
    return r.fail("device.reserved_gib",
                  "must be less than device.memory_gib");
  c.device.memoryBytes = memGiB * kGiB;
  c.device.reservedBytes = reservedGiB * kGiB;
  c.device.memoryBandwidth = bwGB * kGB;

  const llvm::json::Object *peaks =
      r.object(dev->get("peak_tflops"), "device.peak_tflops");
  if (!peaks)
    return false;
  if (!r.onlyKeys(*peaks, "device.peak_tflops",
                  {"fp32", "tf32", "bf16", "fp16", "fp8"}))
    return false;
  bool anyPeak = false;
  for (int i = 0; i < kNumDTypes; ++i) {
    double tf = 0;
    if (!r.number(*peaks, "device.peak_tflops", dtypeName(DType(i)), tf, false,
                  0, false))
      return false;
    c.device.peakFlops[i] = tf * kTera;
    anyPeak |= tf > 0;
  }
  if (!anyPeak)
    return r.fail("device.peak_tflops", "needs at least one dtype with a "
                                        "peak > 0");

  const llvm::json::Value *linksValue = root->get("links");
  if (!linksValue)
    return r.fail("links", "missing");
  const llvm::json::Array *links = linksValue->getAsArray();
  if (!links)
    return r.fail("links", "expected an array");
  bool haveIntra = false, haveInter = false;
  for (size_t i = 0; i < links->size(); ++i) {
    std::string path = "links[" + std::to_string(i) + "]";
    const llvm::json::Object *l = r.object(&(*links)[i], path);
    if (!l)
      return false;
    if (!r.onlyKeys(*l, path,
                    {"level", "name", "bandwidth_gbytes_per_s", "latency_us"}))
      return false;
    std::string level, name;
    if (!r.string(*l, path, "level", level, true))
      return false;
    bool intra = level == "intra-node";
    if (!intra && level != "inter-node")
      return r.fail(path + ".level", "expected \"intra-node\" or "
                                     "\"inter-node\", got \"" + level + "\"");
    if (intra ? haveIntra : haveInter)
      return r.fail(path + ".level", "level \"" + level + "\" given twice");
    (intra ? haveIntra : haveInter) = true;
    double gbps = 0, latencyUs = 0;
    name = level;
    if (!r.string(*l, path, "name", name, false) ||
        !r.number(*l, path, "bandwidth_gbytes_per_s", gbps, true, 0, true) ||
        !r.number(*l, path, "latency_us", latencyUs, true, 0, false))
      return false;
    LinkSpec &link = intra ? c.intraNode : c.interNode;
    link = {name, gbps * kGB, latencyUs * kMicro};
  }
  if (c.devicesPerNode > 1 && !haveIntra)
    return r.fail("links", "needs an \"intra-node\" level (devices_per_node "
                           "is " + std::to_string(c.devicesPerNode) + ")");
  if (c.nodes > 1 && !haveInter)
    return r.fail("links", "needs an \"inter-node\" level (nodes is " +
                               std::to_string(c.nodes) + ")");
  c.hasIntraNode = haveIntra;
  c.hasInterNode = haveInter;
  if (!haveIntra)
    c.intraNode = c.interNode.bandwidth > 0 ? c.interNode : LinkSpec{"none", 1e12, 0};
  if (!haveInter)
    c.interNode = c.intraNode;

  if (const llvm::json::Value *effValue = root->get("efficiency")) {
    const llvm::json::Object *eff = r.object(effValue, "efficiency");
    if (!eff)
      return false;
    if (!r.onlyKeys(*eff, "efficiency",
                    {"matmul", "memory", "network", "network_inter",
                     "kernel_overhead_us", "overlap", "collective_overhead_us"}))
      return false;
    Efficiency &e = c.efficiency;
    double overheadUs = e.kernelOverhead / kMicro;
    double collectiveUs = e.collectiveOverhead / kMicro;
    if (!r.number(*eff, "efficiency", "matmul", e.matmul, false, 0, true) ||
        !r.number(*eff, "efficiency", "memory", e.memory, false, 0, true) ||
        !r.number(*eff, "efficiency", "network", e.network, false, 0, true) ||
        !r.number(*eff, "efficiency", "network_inter", e.networkInter, false,
                  0, true) ||
        !r.number(*eff, "efficiency", "kernel_overhead_us", overheadUs, false,
                  0, false) ||
        !r.number(*eff, "efficiency", "overlap", e.overlap, false, 0, false) ||
        !r.number(*eff, "efficiency", "collective_overhead_us", collectiveUs, false, 0,
                  false))
      return false;
    for (auto [key, v] : {std::pair<const char *, double>{"matmul", e.matmul},
                          {"memory", e.memory},
                          {"network", e.network},
                          {"network_inter", e.networkInter},
                          {"overlap", e.overlap}})
      if (v > 1)
        return r.fail(std::string("efficiency.") + key,
                      "expected a fraction <= 1, got " + Reader::format(v));
    e.kernelOverhead = overheadUs * kMicro;
    e.collectiveOverhead = collectiveUs * kMicro;
  }
  if (const llvm::json::Value *cal = root->get("calibration"))
    if (!parseCalibration(r, *cal, c.calibration))
      return false;
  out = c;
  return true;
}

bool hpc::cost::parseClusterSpec(const std::string &spec, ClusterSpec &out,
                                 std::string &error) {
  llvm::StringRef s(spec);
  // "cluster.json:NODES" reuses a file's node type at another node count.
  llvm::StringRef path = s;
  int64_t nodes = 0;
  size_t colon = s.rfind(':');
  if (colon != llvm::StringRef::npos && s.substr(0, colon).ends_with(".json")) {
    path = s.substr(0, colon);
    if (s.substr(colon + 1).getAsInteger(10, nodes) || nodes < 1) {
      error = "cluster '" + spec + "': the node count after ':' must be a "
              "positive integer";
      return false;
    }
  }
  bool isFile = path.ends_with(".json") || llvm::sys::fs::is_regular_file(path);
  if (!isFile)
    return clusterFromPreset(spec, out, error);
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    error = path.str() + ": cannot read the cluster file: " +
            buffer.getError().message();
    return false;
  }
  if (!clusterFromJSON((*buffer)->getBuffer().str(), path.str(), out, error))
    return false;
  if (nodes > 0) {
    if (nodes > 1 && !out.hasInterNode) {
      error = spec + ": the file has no \"inter-node\" link level for " +
              std::to_string(nodes) + " nodes";
      return false;
    }
    out.nodes = nodes;
    out.name = out.name + ":" + std::to_string(nodes);
  }
  return true;
}

namespace {

/// The "calibration" section, in the units and order parseCalibration reads.
llvm::json::Object calibrationToJSON(const Calibration &cal) {
  auto kernels = [](const std::vector<KernelTiming> &rows) {
    llvm::json::Array a;
    for (const KernelTiming &k : rows)
      a.push_back(llvm::json::Object{{"name", k.name},
                                     {"shape", llvm::json::Array(k.shape)},
                                     {"dtype", dtypeName(k.dtype)},
                                     {"seconds", k.seconds},
                                     {"gflops", k.flopRate / kGB}});
    return a;
  };
  llvm::json::Array memory, collectives;
  for (const MemoryTiming &m : cal.memory)
    memory.push_back(llvm::json::Object{{"kernel", m.kernel},
                                        {"bytes", m.bytes},
                                        {"seconds", m.seconds},
                                        {"gbytes_per_s", m.bandwidth / kGB}});
  for (const CollectiveTiming &c : cal.collectives)
    collectives.push_back(
        llvm::json::Object{{"level", c.level},
                           {"kind", c.kind},
                           {"group_size", c.groupSize},
                           {"alpha_us", c.alpha / kMicro},
                           {"beta_gbytes_per_s", c.beta / kGB},
                           {"sizes_bytes", llvm::json::Array(c.sizes)},
                           {"seconds", llvm::json::Array(c.seconds)}});
  llvm::json::Object out{{"date", cal.date},
                         {"ranks", cal.ranks},
                         {"threads", cal.threads},
                         {"quick", cal.quick},
                         {"gemm", kernels(cal.gemm)},
                         {"conv", kernels(cal.conv)},
                         {"memory", std::move(memory)},
                         {"kernel_overhead_us", cal.kernelOverhead / kMicro},
                         {"collectives", std::move(collectives)}};
  if (cal.collectiveOverhead >= 0)
    out["collective_overhead_us"] = cal.collectiveOverhead / kMicro;
  if (cal.overlap.present)
    out["overlap"] = llvm::json::Object{{"bytes", cal.overlap.bytes},
                                        {"compute_s", cal.overlap.computeS},
                                        {"comm_s", cal.overlap.commS},
                                        {"both_s", cal.overlap.bothS},
                                        {"fraction", cal.overlap.fraction}};
  return out;
}

} // namespace

std::string hpc::cost::clusterToJSON(const ClusterSpec &c) {
  llvm::json::Object peaks;
  for (int i = 0; i < kNumDTypes; ++i)
    peaks[dtypeName(DType(i))] = c.device.peakFlops[i] / kTera;
  auto link = [](const char *level, const LinkSpec &l) {
    return llvm::json::Object{{"level", level},
                              {"name", l.name},
                              {"bandwidth_gbytes_per_s", l.bandwidth / kGB},
                              {"latency_us", l.latency / kMicro}};
  };
  llvm::json::Array links;
  if (c.hasIntraNode)
    links.push_back(link("intra-node", c.intraNode));
  if (c.hasInterNode)
    links.push_back(link("inter-node", c.interNode));
  llvm::json::Object root{
      {"name", c.name},
      {"nodes", c.nodes},
      {"devices_per_node", c.devicesPerNode},
      {"device",
       llvm::json::Object{
           {"kind", c.device.kind},
           {"memory_gib", c.device.memoryBytes / kGiB},
           {"reserved_gib", c.device.reservedBytes / kGiB},
           {"memory_bandwidth_gbytes_per_s", c.device.memoryBandwidth / kGB},
           {"peak_tflops", std::move(peaks)}}},
      {"links", std::move(links)},
      {"efficiency",
       llvm::json::Object{{"matmul", c.efficiency.matmul},
                          {"memory", c.efficiency.memory},
                          {"network", c.efficiency.network},
                          {"network_inter", c.efficiency.networkInter},
                          {"kernel_overhead_us",
                           c.efficiency.kernelOverhead / kMicro},
                          {"overlap", c.efficiency.overlap}}}};
  if (c.device.coreShare < 1) {
    (*root.getObject("device"))["core_share"] = c.device.coreShare;
    (*root.getObject("device"))["core_lending"] = c.device.coreLending;
  }
  // Written where it is not the presets' 0, so that their files stay as
  // they were.
  if (c.efficiency.collectiveOverhead > 0)
    (*root.getObject("efficiency"))["collective_overhead_us"] =
        c.efficiency.collectiveOverhead / kMicro;
  if (c.calibration.present)
    root["calibration"] = calibrationToJSON(c.calibration);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root)));
  return s;
}

void hpc::cost::scaleClusterSpec(ClusterSpec &c, double computeScale, double networkScale,
                                 double latencyScale) {
  for (double &peak : c.device.peakFlops)
    peak /= computeScale;
  c.device.memoryBandwidth /= computeScale;
  c.efficiency.kernelOverhead *= computeScale;
  // The collective overhead is the hand-off to the communication thread
  // and back, which a slower link does not lengthen: scaled with the
  // network, a dp run of few buckets made every tp collective's overhead
  // 5-20x (docs/benchmarks.md, "The collective overhead, applied"). The
  // latency has its own scale (hpc-opt --recalibrate chooses it).
  for (LinkSpec *link : {&c.intraNode, &c.interNode}) {
    link->bandwidth /= networkScale;
    link->latency *= latencyScale;
  }
  for (CollectiveTiming &t : c.calibration.collectives)
    t.timeScale *= networkScale;
}
