//===- Cluster.cpp - cluster presets and the JSON cluster format ----------===//
//
// Presets use public spec-sheet figures (docs/cost-model.md lists them and
// their sources). The JSON reader checks every field and names the first bad
// one by its path, so a typo in a cluster file is one clear line.
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

/// Efficiency factors fitted to Megatron-LM's weak-scaling table (Narayanan
/// et al., SC'21, Table 1) by `scripts/bench_search.py --calibrate`; the same
/// factors are used for every device kind (docs/cost-model.md).
Efficiency calibratedEfficiency() {
  Efficiency e;
  e.matmul = 0.85;
  e.memory = 0.70;
  e.network = 0.70;
  e.networkInter = 0.90;
  e.kernelOverhead = 4e-6;
  e.overlap = 0.7;
  return e;
}

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
               llvm::StringRef key, int64_t &value) {
    const llvm::json::Value *v = o.get(key);
    std::string p = path.empty() ? key.str() : path + "." + key.str();
    if (!v)
      return fail(p, "missing");
    std::optional<int64_t> i = v->getAsInteger();
    if (!i)
      return fail(p, "expected an integer");
    if (*i < 1)
      return fail(p, "expected an integer >= 1, got " + std::to_string(*i));
    value = *i;
    return true;
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

} // namespace

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
                   "efficiency"}))
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
                   "memory_bandwidth_gbytes_per_s", "peak_tflops"}))
    return false;
  double memGiB = 0, reservedGiB = 2, bwGB = 0;
  if (!r.string(*dev, "device", "kind", c.device.kind, true) ||
      !r.number(*dev, "device", "memory_gib", memGiB, true, 0, true) ||
      !r.number(*dev, "device", "reserved_gib", reservedGiB, false, 0, false) ||
      !r.number(*dev, "device", "memory_bandwidth_gbytes_per_s", bwGB, true, 0,
                true))
    return false;
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
                     "kernel_overhead_us", "overlap"}))
      return false;
    Efficiency &e = c.efficiency;
    double overheadUs = e.kernelOverhead / kMicro;
    if (!r.number(*eff, "efficiency", "matmul", e.matmul, false, 0, true) ||
        !r.number(*eff, "efficiency", "memory", e.memory, false, 0, true) ||
        !r.number(*eff, "efficiency", "network", e.network, false, 0, true) ||
        !r.number(*eff, "efficiency", "network_inter", e.networkInter, false,
                  0, true) ||
        !r.number(*eff, "efficiency", "kernel_overhead_us", overheadUs, false,
                  0, false) ||
        !r.number(*eff, "efficiency", "overlap", e.overlap, false, 0, false))
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
  }
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
    if (nodes > 1 && out.nodes == 1 && out.interNode.name == out.intraNode.name) {
      error = spec + ": the file has no \"inter-node\" link level for " +
              std::to_string(nodes) + " nodes";
      return false;
    }
    out.nodes = nodes;
    out.name = out.name + ":" + std::to_string(nodes);
  }
  return true;
}

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
  links.push_back(link("intra-node", c.intraNode));
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
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root)));
  return s;
}
