#!/usr/bin/env python3
"""Writes a GPT-2-style decoder of a given size with the bundled example generator.

Imports examples/gen_examples.py (not modified) and calls its build_gpt2 with
GPT2_CFG replaced by the configuration given here: the same graph as the bundled
examples/gpt2.onnx (opset 20, symbolic batch/seq, tied lm head, causal mask of
max-pos x max-pos), only wider/deeper. Random weights from --seed (default 0, the
seed gen_examples.py uses for gpt2.onnx: with the default sizes the output is
byte-for-byte examples/gpt2.onnx). Needs numpy and onnx.

    scripts/gen_gpt.py --layers 6 --embd 512 --heads 8 --vocab 1024 --max-pos 256 \\
        -o build/bench/gpt-6x512.onnx

--experts E makes every MLP a mixture of E experts (each the MLP's size), top-k
routed by a softmax router, written as exporters write it with static shapes
(scripts/export_transformers.py's Mixtral): a dense dispatch, every expert on
every token, weighted by a [tokens, experts] gate matrix that is zero for the
experts a token did not choose (its top-k weights renormalized to sum 1).
"""
import argparse
import importlib.util
import os
import sys

import numpy as np
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_generator():
    path = os.path.join(ROOT, "examples", "gen_examples.py")
    spec = importlib.util.spec_from_file_location("hpc_gen_examples", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(layers, embd, heads, vocab, max_pos, seed=0, eps=1e-5):
    """The ONNX model (and its parameter dictionary) of this configuration."""
    if embd % heads:
        raise ValueError(f"--embd {embd} is not a multiple of --heads {heads}")
    gen = load_generator()
    # build_gpt2 reads the module's GPT2_CFG when called: give it ours.
    gen.GPT2_CFG = dict(vocab=vocab, n_embd=embd, heads=heads, max_pos=max_pos,
                        layers=layers, eps=eps)
    return gen.build_gpt2(np.random.default_rng(seed))


def moe_mlps(model, experts, top_k, seed):
    """Replaces each block's MLP (fc_mm .. fc2) by a dense-dispatch mixture of
    `experts` MLPs of the same size, `top_k` of them chosen per token."""
    from onnx import TensorProto, helper, numpy_helper
    g = model.graph
    rng = np.random.default_rng(seed + 1)
    inits = {t.name: t for t in g.initializer}
    embd = numpy_helper.to_array(inits["h0.mlp.c_fc.w"]).shape[0]
    ffn = numpy_helper.to_array(inits["h0.mlp.c_fc.w"]).shape[1]
    new_inits = [numpy_helper.from_array(np.arange(experts, dtype=np.int64), "moe_expert_ids"),
                 numpy_helper.from_array(np.array([-1, embd], np.int64), "moe_tokens_shape"),
                 numpy_helper.from_array(np.array([top_k], np.int64), "moe_k"),
                 numpy_helper.from_array(np.array([0], np.int64), "moe_axis0"),
                 numpy_helper.from_array(np.array([1], np.int64), "moe_axis1"),
                 numpy_helper.from_array(np.array([2], np.int64), "moe_axis2")]
    nodes, layer = [], 0
    dropped = set()
    for node in g.node:
        if node.name.endswith(("fc_mm", ".fc", "gelu", "fc2_mm")):
            continue
        if not node.name.endswith("fc2"):
            nodes.append(node)
            continue
        p = node.name[:-len("fc2")]
        for n in ("mlp.c_fc.w", "mlp.c_fc.b", "mlp.c_proj.w", "mlp.c_proj.b"):
            dropped.add(p + n)

        def w(name, shape, scale=0.02):
            new_inits.append(numpy_helper.from_array(
                (rng.standard_normal(shape) * scale).astype(np.float32), p + name))
            return p + name

        def op(kind, inputs, name, n_out=1, **attrs):
            outs = [p + name] if n_out == 1 else [f"{p}{name}_out{i}" for i in range(n_out)]
            nodes.append(helper.make_node(kind, inputs, outs, name=p + name, **attrs))
            return outs[0] if n_out == 1 else outs

        x = op("Reshape", [p + "ln_2", "moe_tokens_shape"], "moe_tokens")
        probs = op("Softmax", [op("MatMul", [x, w("moe.router.w", (embd, experts), 1 / np.sqrt(embd))],
                                  "moe_router")], "moe_probs", axis=-1)
        vals, idx = op("TopK", [probs, "moe_k"], "moe_topk", n_out=2, axis=-1)
        gates = op("Div", [vals, op("ReduceSum", [vals, "moe_axis1"], "moe_gate_sum",
                                    keepdims=1)], "moe_gates")
        hit = op("Cast", [op("Equal", [op("Unsqueeze", [idx, "moe_axis2"], "moe_idx3"),
                                       "moe_expert_ids"], "moe_hit_b")],
                 "moe_hit", to=TensorProto.FLOAT)
        matrix = op("ReduceSum", [op("Mul", [hit, op("Unsqueeze", [gates, "moe_axis2"],
                                                     "moe_gates3")], "moe_hit_w"),
                                  "moe_axis1"], "moe_gate_matrix", keepdims=0)
        h = op("MatMul", [op("Unsqueeze", [x, "moe_axis0"], "moe_x3"),
                          w("moe.fc.w", (experts, embd, ffn))], "moe_fc_mm")
        h = op("Add", [h, w("moe.fc.b", (experts, 1, ffn))], "moe_fc")
        h = op("Gelu", [h], "moe_gelu", approximate="tanh")
        y = op("MatMul", [h, w("moe.proj.w", (experts, ffn, embd))], "moe_proj_mm")
        y = op("Add", [y, w("moe.proj.b", (experts, 1, embd))], "moe_proj")
        weights = op("Unsqueeze", [op("Transpose", [matrix], "moe_gate_matrix_t", perm=[1, 0]),
                                   "moe_axis2"], "moe_gate_weights")
        out = op("ReduceSum", [op("Mul", [y, weights], "moe_weighted"), "moe_axis0"],
                 "moe_out", keepdims=0)
        shape = op("Shape", [p + "ln_2"], "moe_out_shape")
        nodes.append(helper.make_node("Reshape", [out, shape], [node.output[0]], name=node.name))
        layer += 1
    del g.node[:]
    g.node.extend(nodes)
    kept = [t for t in g.initializer if t.name not in dropped]
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--max-pos", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--experts", type=int, default=0,
                    help="MLPs as mixtures of this many experts (0: dense MLPs)")
    ap.add_argument("--top-k", type=int, default=2, help="experts a token is routed to")
    ap.add_argument("--check", action="store_true", help="run onnx.checker (full_check)")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    model, params = build(args.layers, args.embd, args.heads, args.vocab, args.max_pos,
                          args.seed)
    if args.experts:
        if not 1 <= args.top_k <= args.experts:
            ap.error(f"--top-k {args.top_k} must be between 1 and --experts {args.experts}")
        model = moe_mlps(model, args.experts, args.top_k, args.seed)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    onnx.save(model, args.output)
    if args.check:
        onnx.checker.check_model(args.output, full_check=True)
    n_params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"gen_gpt: {args.output}: {args.layers} layers, embd {args.embd}, {args.heads} heads, "
          f"vocab {args.vocab}, max-pos {args.max_pos}, "
          + (f"{args.experts} experts top-{args.top_k}, " if args.experts else "")
          + f"{len(model.graph.node)} nodes, "
          f"{n_params} params, {os.path.getsize(args.output)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
