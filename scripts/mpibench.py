"""What the multi-rank benchmark scripts share: where hpc-opt is, the
launcher, running a command (exit with its output when it fails), the
ms/run a compiled program reports, a GPT train-step model with token
data, and AdamW train steps of it compiled and trained in variants."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HPC_OPT = os.path.join(ROOT, "build", "bin", "hpc-opt")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd):
    """stdout + stderr of `cmd`; exits with them when it fails."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def ms_per_run(output):
    """The mean time per run a program printed with `run --iters N`."""
    return float(re.search(r"time: ([\d.]+) ms/run", output).group(1))


def add_gpt_args(ap, layers, embd, heads, vocab, seq, batch, steps):
    """The options of gpt_with_tokens's model and data, with these defaults."""
    ap.add_argument("--layers", type=int, default=layers)
    ap.add_argument("--embd", type=int, default=embd)
    ap.add_argument("--heads", type=int, default=heads)
    ap.add_argument("--vocab", type=int, default=vocab)
    ap.add_argument("--seq", type=int, default=seq)
    ap.add_argument("--batch", type=int, default=batch)
    ap.add_argument("--steps", type=int, default=steps)


def gpt_with_tokens(d, a, data_seed=0):
    """Writes d/gpt.onnx (scripts/gen_gpt.py of a.layers, a.embd, a.heads,
    a.vocab, a.seq, and a.experts, a.top_k where a has them) and a.batch * a.steps random token rows
    (drawn with data_seed) as d/input_ids.npy and d/labels.npy (shifted by
    one); returns the model path and gen_gpt's summary line."""
    import numpy as np
    model = f"{d}/gpt.onnx"
    experts = ["--experts", str(a.experts), "--top-k", str(a.top_k)] \
        if getattr(a, "experts", 0) else []
    out = run([sys.executable, os.path.join(ROOT, "scripts", "gen_gpt.py"), "--layers",
               str(a.layers), "--embd", str(a.embd), "--heads", str(a.heads), "--vocab",
               str(a.vocab), "--max-pos", str(a.seq), *experts, "-o", model])
    rng = np.random.default_rng(data_seed)
    tokens = rng.integers(0, a.vocab, size=(a.batch * a.steps, a.seq + 1))
    np.save(f"{d}/input_ids.npy", tokens[:, :-1].astype(np.int64))
    np.save(f"{d}/labels.npy", tokens[:, 1:].astype(np.int64))
    return model, out.strip()


def mesh_ranks(mesh):
    """The ranks of a --mesh spec ("dp=2,tp=2": 4; "": 1)."""
    n = 1
    for axis in filter(None, mesh.split(",")):
        n *= int(axis.split("=")[1].split(":")[0])
    return n


def train_variants(d, a, model, variants, mesh="", hpc_opt=HPC_OPT):
    """Compiles gpt_with_tokens's model as an AdamW train step of a.batch x
    a.seq tokens once per variant (name -> extra hpc-opt flags), over `mesh`
    under mpirun where given, and trains each a.steps steps on its data;
    returns name -> the metrics file."""
    metrics = {}
    for name, flags in variants.items():
        out = f"{d}/{name}.bin"
        run([hpc_opt, model, f"--input-shape=input_ids={a.batch},{a.seq}", "--train",
             "--loss=cross-entropy:logits,labels", "--optimizer=adamw",
             *([f"--mesh={mesh}"] if mesh else []), *flags, "-o", out])
        metrics[name] = f"{d}/{name}.jsonl"
        launch = MPIRUN + ["-n", str(mesh_ranks(mesh))] if mesh else []
        run(launch + [out, "train", "--data", f"input_ids={d}/input_ids.npy", "--data",
                      f"labels={d}/labels.npy", "--steps", str(a.steps), "--metrics",
                      metrics[name]])
    return metrics


def train_summary(path):
    """A train --metrics file's summary record, its losses by step, and the
    mean step time in ms of the steps after the first (the first pays for
    start-up)."""
    import json
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    steps = [r for r in rows if "loss" in r and "step" in r]
    later = [r["step_ms"] for r in steps[1:]] or [r["step_ms"] for r in steps]
    return (next(r for r in rows if r.get("summary")), {r["step"]: r["loss"] for r in steps},
            sum(later) / len(later))
