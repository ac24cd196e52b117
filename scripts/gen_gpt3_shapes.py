#!/usr/bin/env python3
# Writes a GPT-3-175B-shaped decoder as an ONNX graph (opset 17) for
# planning-only imports: every weight (and the causal mask) is an initializer
# with data_location=EXTERNAL pointing into "<basename>.weights", a file that
# is never written. Only tiny shape/scalar constants are stored inline, so the
# .onnx is a few MB and is produced in seconds. Needs only onnx + numpy and
# works with onnx 1.12 (Debian's python3) as well as current onnx.
# Rerun (defaults are GPT-3 175B: 96 layers, hidden 12288, 96 heads, seq 2048):
#   python3 scripts/gen_gpt3_shapes.py -o /tmp/gpt3.onnx
# Small variant used by the tests:
#   python3 scripts/gen_gpt3_shapes.py --layers 2 --hidden 256 --heads 4 \
#       --seq 64 --vocab 1000 -o /tmp/gpt3_small.onnx
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ALIGN = 64  # byte alignment of each tensor inside the (absent) weights file

DTYPE_SIZE = {TensorProto.FLOAT: 4, TensorProto.BOOL: 1, TensorProto.FLOAT16: 2}


class Builder:
    def __init__(self, weights_location):
        self.location = weights_location
        self.offset = 0
        self.nodes = []
        self.inits = []
        self.n_params = 0       # float weight elements
        self.n_ext_bytes = 0

    def external(self, name, dims, dtype=TensorProto.FLOAT, count=True):
        """Declare an initializer whose data lives in the external weights file."""
        t = TensorProto()
        t.name = name
        t.data_type = dtype
        t.dims.extend(int(d) for d in dims)
        t.data_location = TensorProto.EXTERNAL
        numel = 1
        for d in dims:
            numel *= int(d)
        length = numel * DTYPE_SIZE[dtype]
        for key, value in (("location", self.location), ("offset", str(self.offset)),
                           ("length", str(length))):
            entry = t.external_data.add()
            entry.key = key
            entry.value = value
        self.offset += (length + ALIGN - 1) // ALIGN * ALIGN
        self.n_ext_bytes += length
        if count:
            self.n_params += numel
        self.inits.append(t)
        return name

    def inline(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, output, **attrs):
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attrs))
        return output


def build(layers, hidden, heads, seq, vocab, mlp_ratio, gelu, weights_location):
    if hidden % heads:
        raise SystemExit("--hidden must be divisible by --heads")
    E, H, S, V = hidden, heads, seq, vocab
    D = E // H
    F = mlp_ratio * E
    b = Builder(weights_location)

    wte = b.external("wte", [V, E])
    wpe = b.external("wpe", [S, E])
    mask = b.external("causal_mask", [S, S], TensorProto.BOOL, count=False)
    b.inline("position_ids", np.arange(S, dtype=np.int64))
    b.inline("heads_shape", np.array([1, S, H, D], dtype=np.int64))
    b.inline("merge_shape", np.array([1, S, E], dtype=np.int64))
    b.inline("attn_scale", np.array(1.0 / math.sqrt(D), dtype=np.float32))
    b.inline("neg_big", np.array(-1e9, dtype=np.float32))
    b.inline("half", np.array(0.5, dtype=np.float32))
    b.inline("one", np.array(1.0, dtype=np.float32))
    if gelu == "erf":
        b.inline("inv_sqrt2", np.array(1.0 / math.sqrt(2.0), dtype=np.float32))
    else:
        b.inline("gelu_c", np.array(math.sqrt(2.0 / math.pi), dtype=np.float32))
        b.inline("gelu_k", np.array(0.044715, dtype=np.float32))

    tok = b.op("Gather", [wte, "input_ids"], "tok_emb", axis=0)
    pos = b.op("Gather", [wpe, "position_ids"], "pos_emb", axis=0)
    x = b.op("Add", [tok, pos], "embed")

    def linear(inp, prefix, fin, fout):
        w = b.external(prefix + ".weight", [fin, fout])
        bias = b.external(prefix + ".bias", [fout])
        return b.op("Add", [b.op("MatMul", [inp, w], prefix + ".mm"), bias], prefix + ".out")

    def layer_norm(inp, prefix):
        g = b.external(prefix + ".weight", [E])
        beta = b.external(prefix + ".bias", [E])
        return b.op("LayerNormalization", [inp, g, beta], prefix + ".out", axis=-1, epsilon=1e-5)

    def gelu_op(inp, p):
        if gelu == "erf":  # 0.5 * x * (1 + erf(x / sqrt(2)))
            t = b.op("Mul", [inp, "inv_sqrt2"], p + ".scaled")
            t = b.op("Erf", [t], p + ".erf")
        else:              # 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
            x3 = b.op("Mul", [b.op("Mul", [inp, inp], p + ".x2"), inp], p + ".x3")
            t = b.op("Add", [inp, b.op("Mul", [x3, "gelu_k"], p + ".kx3")], p + ".inner")
            t = b.op("Tanh", [b.op("Mul", [t, "gelu_c"], p + ".cinner")], p + ".tanh")
        t = b.op("Add", [t, "one"], p + ".onep")
        t = b.op("Mul", [inp, t], p + ".xt")
        return b.op("Mul", [t, "half"], p + ".out")

    for i in range(layers):
        p = "h.%d" % i
        a = layer_norm(x, p + ".ln_1")
        q = linear(a, p + ".attn.q", E, E)
        k = linear(a, p + ".attn.k", E, E)
        v = linear(a, p + ".attn.v", E, E)
        q = b.op("Transpose", [b.op("Reshape", [q, "heads_shape"], p + ".q_r")], p + ".q_t",
                 perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [k, "heads_shape"], p + ".k_r")], p + ".k_t",
                 perm=[0, 2, 3, 1])
        v = b.op("Transpose", [b.op("Reshape", [v, "heads_shape"], p + ".v_r")], p + ".v_t",
                 perm=[0, 2, 1, 3])
        s = b.op("MatMul", [q, k], p + ".scores")
        s = b.op("Mul", [s, "attn_scale"], p + ".scaled")
        s = b.op("Where", [mask, s, "neg_big"], p + ".masked")
        s = b.op("Softmax", [s], p + ".probs", axis=-1)
        o = b.op("MatMul", [s, v], p + ".ctx")
        o = b.op("Transpose", [o], p + ".ctx_t", perm=[0, 2, 1, 3])
        o = b.op("Reshape", [o, "merge_shape"], p + ".ctx_merged")
        o = linear(o, p + ".attn.proj", E, E)
        x = b.op("Add", [x, o], p + ".resid1")
        m = layer_norm(x, p + ".ln_2")
        m = linear(m, p + ".mlp.fc", E, F)
        m = gelu_op(m, p + ".mlp.gelu")
        m = linear(m, p + ".mlp.proj", F, E)
        x = b.op("Add", [x, m], p + ".resid2")

    x = layer_norm(x, "ln_f")
    lm_head = b.external("lm_head.weight", [E, V])  # untied, [hidden, vocab]
    b.nodes.append(helper.make_node("MatMul", [x, lm_head], ["logits"], name="lm_head"))

    graph = helper.make_graph(
        b.nodes, "gpt3_shapes",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, S])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, S, V])],
        b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="hpc-opt-gen-gpt3-shapes")
    model.ir_version = 8
    return model, b


def main():
    ap = argparse.ArgumentParser(description="GPT-3-shaped ONNX graph with absent external weights")
    ap.add_argument("--layers", type=int, default=96)
    ap.add_argument("--hidden", type=int, default=12288)
    ap.add_argument("--heads", type=int, default=96)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--mlp-ratio", type=int, default=4)
    ap.add_argument("--gelu", choices=("erf", "tanh"), default="tanh",
                    help="GELU decomposition (opset 17 has no Gelu op); default tanh as in GPT-2/3")
    ap.add_argument("--check", action="store_true",
                    help="also run onnx.checker and strict shape inference (slower)")
    ap.add_argument("-o", "--output", required=True, help="output .onnx path")
    args = ap.parse_args()

    base = os.path.splitext(os.path.basename(args.output))[0]
    model, b = build(args.layers, args.hidden, args.heads, args.seq, args.vocab,
                     args.mlp_ratio, args.gelu, base + ".weights")
    if args.check:
        # The checker insists that the external file exists (relative to the
        # current directory for an in-memory model), but does not read it:
        # check from a temporary directory holding an empty stand-in file.
        import tempfile
        cwd = os.getcwd()
        with tempfile.TemporaryDirectory() as tmp:
            open(os.path.join(tmp, base + ".weights"), "wb").close()
            os.chdir(tmp)
            try:
                onnx.checker.check_model(model)
            finally:
                os.chdir(cwd)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(out_dir, exist_ok=True)
    with open(args.output, "wb") as f:
        f.write(model.SerializeToString())
    print("wrote %s (%d bytes): %d nodes, %d initializers, %d parameters (%.4g billion), "
          "external data %.1f GiB in %s (not written)"
          % (args.output, os.path.getsize(args.output), len(model.graph.node),
             len(model.graph.initializer), b.n_params, b.n_params / 1e9,
             b.n_ext_bytes / 2.0 ** 30, base + ".weights"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
