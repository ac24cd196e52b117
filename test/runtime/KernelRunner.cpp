//===- KernelRunner.cpp - run kernels described in a JSON file -------------===//
//
// Test driver of onnx_node_conformance.py: reads a list of cases
//
//   [{"kernel": "conv", "inputs": ["a.pb", null, ...],
//     "outputs": [{"dtype": 1, "shape": [1, 2], "file": "o0.npy"}, ...],
//     "iattrs": [...], "fattrs": [...], "sattrs": [...]}, ...]
//
// and, for each, builds a context (all tensors in the arena), loads the
// inputs (.npy or .pb), calls hpcrt_<kernel> through the C ABI and writes the
// outputs as .npy. Prints one JSON list of error strings ("" = ran).
//
//===----------------------------------------------------------------------===//

#include "cpu/Kernel.h"
#include "io/TensorIO.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

using json = nlohmann::json;
using namespace hpcrt;

using KFn = void (*)(hpcrt_ctx *, int32_t, const int32_t *, const int64_t *, const double *,
                     const char *const *);

static std::string runCase(const json &c, const std::map<std::string, KFn> &kernels) {
  try {
    auto it = kernels.find(c.at("kernel").get<std::string>());
    if (it == kernels.end())
      return "no kernel " + c.at("kernel").get<std::string>();
    std::vector<HostTensor> ins;
    std::vector<bool> present;
    for (const json &p : c.at("inputs")) {
      present.push_back(!p.is_null());
      ins.push_back(p.is_null() ? HostTensor{} : readTensorFile(p.get<std::string>()));
    }
    json tensors = json::array();
    int64_t off = 0;
    auto add = [&](int dtype, const std::vector<int64_t> &shape) {
      int64_t bytes = numElements(shape) * static_cast<int64_t>(dtypeSize(dtype));
      tensors.push_back({{"dtype", dtype}, {"shape", shape}, {"region", "arena"}, {"offset", off}});
      off += (bytes + 63) / 64 * 64;
      return static_cast<int32_t>(tensors.size() - 1);
    };
    const json &outs = c.at("outputs");
    std::vector<int32_t> ids{static_cast<int32_t>(outs.size())};
    for (const json &o : outs)
      ids.push_back(add(o.at("dtype").get<int>(), o.at("shape").get<std::vector<int64_t>>()));
    ids.push_back(static_cast<int32_t>(ins.size()));
    for (size_t k = 0; k < ins.size(); ++k) {
      std::vector<int64_t> shape = ins[k].shape;
      if (present[k] && c.contains("shapes") && !c["shapes"][k].is_null())
        shape = c["shapes"][k].get<std::vector<int64_t>>(); // a reinterpreting reshape
      ids.push_back(present[k] ? add(ins[k].dtype, shape) : -1);
    }
    json m = {{"version", 1}, {"arena_bytes", off}, {"inputs", json::array()},
              {"outputs", json::array()}, {"tensors", tensors}};
    Context ctx(m.dump());
    ctx.prepare();
    for (size_t k = 0; k < ins.size(); ++k)
      if (present[k]) {
        Tensor &t = ctx.tensor(ids[2 + outs.size() + k]);
        if (t.bytes != ins[k].data.size())
          return "input " + std::to_string(k) + " size mismatch";
        memcpy(t.data, ins[k].data.data(), t.bytes);
      }
    std::vector<int64_t> ia = c.value("iattrs", std::vector<int64_t>{});
    std::vector<double> fa = c.value("fattrs", std::vector<double>{});
    std::vector<std::string> sa = c.value("sattrs", std::vector<std::string>{});
    std::vector<const char *> sp;
    for (const std::string &s : sa)
      sp.push_back(s.c_str());
    ia.push_back(0);
    fa.push_back(0);
    sp.push_back(nullptr);
    it->second(&ctx, 0, ids.data(), ia.data(), fa.data(), sp.data());
    if (ctx.failed())
      return ctx.error();
    for (size_t j = 0; j < outs.size(); ++j) {
      const Tensor &t = ctx.tensor(ids[1 + j]);
      writeNpy(outs[j].at("file").get<std::string>(), t.dtype, t.shape, t.data);
    }
    return "";
  } catch (const std::exception &e) {
    return std::string("exception: ") + e.what();
  }
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: hpcrt-kernel-runner CASES.json\n");
    return 2;
  }
  // Every op's entry point by its mnemonic (Ops.def; the dist ops need a
  // communicator and are not among the cases).
  std::map<std::string, KFn> kernels;
#define HPCRT_OP(Id, cname, mnemonic) kernels[mnemonic] = cname;
#include "core/Ops.def"
  std::ifstream f(argv[1]);
  json cases = json::parse(f);
  json results = json::array();
  for (const json &c : cases)
    results.push_back(runCase(c, kernels));
  std::cout << results.dump() << "\n";
  return 0;
}
