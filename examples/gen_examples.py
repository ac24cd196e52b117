#!/usr/bin/env python3
# Generates the three bundled example models next to this file, with random
# weights from a fixed seed (the output is byte-for-byte reproducible):
#   gpt2.onnx  - GPT-2-style decoder, opset 20 (native Gelu), symbolic batch/seq
#   mlp.onnx   - 784-256-128-10 MLP with Gemm/Relu/Softmax, opset 17
#   cnn.onnx   - small CNN (Conv/BN/pools/grouped conv/Gemm), opset 17
# Needs only numpy and onnx. Rerun with:
#   .venv/bin/python examples/gen_examples.py          (from the repo root)
# Each model is checked with onnx.checker (full_check) and evaluated once with
# onnx's pure-Python reference evaluator; GPT-2 and the MLP are also compared
# with an independent numpy forward pass. Pass --no-eval to skip numerics.
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


class GraphBuilder:
    """Small helper that collects nodes/initializers and hands out unique names."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.inits = []
        self.counter = {}

    def uniq(self, base):
        n = self.counter.get(base, 0)
        self.counter[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def init(self, name, array):
        name = self.uniq(name)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name, shape, scale=0.02):
        return self.init(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def const_i64(self, name, values):
        return self.init(name, np.asarray(values, dtype=np.int64))

    def op(self, op_type, inputs, name=None, n_out=1, **attrs):
        base = self.uniq(name or op_type.lower())
        outs = [base] if n_out == 1 else [f"{base}_out{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=base, **attrs))
        return outs[0] if n_out == 1 else outs


# --------------------------------------------------------------------------
# GPT-2
# --------------------------------------------------------------------------
GPT2_CFG = dict(vocab=512, n_embd=64, heads=4, max_pos=128, layers=2, eps=1e-5)


def build_gpt2(rng):
    c = GPT2_CFG
    E, H, V, P = c["n_embd"], c["heads"], c["vocab"], c["max_pos"]
    D = E // H
    g = GraphBuilder(rng)
    params = {}

    def w(name, shape, scale=0.02):
        n = g.weight(name, shape, scale)
        params[n] = numpy_helper.to_array(g.inits[-1])
        return n

    def ones(name, size):
        n = g.init(name, np.ones(size, np.float32))
        params[n] = np.ones(size, np.float32)
        return n

    def zeros(name, size):
        n = g.init(name, np.zeros(size, np.float32))
        params[n] = np.zeros(size, np.float32)
        return n

    wte = w("wte", (V, E))
    wpe = w("wpe", (P, E), 0.01)

    # Shape subgraph: batch and seq as scalars, plus 1-D versions for Concat.
    shape = g.op("Shape", ["input_ids"], "ids_shape")
    batch = g.op("Gather", [shape, g.const_i64("idx0", 0)], "batch", axis=0)
    seq = g.op("Gather", [shape, g.const_i64("idx1", 1)], "seq", axis=0)
    axes0 = g.const_i64("axes0", [0])
    batch_1d = g.op("Unsqueeze", [batch, axes0], "batch_1d")
    seq_1d = g.op("Unsqueeze", [seq, axes0], "seq_1d")

    tok = g.op("Gather", [wte, "input_ids"], "tok_emb", axis=0)
    positions = g.op("Range", [g.const_i64("zero", 0), seq, g.const_i64("one", 1)], "positions")
    pos = g.op("Gather", [wpe, positions], "pos_emb", axis=0)
    h = g.op("Add", [tok, pos], "embed")

    # Causal mask: [P, P] bool constant, sliced to [seq, seq].
    mask_full = g.init("causal_mask", np.tril(np.ones((P, P), dtype=bool)))
    mask_ends = g.op("Concat", [seq_1d, seq_1d], "mask_ends", axis=0)
    mask = g.op("Slice", [mask_full, g.const_i64("mask_starts", [0, 0]), mask_ends,
                          g.const_i64("mask_axes", [0, 1])], "mask")
    neg = g.init("neg_big", np.array(-1e9, dtype=np.float32))
    scale = g.init("attn_scale", np.array(1.0 / np.sqrt(D), dtype=np.float32))
    heads_c = g.const_i64("n_heads", [H])
    hdim_c = g.const_i64("head_dim", [D])
    embd_c = g.const_i64("n_embd", [E])
    split_sizes = g.const_i64("qkv_split", [E, E, E])

    for i in range(c["layers"]):
        p = f"h{i}."
        ln1 = g.op("LayerNormalization", [h, ones(p + "ln_1.g", E), zeros(p + "ln_1.b", E)],
                   p + "ln_1", axis=-1, epsilon=c["eps"])
        qkv = g.op("MatMul", [ln1, w(p + "attn.c_attn.w", (E, 3 * E))], p + "qkv_mm")
        qkv = g.op("Add", [qkv, w(p + "attn.c_attn.b", (3 * E,))], p + "qkv")
        q, k, v = g.op("Split", [qkv, split_sizes], p + "split", n_out=3, axis=-1)
        hs = g.op("Concat", [batch_1d, seq_1d, heads_c, hdim_c], p + "heads_shape", axis=0)
        q = g.op("Transpose", [g.op("Reshape", [q, hs], p + "q_r")], p + "q_t", perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [k, hs], p + "k_r")], p + "k_t", perm=[0, 2, 3, 1])
        v = g.op("Transpose", [g.op("Reshape", [v, hs], p + "v_r")], p + "v_t", perm=[0, 2, 1, 3])
        s = g.op("MatMul", [q, k], p + "scores")
        s = g.op("Mul", [s, scale], p + "scores_scaled")
        s = g.op("Where", [mask, s, neg], p + "scores_masked")
        a = g.op("Softmax", [s], p + "probs", axis=-1)
        o = g.op("MatMul", [a, v], p + "attn_out")
        o = g.op("Transpose", [o], p + "attn_out_t", perm=[0, 2, 1, 3])
        ms = g.op("Concat", [batch_1d, seq_1d, embd_c], p + "merge_shape", axis=0)
        o = g.op("Reshape", [o, ms], p + "attn_merged")
        o = g.op("MatMul", [o, w(p + "attn.c_proj.w", (E, E))], p + "proj_mm")
        o = g.op("Add", [o, w(p + "attn.c_proj.b", (E,))], p + "proj")
        h = g.op("Add", [h, o], p + "resid1")

        ln2 = g.op("LayerNormalization", [h, ones(p + "ln_2.g", E), zeros(p + "ln_2.b", E)],
                   p + "ln_2", axis=-1, epsilon=c["eps"])
        m = g.op("MatMul", [ln2, w(p + "mlp.c_fc.w", (E, 4 * E))], p + "fc_mm")
        m = g.op("Add", [m, w(p + "mlp.c_fc.b", (4 * E,))], p + "fc")
        m = g.op("Gelu", [m], p + "gelu", approximate="tanh")
        m = g.op("MatMul", [m, w(p + "mlp.c_proj.w", (4 * E, E))], p + "fc2_mm")
        m = g.op("Add", [m, w(p + "mlp.c_proj.b", (E,))], p + "fc2")
        h = g.op("Add", [h, m], p + "resid2")

    h = g.op("LayerNormalization", [h, ones("ln_f.g", E), zeros("ln_f.b", E)], "ln_f",
             axis=-1, epsilon=c["eps"])
    wte_t = g.op("Transpose", [wte], "wte_t", perm=[1, 0])
    g.nodes.append(helper.make_node("MatMul", [h, wte_t], ["logits"], name="lm_head"))

    graph = helper.make_graph(
        g.nodes, "gpt2_tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", V])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)],
                              producer_name="hpc-opt-gen-examples", ir_version=9)
    return model, params


def gpt2_numpy(params, ids):
    c = GPT2_CFG
    E, H = c["n_embd"], c["heads"]
    D = E // H

    def ln(x, gname, bname):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + c["eps"]) * params[gname] + params[bname]

    def gelu_tanh(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    B, S = ids.shape
    x = params["wte"][ids] + params["wpe"][np.arange(S)]
    causal = np.tril(np.ones((S, S), dtype=bool))
    for i in range(c["layers"]):
        p = f"h{i}."
        a = ln(x, p + "ln_1.g", p + "ln_1.b") @ params[p + "attn.c_attn.w"] + params[p + "attn.c_attn.b"]
        q, k, v = (t.reshape(B, S, H, D).transpose(0, 2, 1, 3) for t in np.split(a, 3, axis=-1))
        s = np.where(causal, q @ k.transpose(0, 1, 3, 2) / np.sqrt(D), -1e9)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = (s @ v).transpose(0, 2, 1, 3).reshape(B, S, E)
        x = x + o @ params[p + "attn.c_proj.w"] + params[p + "attn.c_proj.b"]
        m = ln(x, p + "ln_2.g", p + "ln_2.b") @ params[p + "mlp.c_fc.w"] + params[p + "mlp.c_fc.b"]
        x = x + gelu_tanh(m) @ params[p + "mlp.c_proj.w"] + params[p + "mlp.c_proj.b"]
    return ln(x, "ln_f.g", "ln_f.b") @ params["wte"].T


# --------------------------------------------------------------------------
# MLP
# --------------------------------------------------------------------------
def build_mlp(rng):
    g = GraphBuilder(rng)
    params = {}
    x = "x"
    dims = [784, 256, 128, 10]
    for i in range(3):
        fin, fout = dims[i], dims[i + 1]
        wn = g.weight(f"fc{i}.weight", (fout, fin), 1.0 / np.sqrt(fin))  # [out, in], transB=1
        params[wn] = numpy_helper.to_array(g.inits[-1])
        bn = g.weight(f"fc{i}.bias", (fout,), 0.1)
        params[bn] = numpy_helper.to_array(g.inits[-1])
        x = g.op("Gemm", [x, wn, bn], f"fc{i}", transB=1)
        if i < 2:
            x = g.op("Relu", [x], f"relu{i}")
    g.nodes.append(helper.make_node("Softmax", [x], ["probs"], name="softmax", axis=-1))
    graph = helper.make_graph(
        g.nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="hpc-opt-gen-examples", ir_version=8)
    return model, params


def mlp_numpy(params, x):
    for i in range(3):
        x = x @ params[f"fc{i}.weight"].T + params[f"fc{i}.bias"]
        if i < 2:
            x = np.maximum(x, 0)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# --------------------------------------------------------------------------
# CNN
# --------------------------------------------------------------------------
def build_cnn(rng):
    g = GraphBuilder(rng)

    def conv_w(name, cout, cin_per_group, k):
        return g.weight(name, (cout, cin_per_group, k, k), np.sqrt(2.0 / (cin_per_group * k * k)))

    x = g.op("Conv", ["image", conv_w("conv1.w", 16, 3, 3), g.weight("conv1.b", (16,), 0.1)],
             "conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    x = g.op("BatchNormalization",
             [x, g.init("bn1.scale", (1 + 0.1 * rng.standard_normal(16)).astype(np.float32)),
              g.init("bn1.bias", (0.1 * rng.standard_normal(16)).astype(np.float32)),
              g.init("bn1.mean", (0.1 * rng.standard_normal(16)).astype(np.float32)),
              g.init("bn1.var", (1 + 0.1 * rng.random(16)).astype(np.float32))],
             "bn1", epsilon=1e-5)
    x = g.op("Relu", [x], "relu1")
    x = g.op("MaxPool", [x], "pool1", kernel_shape=[2, 2], strides=[2, 2])          # 16x16
    x = g.op("Conv", [x, conv_w("conv2.w", 32, 8, 3), g.weight("conv2.b", (32,), 0.1)],
             "conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1], group=2)
    x = g.op("Relu", [x], "relu2")
    x = g.op("AveragePool", [x], "pool2", kernel_shape=[2, 2], strides=[2, 2])      # 8x8
    x = g.op("Conv", [x, conv_w("conv3.w", 64, 32, 1), g.weight("conv3.b", (64,), 0.1)],
             "conv3", kernel_shape=[1, 1])
    x = g.op("GlobalAveragePool", [x], "gap")
    x = g.op("Flatten", [x], "flatten", axis=1)
    g.nodes.append(helper.make_node(
        "Gemm", [x, g.weight("fc.w", (10, 64), 0.125), g.weight("fc.b", (10,), 0.1)],
        ["logits"], name="fc", transB=1))
    graph = helper.make_graph(
        g.nodes, "cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="hpc-opt-gen-examples", ir_version=8)
    return model, None


# --------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser(description="generate the bundled example ONNX models")
    ap.add_argument("--out-dir", default=HERE, help="where to write (default: next to this script)")
    ap.add_argument("--no-eval", action="store_true", help="skip the reference-evaluator run")
    args = ap.parse_args()

    ok = True
    for name, builder in (("gpt2", build_gpt2), ("mlp", build_mlp), ("cnn", build_cnn)):
        rng = np.random.default_rng({"gpt2": 0, "mlp": 1, "cnn": 2}[name])
        model, params = builder(rng)
        path = os.path.join(args.out_dir, f"{name}.onnx")
        onnx.save(model, path)
        onnx.checker.check_model(path, full_check=True)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        n_params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
        ops = sorted({n.op_type for n in model.graph.node})
        line = (f"{name}: {os.path.basename(path)} {os.path.getsize(path)} bytes, opset "
                f"{model.opset_import[0].version}, {len(model.graph.node)} nodes, "
                f"{n_params} params, {len(inferred.graph.value_info)} inferred value_infos, "
                f"ops={','.join(ops)}")
        if not args.no_eval:
            from onnx.reference import ReferenceEvaluator
            drng = np.random.default_rng(123)
            if name == "gpt2":
                feed = {"input_ids": drng.integers(0, GPT2_CFG["vocab"], (2, 16), dtype=np.int64)}
                ref = gpt2_numpy(params, feed["input_ids"])
            elif name == "mlp":
                feed = {"x": drng.standard_normal((3, 784)).astype(np.float32)}
                ref = mlp_numpy(params, feed["x"])
            else:
                feed = {"image": drng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
                ref = None
            out = ReferenceEvaluator(model).run(None, feed)[0]
            line += f"; eval out {list(out.shape)}"
            if ref is not None:
                diff = float(np.abs(out - ref).max())
                line += f", max|onnx-numpy|={diff:.2e}"
                if diff > 1e-4:
                    ok = False
                    line += " MISMATCH"
        print(line)
    # The sample input the README's main job runs the compiled GPT on.
    sample = np.random.default_rng(7).integers(0, GPT2_CFG["vocab"], (1, 16), dtype=np.int64)
    np.save(os.path.join(args.out_dir, "gpt2-input_ids.npy"), sample)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
