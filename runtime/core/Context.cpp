//===- Context.cpp - manifest, weights, arena, trace ------------------------===//
//
// Parses the manifest the compiler embeds (hpc_manifest), maps and checks the
// safetensors weights, allocates the arena (and the state region of a
// train-step program, initialized from the weights or with zeros), resolves
// tensor ids to pointers, and keeps the bookkeeping of a run (high-water
// mark, trace, first error).
//
//===----------------------------------------------------------------------===//

#include "Context.h"

#include "../comm/MpiComm.h"
#include "../io/InputFile.h"
#include "../io/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using json = nlohmann::json;

namespace hpcrt {

void fail(const std::string &message) {
  // An error is one line, whatever text of a file it quotes: control
  // characters and Unicode's line separators (NEL, U+2028, U+2029) are
  // written as \xNN escapes.
  std::string line;
  for (size_t i = 0; i < message.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(message[i]);
    size_t sep = 0;
    if (c == 0xc2 && i + 1 < message.size() && static_cast<unsigned char>(message[i + 1]) == 0x85)
      sep = 2;
    else if (c == 0xe2 && i + 2 < message.size() &&
             static_cast<unsigned char>(message[i + 1]) == 0x80 &&
             (static_cast<unsigned char>(message[i + 2]) & 0xfe) == 0xa8)
      sep = 3;
    if (c >= 0x20 && c != 0x7f && !sep) {
      line += message[i];
      continue;
    }
    for (size_t k = 0; k < std::max<size_t>(sep, 1); ++k) {
      char hex[5];
      snprintf(hex, sizeof(hex), "\\x%02x", static_cast<unsigned char>(message[i + k]));
      line += hex;
    }
    i += std::max<size_t>(sep, 1) - 1;
  }
  throw Error(line);
}

size_t dtypeSize(int dtype) {
  switch (dtype) {
  case HPCRT_BOOL:
  case HPCRT_U8:
  case HPCRT_I8:
    return 1;
  case HPCRT_U16:
  case HPCRT_I16:
  case HPCRT_F16:
  case HPCRT_BF16:
    return 2;
  case HPCRT_F32:
  case HPCRT_I32:
  case HPCRT_U32:
    return 4;
  case HPCRT_F64:
  case HPCRT_I64:
  case HPCRT_U64:
    return 8;
  default:
    return 0;
  }
}

std::string dtypeName(int dtype) {
  switch (dtype) {
  case HPCRT_F32: return "f32";
  case HPCRT_U8: return "u8";
  case HPCRT_I8: return "i8";
  case HPCRT_U16: return "u16";
  case HPCRT_I16: return "i16";
  case HPCRT_I32: return "i32";
  case HPCRT_I64: return "i64";
  case HPCRT_BOOL: return "bool";
  case HPCRT_F16: return "f16";
  case HPCRT_F64: return "f64";
  case HPCRT_U32: return "u32";
  case HPCRT_U64: return "u64";
  case HPCRT_BF16: return "bf16";
  default: return "dtype(" + std::to_string(dtype) + ")";
  }
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s;
  appendShape(s, shape);
  return s;
}

void appendShape(std::string &out, const std::vector<int64_t> &shape) {
  char buf[24];
  out += '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      out += ", ";
    auto r = std::to_chars(buf, buf + sizeof(buf), shape[i]);
    out.append(buf, r.ptr);
  }
  out += ']';
}

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Buffer::Buffer(size_t bytes) : size_(bytes), release_(free) {
  if (bytes == 0)
    return;
  if (posix_memalign(&data_, 64, bytes) != 0) {
    data_ = nullptr;
    fail("out of memory allocating " + std::to_string(bytes) + " bytes");
  }
}
Buffer::Buffer(Buffer &&o) noexcept : data_(o.data_), size_(o.size_), release_(o.release_) {
  o.data_ = nullptr;
  o.size_ = 0;
}
Buffer &Buffer::operator=(Buffer &&o) noexcept {
  if (this != &o) {
    reset();
    data_ = o.data_;
    size_ = o.size_;
    release_ = o.release_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}
Buffer::~Buffer() { reset(); }
void Buffer::reset() {
  if (data_ && release_)
    release_(data_);
  data_ = nullptr;
}

std::string executableDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    return ".";
  std::string p(buf, static_cast<size_t>(n));
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : p.substr(0, slash));
}

uint64_t parseHash(const std::string &hex, const std::string &what) {
  if (hex.size() != 16)
    fail(what + ": hash '" + hex + "' is not 16 hex digits");
  uint64_t v = 0;
  for (char c : hex) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else fail(what + ": hash '" + hex + "' is not 16 hex digits");
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

std::string hashString(uint64_t hash) {
  char buf[17];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

} // namespace hpcrt

using namespace hpcrt;

// hpcrt_hash64 lives in runtime/common/Hash.c, shared with the compiler.

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

namespace {
const json &field(const json &obj, const char *key, const std::string &where) {
  if (!obj.is_object())
    fail("manifest: " + where + " is not an object");
  auto it = obj.find(key);
  if (it == obj.end())
    fail("manifest: " + where + " has no \"" + key + "\"");
  return *it;
}
int64_t intField(const json &obj, const char *key, const std::string &where) {
  const json &v = field(obj, key, where);
  if (!v.is_number_integer())
    fail("manifest: " + where + ".\"" + key + "\" is not an integer");
  return v.get<int64_t>();
}
std::string strField(const json &obj, const char *key, const std::string &where) {
  const json &v = field(obj, key, where);
  if (!v.is_string())
    fail("manifest: " + where + ".\"" + key + "\" is not a string");
  return v.get<std::string>();
}

/// The manifest's "ops" list.
std::vector<OpInfo> opsOf(const json &m) {
  std::vector<OpInfo> ops;
  auto oit = m.find("ops");
  if (oit == m.end())
    return ops;
  if (!oit->is_array())
    fail("manifest: \"ops\" is not an array");
  for (size_t i = 0; i < oit->size(); ++i) {
    std::string where = "ops[" + std::to_string(i) + "]";
    const json &entry = (*oit)[i];
    OpInfo op;
    op.name = strField(entry, "name", where);
    if (entry.contains("loc") && entry["loc"].is_string())
      op.loc = entry["loc"].get<std::string>();
    if (entry.contains("block") && entry["block"].is_string())
      op.block = entry["block"].get<std::string>();
    if (entry.contains("recv") && entry["recv"].is_boolean())
      op.recv = entry["recv"].get<bool>();
    ops.push_back(std::move(op));
  }
  return ops;
}

} // namespace

hpcrt_ctx::hpcrt_ctx(const std::string &manifestJson, const Backend &backend)
    : backend_(backend) {
  epochUs_ = nowUs();
  json m;
  try {
    m = json::parse(manifestJson);
  } catch (const json::exception &e) {
    fail(std::string("manifest: invalid JSON: ") + e.what());
  }
  try {
    if (!m.is_object())
      fail("manifest: not a JSON object");
    int64_t version = intField(m, "version", "manifest");
    if (version != 1)
      fail("manifest: version " + std::to_string(version) +
           " is not supported (this runtime reads version 1)");
    if (m.contains("model") && m["model"].is_string())
      model_ = m["model"].get<std::string>();
    if (m.contains("model_path") && m["model_path"].is_string())
      modelPath_ = m["model_path"].get<std::string>();
    if (m.contains("precision")) {
      if (!m["precision"].is_string())
        fail("manifest: \"precision\" is not a string");
      precision_ = m["precision"].get<std::string>();
    }
    if (m.contains("recompute")) {
      if (!m["recompute"].is_string())
        fail("manifest: \"recompute\" is not a string");
      recompute_ = m["recompute"].get<std::string>();
    }
    int64_t arena = intField(m, "arena_bytes", "manifest");
    if (arena < 0)
      fail("manifest: arena_bytes is negative");
    arenaBytes_ = static_cast<uint64_t>(arena);
    bool hasState = m.contains("state_bytes");
    if (hasState) {
      int64_t sb = intField(m, "state_bytes", "manifest");
      if (sb < 0)
        fail("manifest: state_bytes is negative");
      stateBytes_ = static_cast<uint64_t>(sb);
    }

    auto wit = m.find("weights");
    if (wit != m.end() && !wit->is_null()) {
      hasWeights_ = true;
      weightsFile_ = strField(*wit, "file", "weights");
      int64_t b = intField(*wit, "bytes", "weights");
      if (b < 0)
        fail("manifest: weights.bytes is negative");
      weightsBytes_ = static_cast<uint64_t>(b);
      weightsHash_ = parseHash(strField(*wit, "hash", "weights"), "manifest weights");
      auto entries = wit->find("entries");
      if (entries != wit->end()) {
        if (!entries->is_array())
          fail("manifest: weights.entries is not an array");
        for (const json &e : *entries) {
          int64_t offset = intField(e, "offset", "weights.entries");
          if (offset < 0)
            fail("manifest: weights.entries has a negative offset");
          weightNames_.push_back({static_cast<uint64_t>(offset), strField(e, "name", "weights.entries")});
        }
      }
    }

    const json &tensors = field(m, "tensors", "manifest");
    if (!tensors.is_array())
      fail("manifest: \"tensors\" is not an array");
    for (size_t i = 0; i < tensors.size(); ++i) {
      std::string where = "tensors[" + std::to_string(i) + "]";
      const json &t = tensors[i];
      Tensor x;
      x.dtype = static_cast<int>(intField(t, "dtype", where));
      if (dtypeSize(x.dtype) == 0)
        fail("manifest: " + where + " has unsupported dtype " + std::to_string(x.dtype));
      const json &shape = field(t, "shape", where);
      if (!shape.is_array())
        fail("manifest: " + where + ".shape is not an array");
      for (const json &d : shape) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          fail("manifest: " + where + ".shape has a negative or non-integer dimension");
        x.shape.push_back(d.get<int64_t>());
      }
      x.numel = numElements(x.shape);
      x.bytes = static_cast<size_t>(x.numel) * dtypeSize(x.dtype);
      if (t.contains("layout")) {
        std::string layout = strField(t, "layout", where);
        if (layout == "blocked")
          x.blocked = true;
        else if (layout != "plain")
          fail("manifest: " + where + ".layout '" + layout + "' is not plain or blocked");
        if (x.blocked && ((x.dtype != HPCRT_F32 && x.dtype != HPCRT_BF16) ||
                          x.shape.size() != 4 || x.shape[1] % 16))
          fail("manifest: " + where + " is blocked but not an f32 or bf16 [N, C, H, W] tensor "
               "with C a multiple of 16");
        hasBlockedBf16_ |= x.blocked && x.dtype == HPCRT_BF16;
      }
      std::string region = strField(t, "region", where);
      if (region == "input") {
        x.region = Region::Input;
        x.index = intField(t, "index", where);
      } else if (region == "arena" || region == "weights" || region == "state") {
        x.region = region == "arena"     ? Region::Arena
                   : region == "weights" ? Region::Weights
                                         : Region::State;
        x.offset = intField(t, "offset", where);
        if (x.offset < 0)
          fail("manifest: " + where + " has a negative offset");
        uint64_t end = static_cast<uint64_t>(x.offset) + x.bytes;
        if (x.region == Region::Arena && end > arenaBytes_)
          fail("manifest: " + where + " ends at byte " + std::to_string(end) +
               ", beyond arena_bytes " + std::to_string(arenaBytes_));
        if (x.region == Region::State && !hasState)
          fail("manifest: " + where + " is in the state but there is no \"state_bytes\"");
        if (x.region == Region::State && end > stateBytes_)
          fail("manifest: " + where + " ends at byte " + std::to_string(end) +
               ", beyond state_bytes " + std::to_string(stateBytes_));
        if (x.region == Region::Weights) {
          if (!hasWeights_)
            fail("manifest: " + where + " is in the weights but there is no \"weights\"");
          if (t.contains("rank_axes")) {
            const json &ra = t["rank_axes"];
            if (!ra.is_array() || ra.empty())
              fail("manifest: " + where + ".rank_axes is not a non-empty array");
            for (const json &a : ra) {
              if (!a.is_number_integer())
                fail("manifest: " + where + ".rank_axes has a non-integer entry");
              x.rankAxes.push_back(a.get<int64_t>());
            }
            x.rankStride = intField(t, "rank_stride", where);
            if (x.rankStride < 0)
              fail("manifest: " + where + " has a negative rank_stride");
          }
          if (end > weightsBytes_)
            fail("manifest: " + where + " ends at byte " + std::to_string(end) +
                 ", beyond the weights' " + std::to_string(weightsBytes_) + " bytes");
        }
      } else {
        fail("manifest: " + where + " has unknown region '" + region + "'");
      }
      tensors_.push_back(std::move(x));
    }

    auto readList = [&](const char *key, std::vector<NamedTensor> &out) {
      const json &list = field(m, key, "manifest");
      if (!list.is_array())
        fail(std::string("manifest: \"") + key + "\" is not an array");
      for (size_t i = 0; i < list.size(); ++i) {
        std::string where = std::string(key) + "[" + std::to_string(i) + "]";
        NamedTensor n;
        n.name = strField(list[i], "name", where);
        int64_t id = intField(list[i], "tensor", where);
        if (id < 0 || id >= static_cast<int64_t>(tensors_.size()))
          fail("manifest: " + where + " names tensor " + std::to_string(id) +
               ", not in the table");
        n.tensor = static_cast<int>(id);
        out.push_back(std::move(n));
      }
    };
    readList("inputs", inputs_);
    readList("outputs", outputs_);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      const Tensor &t = tensors_[inputs_[i].tensor];
      if (t.region != Region::Input || t.index != static_cast<int64_t>(i))
        fail("manifest: inputs[" + std::to_string(i) + "] ('" + inputs_[i].name +
             "') is not the tensor of region input, index " + std::to_string(i));
    }
    for (size_t i = 0; i < tensors_.size(); ++i)
      if (tensors_[i].region == Region::Input &&
          (tensors_[i].index < 0 ||
           tensors_[i].index >= static_cast<int64_t>(inputs_.size())))
        fail("manifest: tensors[" + std::to_string(i) + "] has input index " +
             std::to_string(tensors_[i].index) + ", but there are " +
             std::to_string(inputs_.size()) + " inputs");
    auto mit = m.find("mesh");
    if (mit != m.end() && !mit->is_null()) {
      const json &axes = field(*mit, "axes", "mesh");
      if (!axes.is_array() || axes.empty())
        fail("manifest: mesh.axes is not a non-empty array");
      int64_t ranks = 1;
      for (size_t i = 0; i < axes.size(); ++i) {
        std::string where = "mesh.axes[" + std::to_string(i) + "]";
        MeshAxisInfo a;
        a.name = strField(axes[i], "name", where);
        a.size = intField(axes[i], "size", where);
        if (axes[i].contains("level") && axes[i]["level"].is_string())
          a.level = axes[i]["level"].get<std::string>();
        if (a.name.empty())
          fail("manifest: " + where + " has an empty name");
        for (const MeshAxisInfo &b : mesh_)
          if (b.name == a.name)
            fail("manifest: mesh axis '" + a.name + "' is listed twice");
        if (a.size < 1 || a.size > (1 << 20))
          fail("manifest: " + where + ".size " + std::to_string(a.size) +
               " is not a positive rank count");
        ranks *= a.size;
        if (ranks > (1 << 24))
          fail("manifest: the mesh has more than " + std::to_string(1 << 24) + " ranks");
        mesh_.push_back(std::move(a));
      }
      if (mesh_.size() > 16)
        fail("manifest: the mesh has " + std::to_string(mesh_.size()) +
             " axes (at most 16)");
    }
    // Rank pieces: known axes, and the last rank's piece inside the weights.
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor &x = tensors_[i];
      if (x.rankAxes.empty())
        continue;
      std::string where = "tensors[" + std::to_string(i) + "]";
      for (int64_t a : x.rankAxes)
        if (a < 0 || a >= static_cast<int64_t>(mesh_.size()))
          fail("manifest: " + where + ".rank_axes names mesh axis " + std::to_string(a) +
               ", which the mesh does not have");
      uint64_t end = static_cast<uint64_t>(x.offset) +
                     (ranksOver(x.rankAxes) - 1) * static_cast<uint64_t>(x.rankStride) + x.bytes;
      if (end > weightsBytes_)
        fail("manifest: " + where + "'s last rank piece ends at byte " + std::to_string(end) +
             ", beyond the weights' " + std::to_string(weightsBytes_) + " bytes");
    }
    // After the mesh: a ZeRO-3 state entry names its axes.
    parseState(m);
    parseTrain(m);
    auto bit = m.find("bytes_per_rank");
    if (bit != m.end() && bit->is_number_integer())
      bytesPerRank_ = bit->get<int64_t>();
    auto ait = m.find("bytes_across_nodes");
    if (ait != m.end() && ait->is_number_integer())
      bytesAcrossNodes_ = ait->get<int64_t>();
    auto zit = m.find("zero");
    if (zit != m.end()) {
      if (!zit->is_number_integer() || zit->get<int64_t>() < 0 || zit->get<int64_t>() > 3)
        fail("manifest: \"zero\" is not a ZeRO stage 0-3");
      zeroStage_ = zit->get<int64_t>();
    }
    auto pit = m.find("ranks_per_node");
    if (pit != m.end()) {
      if (!pit->is_number_integer() || pit->get<int64_t>() < 1 ||
          pit->get<int64_t>() > (1 << 20))
        fail("manifest: \"ranks_per_node\" is not a positive rank count");
      ranksPerNode_ = pit->get<int64_t>();
    }
    auto prit = m.find("prediction");
    if (prit != m.end()) {
      if (!prit->is_object())
        fail("manifest: \"prediction\" is not an object");
      for (const char *key : {"step_time_s", "compute_s", "exposed_comm_s", "bubble_s"}) {
        auto v = prit->find(key);
        if (v == prit->end() || !v->is_number() || !(v->get<double>() >= 0))
          fail(std::string("manifest: \"prediction\" has no ") + key + " >= 0");
      }
      prediction_ = prit->dump();
    }

    ops_ = opsOf(m);
  } catch (const json::exception &e) {
    fail(std::string("manifest: ") + e.what());
  }
  inputBuffers_.resize(inputs_.size());
  inputBound_.assign(inputs_.size(), false);
}

void hpcrt_ctx::parseState(const json &m) {
  auto sit = m.find("state");
  if (sit == m.end() || sit->is_null()) {
    for (size_t i = 0; i < tensors_.size(); ++i)
      if (tensors_[i].region == Region::State)
        fail("manifest: tensors[" + std::to_string(i) +
             "] is in the state but there is no \"state\" list");
    return;
  }
  if (!sit->is_array())
    fail("manifest: \"state\" is not an array");
  if (!m.contains("state_bytes"))
    fail("manifest: \"state\" without \"state_bytes\"");
  std::vector<int> listedBy(tensors_.size(), -1);
  std::set<std::string> names;
  for (size_t i = 0; i < sit->size(); ++i) {
    const json &j = (*sit)[i];
    std::string where = "state[" + std::to_string(i) + "]";
    StateEntry e;
    e.name = strField(j, "name", where);
    if (e.name.empty())
      fail("manifest: " + where + " has an empty name");
    if (!names.insert(e.name).second)
      fail("manifest: state name '" + e.name + "' is listed twice");
    where += " ('" + e.name + "')";
    int64_t id = intField(j, "tensor", where);
    if (id < 0 || id >= static_cast<int64_t>(tensors_.size()))
      fail("manifest: " + where + " names tensor " + std::to_string(id) + ", not in the table");
    if (tensors_[id].region != Region::State)
      fail("manifest: " + where + " names tensors[" + std::to_string(id) +
           "], which is not of region \"state\"");
    if (listedBy[id] >= 0)
      fail("manifest: tensors[" + std::to_string(id) + "] is listed twice in \"state\" (state[" +
           std::to_string(listedBy[id]) + "] and state[" + std::to_string(i) + "])");
    listedBy[id] = static_cast<int>(i);
    e.tensor = static_cast<int>(id);
    e.role = strField(j, "role", where);
    if (e.role != "param" && e.role != "buffer" && e.role != "optimizer" && e.role != "rng" &&
        e.role != "error_feedback")
      fail("manifest: " + where + " has unknown role '" + e.role +
           "' (param, buffer, optimizer, rng or error_feedback)");
    std::string init = strField(j, "init", where);
    if (init == "zeros") {
      e.init = StateInit::Zeros;
    } else if (init == "weights") {
      e.init = StateInit::Weights;
      if (!hasWeights_)
        fail("manifest: " + where + " is initialized from the weights but there is no \"weights\"");
      e.weightsOffset = intField(j, "weights_offset", where);
      if (j.contains("rank_axes")) {
        const json &axes = j["rank_axes"];
        if (!axes.is_array() || axes.empty())
          fail("manifest: " + where + ".rank_axes is not a non-empty array");
        for (const json &a : axes) {
          if (!a.is_number_integer() || a.get<int64_t>() < 0 ||
              a.get<int64_t>() >= static_cast<int64_t>(mesh_.size()))
            fail("manifest: " + where + ".rank_axes names a mesh axis the mesh does not have");
          e.rankAxes.push_back(a.get<int64_t>());
        }
        e.rankPieces = static_cast<int64_t>(ranksOver(e.rankAxes));
        e.rankStride = intField(j, "rank_stride", where);
        if (e.rankStride != static_cast<int64_t>(tensors_[id].bytes))
          fail("manifest: " + where + ".rank_stride must be the tensor's bytes");
      }
      uint64_t end = static_cast<uint64_t>(e.weightsOffset) +
                     tensors_[id].bytes * static_cast<uint64_t>(e.rankPieces);
      if (e.weightsOffset < 0 || end > weightsBytes_)
        fail("manifest: " + where + ".weights_offset " + std::to_string(e.weightsOffset) +
             " + " + std::to_string(tensors_[id].bytes) + " bytes is outside the weights' " +
             std::to_string(weightsBytes_) + " bytes");
    } else {
      fail("manifest: " + where + " has unknown init '" + init + "' (weights or zeros)");
    }
    if (j.contains("split")) {
      const json &split = j["split"];
      if (!split.is_array() || split.size() != tensors_[id].shape.size())
        fail("manifest: " + where + ".split is not an array of one list per dimension");
      for (const json &dim : split) {
        std::vector<int64_t> axes;
        if (!dim.is_array())
          fail("manifest: " + where + ".split is not an array of one list per dimension");
        for (const json &a : dim) {
          if (!a.is_number_integer() || a.get<int64_t>() < 0 ||
              a.get<int64_t>() >= static_cast<int64_t>(mesh_.size()))
            fail("manifest: " + where + ".split names a mesh axis the mesh does not have");
          axes.push_back(a.get<int64_t>());
        }
        e.split.push_back(std::move(axes));
      }
    }
    state_.push_back(std::move(e));
  }
  // A state tensor "state" does not list is a view of one it does (a
  // reshape of a parameter): the same bytes with another shape.
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].region != Region::State || listedBy[i] >= 0)
      continue;
    bool view = false;
    for (const StateEntry &e : state_)
      view |= tensors_[e.tensor].offset == tensors_[i].offset &&
              tensors_[e.tensor].bytes == tensors_[i].bytes;
    if (!view)
      fail("manifest: tensors[" + std::to_string(i) +
           "] is in the state but is neither listed in \"state\" nor a view of a "
           "tensor that is");
  }
  std::vector<const StateEntry *> byOffset;
  for (const StateEntry &e : state_)
    if (tensors_[e.tensor].bytes > 0)
      byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(), [&](const StateEntry *a, const StateEntry *b) {
    return tensors_[a->tensor].offset < tensors_[b->tensor].offset;
  });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const Tensor &prev = tensors_[byOffset[i - 1]->tensor];
    if (static_cast<uint64_t>(prev.offset) + prev.bytes >
        static_cast<uint64_t>(tensors_[byOffset[i]->tensor].offset))
      fail("manifest: state tensors '" + byOffset[i - 1]->name + "' and '" + byOffset[i]->name +
           "' overlap in the state buffer");
  }
}

namespace {
/// The input or output number named `name` (-1 when none).
int findNamed(const std::vector<NamedTensor> &list, const std::string &name) {
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name)
      return static_cast<int>(i);
  return -1;
}
} // namespace

void hpcrt_ctx::parseTrain(const json &m) {
  auto tit = m.find("train");
  if (tit == m.end() || tit->is_null())
    return;
  if (!tit->is_object())
    fail("manifest: \"train\" is not an object");
  const json &j = *tit;
  TrainInfo &t = train_;
  t.loss = j.contains("loss") ? strField(j, "loss", "train") : "output";
  t.batch = intField(j, "batch", "train");
  if (t.batch < 1)
    fail("manifest: train.batch " + std::to_string(t.batch) + " is not positive");
  if (j.contains("micro_batches")) {
    t.microBatches = intField(j, "micro_batches", "train");
    if (t.microBatches < 1 || t.batch % t.microBatches)
      fail("manifest: train.micro_batches " + std::to_string(t.microBatches) +
           " does not divide the batch " + std::to_string(t.batch));
  }
  // A named 0-d input or output of the given dtype.
  auto scalar = [&](const char *key, const std::vector<NamedTensor> &list, const char *kind,
                    int dtype, std::string &name) {
    name = strField(j, key, "train");
    int k = findNamed(list, name);
    if (k < 0)
      fail("manifest: train." + std::string(key) + " '" + name + "' is not an " + kind +
           " of the program");
    const Tensor &x = tensors_[list[k].tensor];
    if (x.dtype != dtype || !x.shape.empty())
      fail("manifest: train." + std::string(key) + " '" + name + "' is " + dtypeName(x.dtype) +
           " " + shapeString(x.shape) + ", expected a 0-d " + dtypeName(dtype));
    return k;
  };
  t.lrInput = scalar("lr_input", inputs_, "input", HPCRT_F32, t.lrInputName);
  t.stepInput = scalar("step_input", inputs_, "input", HPCRT_I64, t.stepInputName);
  if (t.lrInput == t.stepInput)
    fail("manifest: train.lr_input and train.step_input are the same input");
  if (j.contains("loss_scale_input") && !j["loss_scale_input"].is_null()) {
    t.lossScaleInput =
        scalar("loss_scale_input", inputs_, "input", HPCRT_F32, t.lossScaleInputName);
    if (t.lossScaleInput == t.lrInput || t.lossScaleInput == t.stepInput)
      fail("manifest: train.loss_scale_input is the lr or the step input");
  }
  if (j.contains("clip_norm_input") && !j["clip_norm_input"].is_null()) {
    t.clipNormInput = scalar("clip_norm_input", inputs_, "input", HPCRT_F32, t.clipNormInputName);
    if (t.clipNormInput == t.lrInput || t.clipNormInput == t.stepInput ||
        t.clipNormInput == t.lossScaleInput)
      fail("manifest: train.clip_norm_input is another step input");
  }
  t.lossOutput = scalar("loss_output", outputs_, "output", HPCRT_F32, t.lossOutputName);
  if (j.contains("grad_norm_output") && !j["grad_norm_output"].is_null())
    t.gradNormOutput =
        scalar("grad_norm_output", outputs_, "output", HPCRT_F32, t.gradNormOutputName);
  if (j.contains("moe_loads")) {
    if (!j["moe_loads"].is_array())
      fail("manifest: train.moe_loads is not an array");
    for (const json &e : j["moe_loads"]) {
      std::string name = strField(e, "output", "train.moe_loads");
      TrainInfo::MoELoad load;
      load.output = findNamed(outputs_, name);
      load.capacity = intField(e, "capacity", "train.moe_loads");
      if (load.output < 0)
        fail("manifest: train.moe_loads '" + name + "' is not an output of the program");
      const Tensor &x = tensors_[outputs_[load.output].tensor];
      if (x.dtype != HPCRT_I64 || x.shape.size() != 1 || load.capacity < 1)
        fail("manifest: train.moe_loads '" + name + "' is " + dtypeName(x.dtype) + " " +
             shapeString(x.shape) + " of capacity " + std::to_string(load.capacity) +
             ", expected an i64 [experts] and a positive capacity");
      t.moeLoads.push_back(load);
    }
  }
  if (j.contains("moe_balance_loss_output") && !j["moe_balance_loss_output"].is_null())
    t.moeBalanceLossOutput = scalar("moe_balance_loss_output", outputs_, "output", HPCRT_F32,
                                    t.moeBalanceLossOutputName);
  if (j.contains("labels") && !j["labels"].is_null()) {
    t.labels = strField(j, "labels", "train");
    t.labelsInput = findNamed(inputs_, t.labels);
    if (t.labelsInput < 0 || !t.isDataInput(t.labelsInput))
      fail("manifest: train.labels '" + t.labels + "' is not a data input of the program");
  }
  const json &opt = field(j, "optimizer", "train");
  t.optimizer = strField(opt, "name", "train.optimizer");
  if (opt.contains("lr")) {
    if (!opt["lr"].is_number())
      fail("manifest: train.optimizer.\"lr\" is not a number");
    t.lr = opt["lr"].get<double>();
    t.hasLr = true;
  }
  t.optimizerJson = opt.dump();
  if (opt.contains("clip_norm")) {
    if (!opt["clip_norm"].is_number() || !(opt["clip_norm"].get<double>() >= 0))
      fail("manifest: train.optimizer.\"clip_norm\" is not a non-negative number");
    t.clipNorm = opt["clip_norm"].get<double>();
  }
  if (opt.contains("clip_norm_auto")) {
    if (!opt["clip_norm_auto"].is_boolean())
      fail("manifest: train.optimizer.\"clip_norm_auto\" is not a boolean");
    t.clipNormAuto = opt["clip_norm_auto"].get<bool>();
  }
  if (t.clipNormInput >= 0 && !t.clipNormAuto && !(t.clipNorm > 0))
    fail("manifest: train.clip_norm_input needs optimizer.clip_norm or clip_norm_auto");
  if (opt.contains("skip_nonfinite")) {
    if (!opt["skip_nonfinite"].is_boolean())
      fail("manifest: train.optimizer.\"skip_nonfinite\" is not a boolean");
    t.skipNonfinite = opt["skip_nonfinite"].get<bool>();
  }
  if (j.contains("lr_schedule") && !j["lr_schedule"].is_null()) {
    const json &ls = j["lr_schedule"];
    t.scheduleKind = strField(ls, "kind", "train.lr_schedule");
    if (t.scheduleKind == "cosine" || t.scheduleKind == "linear") {
      t.warmup = intField(ls, "warmup", "train.lr_schedule");
      t.total = intField(ls, "total", "train.lr_schedule");
      if (t.warmup < 0 || t.total < 0)
        fail("manifest: train.lr_schedule has a negative warmup or total");
    } else if (t.scheduleKind != "constant") {
      fail("manifest: train.lr_schedule.kind '" + t.scheduleKind +
           "' is not constant, cosine or linear");
    }
  }
  // The conservative plan (hpc-opt's second program of the step).
  if (m.contains("conservative") && !m["conservative"].is_null()) {
    const json &c = m["conservative"];
    if (!c.is_object() || !c.contains("lr_scale") || !c["lr_scale"].is_number() ||
        !(c["lr_scale"].get<double>() > 0))
      fail("manifest: \"conservative\" needs a positive lr_scale");
    t.conservative = true;
    t.conservativeLrScale = c["lr_scale"].get<double>();
    if (c.contains("compress") && c["compress"].is_string())
      t.conservativeCompress = c["compress"].get<std::string>();
  }
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (t.isDataInput(static_cast<int>(i)) && tensors_[inputs_[i].tensor].shape.empty())
      fail("manifest: data input '" + inputs_[i].name +
           "' is 0-d; data inputs have the batch as their first dimension");
  isTrainStep_ = true;
}

hpcrt_ctx::~hpcrt_ctx() {
  if (mapBase_)
    munmap(mapBase_, mapBytes_);
}

int64_t hpcrt_ctx::meshRanks() const {
  int64_t n = 1;
  for (const MeshAxisInfo &a : mesh_)
    n *= a.size;
  return n;
}

Tensor &hpcrt_ctx::tensor(int id) {
  if (id < 0 || static_cast<size_t>(id) >= tensors_.size())
    fail("tensor id " + std::to_string(id) + " is not in the manifest's table of " +
         std::to_string(tensors_.size()));
  return tensors_[id];
}
const Tensor &hpcrt_ctx::tensor(int id) const {
  return const_cast<hpcrt_ctx *>(this)->tensor(id);
}

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

void hpcrt_ctx::checkWeights(const uint8_t *data, size_t bytes,
                             const std::string &what) {
  if (!hasWeights_)
    fail(what + ": the model has no weights");
  if (bytes != weightsBytes_)
    fail(what + ": data section has " + std::to_string(bytes) +
         " bytes, the model expects " + std::to_string(weightsBytes_));
  uint64_t h = hpcrt_hash64(data, bytes);
  if (h != weightsHash_)
    fail(what + ": data hash " + hashString(h) + " does not match the model's " +
         hashString(weightsHash_) + " (weights of another build?)");
}

void hpcrt_ctx::setWeightsData(const void *data, size_t bytes) {
  checkWeights(static_cast<const uint8_t *>(data), bytes, "weights");
  weightsData_ = static_cast<const uint8_t *>(data);
  weightsDataBytes_ = bytes;
}

void hpcrt_ctx::adoptWeightsData(Buffer data) {
  if (!hasWeights_)
    fail("weights: the model has no weights");
  if (data.size() != weightsBytes_)
    fail("weights: " + std::to_string(data.size()) + " bytes laid out, the model expects " +
         std::to_string(weightsBytes_));
  if (mapBase_)
    munmap(mapBase_, mapBytes_);
  mapBase_ = nullptr;
  mapBytes_ = 0;
  weightsCopy_ = std::move(data);
  weightsData_ = static_cast<const uint8_t *>(weightsCopy_.data());
  weightsDataBytes_ = weightsCopy_.size();
}

namespace {

/// What the plan puts at one offset of the weights data: a weight (or a
/// view of it, which shares its offset) or a state tensor's initial value.
struct PlannedWeight {
  int dtype = 0;
  std::vector<int64_t> shape;
  std::string name; ///< the state entry's name; empty for a weight
};

std::string recordText(int dtype, const std::vector<int64_t> &shape) {
  return dtypeName(dtype) + " " + shapeString(shape);
}

/// Checks every entry of a compiled model's weights header against the
/// plan: each entry starts where a planned tensor of its dtype and shape
/// does (the parser checked it has that many bytes, in the data section,
/// overlapping no other), a state tensor's initial value carries the
/// state's name, an entry at an offset the manifest names (`names`, by
/// offset) has one of those names, and every planned offset has its entry.
void checkWeightsEntries(const SafetensorsFile &f, const std::vector<Tensor> &tensors,
                         const std::vector<StateEntry> &state,
                         const std::vector<std::pair<uint64_t, std::string>> &names,
                         const std::string &path) {
  std::multimap<uint64_t, std::string> namesAt(names.begin(), names.end());
  std::map<uint64_t, std::vector<PlannedWeight>> planned;
  for (const Tensor &t : tensors)
    if (t.region == Region::Weights && t.rankAxes.empty())
      planned[static_cast<uint64_t>(t.offset)].push_back({t.dtype, t.shape, ""});
  for (const StateEntry &e : state)
    if (e.init == StateInit::Weights) {
      // A ZeRO-3 entry holds every rank's rows: the whole tensor.
      std::vector<int64_t> shape = tensors[e.tensor].shape;
      if (!shape.empty())
        shape[0] *= e.rankPieces;
      planned[static_cast<uint64_t>(e.weightsOffset)].push_back(
          {tensors[e.tensor].dtype, shape, e.name});
    }
  std::set<uint64_t> covered;
  for (const SafetensorsRecord &r : f.records) {
    std::string where = path + ": tensor '" + r.name + "'";
    auto it = planned.find(r.begin);
    if (it == planned.end())
      fail(where + " at data_offsets [" + std::to_string(r.begin) + ", " +
           std::to_string(r.end) + "] is not a tensor of the model (none starts at byte " +
           std::to_string(r.begin) + ")");
    const PlannedWeight *match = nullptr;
    for (const PlannedWeight &w : it->second)
      if (r.dtype == w.dtype && r.shape == w.shape)
        match = &w;
    if (!match)
      fail(where + " is " + r.dtypeName + " " + shapeString(r.shape) +
           ", the model's tensor at byte " + std::to_string(r.begin) + " is " +
           recordText(it->second.front().dtype, it->second.front().shape));
    std::string base = r.name.substr(0, r.name.rfind('#'));
    if (!match->name.empty() && base != match->name)
      fail(where + " at byte " + std::to_string(r.begin) + " holds the initial value of '" +
           match->name + "' and must have its name");
    auto [first, last] = namesAt.equal_range(r.begin);
    if (first != last && std::none_of(first, last, [&](const auto &n) { return n.second == r.name; }))
      fail(where + " at byte " + std::to_string(r.begin) + " is '" + first->second +
           "' in the model (renamed?)");
    covered.insert(r.begin);
  }
  for (const auto &[offset, list] : planned)
    if (!covered.count(offset))
      fail(path + ": no tensor entry for the model's " +
           (list.front().name.empty() ? "" : "'" + list.front().name + "' ") +
           recordText(list.front().dtype, list.front().shape) + " tensor at byte " +
           std::to_string(offset) + " (removed?)");
}

} // namespace

void hpcrt_ctx::loadWeightsFile(const std::string &path) {
  void *base = nullptr;
  size_t size = 0;
  {
    InputFile file(path, "cannot open weights file");
    size = static_cast<size_t>(file.size());
    if (size > 0) {
      base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd(), 0);
      if (base == MAP_FAILED)
        fail(path + ": cannot map weights file: " + strerror(errno));
    }
  }
  if (mapBase_)
    munmap(mapBase_, mapBytes_);
  mapBase_ = base;
  mapBytes_ = size;
  weightsCopy_ = Buffer();
  weightsData_ = nullptr;
  const uint8_t *p = static_cast<const uint8_t *>(base);

  SafetensorsFile header = parseSafetensors(p, size, path);
  auto meta = header.metadata.find("hpc_hash");
  if (meta == header.metadata.end())
    fail(path + ": safetensors header has no __metadata__.hpc_hash");
  if (parseHash(meta->second, path) != weightsHash_)
    fail(path + ": hpc_hash " + meta->second + " does not match the model's " +
         hashString(weightsHash_) + " (weights of another build?)");

  size_t dataOffset = static_cast<size_t>(header.dataOffset);
  const uint8_t *data = p + dataOffset;
  size_t dataBytes = size - dataOffset;
  checkWeights(data, dataBytes, path);
  checkWeightsEntries(header, tensors_, state_, weightNames_, path);
  if (dataOffset % 64 != 0 && dataBytes > 0) {
    // Kernels expect naturally aligned data: copy when the header size does
    // not leave the data section aligned.
    weightsCopy_ = backend_.allocate(dataBytes);
    memcpy(weightsCopy_.data(), data, dataBytes);
    data = static_cast<const uint8_t *>(weightsCopy_.data());
    munmap(mapBase_, mapBytes_);
    mapBase_ = nullptr;
    mapBytes_ = 0;
  }
  weightsData_ = data;
  weightsDataBytes_ = dataBytes;
}

//===----------------------------------------------------------------------===//
// Inputs, arena, resolution
//===----------------------------------------------------------------------===//

void hpcrt_ctx::bindInput(size_t i, int dtype, const std::vector<int64_t> &shape,
                          const void *data, size_t bytes) {
  if (i >= inputs_.size())
    fail("input number " + std::to_string(i) + " does not exist");
  const Tensor &t = tensors_[inputs_[i].tensor];
  if (dtype != t.dtype || shape != t.shape)
    fail("input '" + inputs_[i].name + "': expected " + dtypeName(t.dtype) + " " +
         shapeString(t.shape) + ", got " + dtypeName(dtype) + " " + shapeString(shape));
  if (bytes != t.bytes)
    fail("input '" + inputs_[i].name + "': expected " + std::to_string(t.bytes) +
         " bytes of data, got " + std::to_string(bytes));
  Buffer b = backend_.allocate(bytes);
  if (bytes)
    memcpy(b.data(), data, bytes);
  inputBuffers_[i] = std::move(b);
  inputBound_[i] = true;
  if (prepared_)
    for (Tensor &x : tensors_)
      if (x.region == Region::Input && x.index == static_cast<int64_t>(i))
        x.data = inputBuffers_[i].data();
}

void hpcrt_ctx::shareState(const hpcrt_ctx &owner) {
  if (prepared_ || !owner.prepared_ || owner.stateBytes_ != stateBytes_)
    fail("a shared state needs a prepared owner of the same state size (" +
         std::to_string(owner.stateBytes_) + " vs " + std::to_string(stateBytes_) + " bytes)");
  stateBuffer_ = hpcrt::Buffer(owner.stateBuffer_.data(), stateBytes_, nullptr);
  stateShared_ = true;
}

void hpcrt_ctx::prepare() {
  bool needWeights = false;
  for (const Tensor &t : tensors_)
    if (t.region == Region::Weights && t.bytes > 0)
      needWeights = true;
  for (const StateEntry &e : state_)
    if (e.init == StateInit::Weights && tensors_[e.tensor].bytes > 0)
      needWeights = true;
  if (needWeights && !weightsData_)
    fail("weights: not loaded");
  if (!prepared_) {
    arena_ = backend_.allocate(arenaBytes_);
    if (arenaBytes_)
      memset(arena_.data(), 0, arenaBytes_);
    if (!stateShared_) {
      stateBuffer_ = backend_.allocate(stateBytes_);
      initializeState();
    }
    releaseInitOnlyWeights();
  }
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!inputBound_[i]) {
      const Tensor &t = tensors_[inputs_[i].tensor];
      inputBuffers_[i] = backend_.allocate(t.bytes);
      if (t.bytes)
        memset(inputBuffers_[i].data(), 0, t.bytes);
      inputBound_[i] = true;
    }
  for (Tensor &t : tensors_) {
    switch (t.region) {
    case Region::Input:
      t.data = inputBuffers_[t.index].data();
      break;
    case Region::Arena:
      t.data = static_cast<uint8_t *>(arena_.data()) + t.offset;
      break;
    case Region::Weights:
      t.data = const_cast<uint8_t *>(weightsData_) + t.offset;
      if (!t.rankAxes.empty()) {
        if (!comm_)
          fail("a weight is split over the mesh, but the ranks of the mesh were not started");
        t.data = static_cast<uint8_t *>(t.data) + comm_->group(t.rankAxes).index * t.rankStride;
      }
      break;
    case Region::State:
      t.data = static_cast<uint8_t *>(stateBuffer_.data()) + t.offset;
      break;
    }
  }
  prepared_ = true;
}

std::vector<std::pair<uint64_t, uint64_t>> hpcrt_ctx::initOnlyRanges() const {
  std::vector<std::pair<uint64_t, uint64_t>> init, read, out;
  for (const StateEntry &e : state_)
    if (e.init == StateInit::Weights && tensors_[e.tensor].bytes > 0)
      init.push_back({static_cast<uint64_t>(e.weightsOffset),
                      static_cast<uint64_t>(e.weightsOffset) +
                          tensors_[e.tensor].bytes * static_cast<uint64_t>(e.rankPieces)});
  for (const Tensor &t : tensors_)
    if (t.region == Region::Weights && t.bytes > 0) {
      // A rank piece of a weight lies anywhere in its rank-major block.
      uint64_t span = static_cast<uint64_t>(t.rankStride) * (ranksOver(t.rankAxes) - 1) + t.bytes;
      read.push_back({static_cast<uint64_t>(t.offset), static_cast<uint64_t>(t.offset) + span});
    }
  std::sort(read.begin(), read.end());
  for (auto [begin, end] : init) {
    // [begin, end) less every range a kernel reads.
    uint64_t at = begin;
    for (auto [rb, re] : read) {
      if (re <= at || rb >= end)
        continue;
      if (rb > at)
        out.push_back({at, rb});
      at = std::max(at, re);
    }
    if (at < end)
      out.push_back({at, end});
  }
  return out;
}

uint64_t hpcrt_ctx::ranksOver(const std::vector<int64_t> &axes) const {
  uint64_t n = 1;
  for (int64_t a : axes)
    n *= static_cast<uint64_t>(mesh_[static_cast<size_t>(a)].size);
  return n;
}

uint64_t hpcrt_ctx::initOnlyWeightsBytes() const {
  uint64_t n = 0;
  for (auto [begin, end] : initOnlyRanges())
    n += end - begin;
  return n;
}

void hpcrt_ctx::releaseInitOnlyWeights() {
  if (!weightsData_ || initReleased_)
    return;
  initReleased_ = true;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  for (auto [begin, end] : initOnlyRanges()) {
    uintptr_t from = reinterpret_cast<uintptr_t>(weightsData_) + begin;
    uintptr_t to = reinterpret_cast<uintptr_t>(weightsData_) + end;
    from = (from + page - 1) / page * page;
    to = to / page * page;
    // A private file mapping reads the file again if ever touched; the
    // copy's pages would read zeros, but nothing reads them after this.
    if (to > from && madvise(reinterpret_cast<void *>(from), to - from, MADV_DONTNEED) == 0)
      releasedBytes_ += to - from;
  }
}

void hpcrt_ctx::stateSlice(const StateEntry &e, std::vector<int64_t> &global,
                           std::vector<int64_t> &start) const {
  const Tensor &t = tensors_[e.tensor];
  global = t.shape;
  start.assign(t.shape.size(), 0);
  for (size_t d = 0; d < e.split.size(); ++d) {
    if (e.split[d].empty())
      continue;
    if (!comm_)
      fail("state '" + e.name + "' is split over ranks: run under mpirun");
    // The piece index over the axes, major first (as MpiComm::group's
    // index); computed from the coordinates, with no collective.
    int64_t index = 0, pieces = 1;
    for (int64_t a : e.split[d]) {
      index = index * mesh_[a].size + comm_->coords()[a];
      pieces *= mesh_[a].size;
    }
    global[d] = t.shape[d] * pieces;
    start[d] = index * t.shape[d];
  }
}

void hpcrt_ctx::initializeState() {
  if (initReleased_)
    fail("the state's initial values were released after the first initialization");
  if (stateBytes_)
    memset(stateBuffer_.data(), 0, stateBytes_);
  for (const StateEntry &e : state_) {
    const Tensor &t = tensors_[e.tensor];
    if (e.init != StateInit::Weights || t.bytes == 0)
      continue;
    uint64_t from = static_cast<uint64_t>(e.weightsOffset);
    if (!e.rankAxes.empty()) {
      if (!comm_)
        fail("state '" + e.name + "' starts from this rank's rows: run under mpirun");
      from += static_cast<uint64_t>(comm_->group(e.rankAxes).index) *
              static_cast<uint64_t>(e.rankStride);
    }
    memcpy(static_cast<uint8_t *>(stateBuffer_.data()) + t.offset, weightsData_ + from, t.bytes);
  }
}

void *hpcrt_ctx::inputData(size_t i) {
  if (i >= inputs_.size())
    fail("input number " + std::to_string(i) + " does not exist");
  if (!prepared_)
    fail("input buffers are allocated by prepare()");
  return inputBuffers_[i].data();
}

uint64_t hpcrt_ctx::residentBytes() const {
  uint64_t n = arena_.size() + stateBuffer_.size() + weightsCopy_.size() + mapBytes_ +
               scratchpad_.size() + kernelStateBytes() - releasedBytes_;
  for (const Buffer &b : inputBuffers_)
    n += b.size();
  return n;
}

//===----------------------------------------------------------------------===//
// Kernel states
//===----------------------------------------------------------------------===//

void hpcrt_ctx::endSetup() {
  settingUp_ = false;
  if (scratchpadWanted_ > scratchpad_.size())
    scratchpad_ = backend_.allocate(scratchpadWanted_);
}

KernelState *hpcrt_ctx::kernelState(int op) const {
  if (op < 0 || static_cast<size_t>(op) >= kernelStates_.size())
    return nullptr;
  return kernelStates_[op].get();
}

void hpcrt_ctx::setKernelState(int op, std::unique_ptr<KernelState> state) {
  if (op < 0)
    fail("kernel state for op " + std::to_string(op));
  if (static_cast<size_t>(op) >= kernelStates_.size())
    kernelStates_.resize(static_cast<size_t>(op) + 1);
  kernelStates_[op] = std::move(state);
}

void hpcrt_ctx::requireScratchpad(size_t bytes) {
  scratchpadWanted_ = std::max(scratchpadWanted_, bytes);
}

void *hpcrt_ctx::scratchpad(size_t bytes) {
  requireScratchpad(bytes);
  if (bytes > scratchpad_.size())
    scratchpad_ = backend_.allocate(scratchpadWanted_);
  return scratchpad_.data();
}

uint64_t hpcrt_ctx::kernelStateBytes() const {
  uint64_t n = 0;
  for (const auto &s : kernelStates_)
    if (s)
      n += s->heldBytes;
  return n;
}

size_t hpcrt_ctx::kernelStateCount() const {
  size_t n = 0;
  for (const auto &s : kernelStates_)
    n += s != nullptr;
  return n;
}

int hpcrt_in_setup_run(const hpcrt_ctx *ctx) { return ctx && ctx->settingUp() ? 1 : 0; }

void *hpcrt_tensor_data(hpcrt_ctx *ctx, int32_t id) {
  if (!ctx || !ctx->prepared() || id < 0 || static_cast<size_t>(id) >= ctx->numTensors())
    return nullptr;
  return ctx->tensor(id).data;
}

//===----------------------------------------------------------------------===//
// Bookkeeping
//===----------------------------------------------------------------------===//

void hpcrt_ctx::noteWrite(const Tensor &t) {
  if (t.region == Region::Arena)
    highWater_ = std::max<uint64_t>(highWater_, static_cast<uint64_t>(t.offset) + t.bytes);
}

double hpcrt_ctx::nowUs() const {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count() -
         epochUs_;
}

void hpcrt_ctx::addTrace(int op, double startUs, double durationUs, int32_t tid) {
  std::lock_guard<std::mutex> lock(traceMu_);
  if (trace_.size() < 4000000)
    trace_.push_back({op, run_, startUs, durationUs, 0, tid});
}


std::vector<OpInfo> hpcrt_ctx::manifestOps(const char *manifestJson) {
  try {
    return opsOf(json::parse(manifestJson));
  } catch (const json::exception &e) {
    fail(std::string("manifest: ") + e.what());
  }
}

void hpcrt_ctx::writeTrace(const std::string &path) const { writeTrace(path, trace_); }

void hpcrt_ctx::writeTrace(const std::string &path, const std::vector<TraceEvent> &events,
                           const std::vector<std::vector<OpInfo>> &stageOps,
                           int32_t ranksPerStage) const {
  std::ofstream f(path, std::ios::binary);
  if (!f)
    fail(path + ": cannot write trace file");
  f << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  // Thread names, where a rank has a communication thread's events.
  std::set<int32_t> commRanks;
  for (const TraceEvent &e : events)
    if (e.tid == TraceEvent::kTraceComm)
      commRanks.insert(e.rank);
  for (int32_t rank : commRanks)
    for (int32_t tid : {TraceEvent::kTraceKernels, TraceEvent::kTraceComm}) {
      json meta = {{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", tid},
                   {"args", {{"name", tid == TraceEvent::kTraceComm ? "communication" : "kernels"}}}};
      f << (first ? "" : ",\n") << meta.dump();
      first = false;
    }
  for (const TraceEvent &e : events) {
    json ev;
    // A pipeline binary's ranks run their stage's program.
    const std::vector<OpInfo> &opTable =
        stageOps.empty() ? ops_
                         : stageOps[std::min<size_t>(e.rank / std::max(ranksPerStage, 1),
                                                     stageOps.size() - 1)];
    bool known = e.op >= 0 && static_cast<size_t>(e.op) < opTable.size();
    ev["name"] = known ? opTable[e.op].name : "op " + std::to_string(e.op);
    ev["ph"] = "X";
    ev["ts"] = e.startUs;
    ev["dur"] = e.durationUs;
    ev["pid"] = e.rank;
    ev["tid"] = e.tid;
    ev["args"] = {{"loc", known ? opTable[e.op].loc : std::string()},
                  {"op", e.op},
                  {"run", e.run}};
    if (known && !opTable[e.op].block.empty())
      ev["args"]["block"] = opTable[e.op].block;
    if (known && opTable[e.op].recv)
      ev["args"]["recv"] = 1;
    f << (first ? "" : ",\n") << ev.dump(-1, ' ', false, json::error_handler_t::replace);
    first = false;
  }
  f << "\n]}\n";
  // A small trace reaches the file only when it is closed: check that too.
  errno = 0;
  f.close();
  if (!f)
    fail(path + ": write error" + (errno ? std::string(": ") + strerror(errno) : std::string()));
}
