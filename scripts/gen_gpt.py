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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--max-pos", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action="store_true", help="run onnx.checker (full_check)")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    model, params = build(args.layers, args.embd, args.heads, args.vocab, args.max_pos,
                          args.seed)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    onnx.save(model, args.output)
    if args.check:
        onnx.checker.check_model(args.output, full_check=True)
    n_params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"gen_gpt: {args.output}: {args.layers} layers, embd {args.embd}, {args.heads} heads, "
          f"vocab {args.vocab}, max-pos {args.max_pos}, {len(model.graph.node)} nodes, "
          f"{n_params} params, {os.path.getsize(args.output)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
