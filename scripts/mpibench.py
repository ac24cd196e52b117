"""What the multi-rank benchmark scripts share: where hpc-opt is, the
launcher, running a command (exit with its output when it fails), the
ms/run a compiled program reports, and a GPT train-step model with token
data."""
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


def gpt_with_tokens(d, a):
    """Writes d/gpt.onnx (scripts/gen_gpt.py of a.layers, a.embd, a.heads,
    a.vocab, a.seq) and a.batch * a.steps random token rows as
    d/input_ids.npy and d/labels.npy (shifted by one); returns the model
    path and gen_gpt's summary line."""
    import numpy as np
    model = f"{d}/gpt.onnx"
    out = run([sys.executable, os.path.join(ROOT, "scripts", "gen_gpt.py"), "--layers",
               str(a.layers), "--embd", str(a.embd), "--heads", str(a.heads), "--vocab",
               str(a.vocab), "--max-pos", str(a.seq), "-o", model])
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, a.vocab, size=(a.batch * a.steps, a.seq + 1))
    np.save(f"{d}/input_ids.npy", tokens[:, :-1].astype(np.int64))
    np.save(f"{d}/labels.npy", tokens[:, 1:].astype(np.int64))
    return model, out.strip()
