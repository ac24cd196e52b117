#!/usr/bin/env python3
"""Train-step time of hpc-opt programs against PyTorch eager, and inference latency.

Run with the reference venv (scripts/setup-ref-venv.sh: torch, torchvision, onnx,
onnxruntime, numpy):

    build/ref-venv/bin/python scripts/bench_train.py [--models gpt2,gpt-6x512,resnet18]
        [--threads 1,2] [--steps 20] [--warmup 3] [--rounds R] [--torch-adamw default,fused]
        [--infer | --no-infer] [--no-train] [--infer-models resnet18,gpt2-small]
        [--infer-iters 20] [--infer-rounds 5] [--torch-bf16-iters 2] [--precision fp32]
        [--quiet-load L] [--workdir build/bench]

Training (per model): the ONNX model is made under --workdir (the bundled
examples/gpt2.onnx is used as it is; the 6-layer GPT comes from scripts/gen_gpt.py;
ResNet-18 from torchvision, exported with torch.onnx.export at opset 17 in eval mode with
batch norm kept as BatchNormalization nodes in inference mode), compiled with

    hpc-opt MODEL [--input-shape ...] --train --loss=cross-entropy:logits,labels \\
        --optimizer=adamw --lr=1e-3 -o MODEL.bin

(AdamW with its defaults: betas 0.9/0.999, eps 1e-8, weight decay 0.01 on every
parameter, which is also torch.optim.AdamW's default) and trained with

    MODEL.bin train --data NAME=FILE.npy ... --steps W+N --metrics m.jsonl --threads T

The hpc-opt time is the median "step_ms" of steps W+1..W+N of the metrics file; its
summary line gives planned_bytes_per_rank and peak_bytes_per_rank. Then the same model
is trained in PyTorch eager fp32 (torch.set_num_threads(T), one interop thread) with the
same weights (read from the ONNX initializers by name), the same batches in the same
order, the same loss (mean cross-entropy over all positions) and the same optimizer:
per step zero_grad(set_to_none), forward, loss, backward, AdamW step; median of the
same N steps after W warm-up steps. "default" is torch.optim.AdamW as constructed with
no implementation flag (on CPU: the per-tensor for-loop), "fused" is fused=True
(torch's fused CPU kernel). A round is hpc-opt then each torch variant, back to back;
R rounds per model and thread count; the table shows the medians over the rounds (of
the per-round medians, and of the per-round ratios). As a check that both compute the
same thing the losses of every step are compared (step 1: same weights, same batch).

Inference (--infer; --infer-models, default resnet18,gpt2-small):

  resnet18    ResNet-18 (1000 classes, torch.onnx.export opset 17, eval mode, the
              exporter's default constant folding) at 1x3x224x224, input "image";
  gpt2-small  GPT-2 small (12 layers, embd 768, 12 heads, vocab 50257, max-pos 1024;
              scripts/gen_gpt.py, random weights of seed 0, ~500 MB, written to
              --workdir/gpt2-small-infer once and reused) on input_ids int64 [1, 128]
              (fixed seed), compiled with --input-shape input_ids=1,128.

With --precision=bf16 the train steps are compiled with it too, and PyTorch trains
under torch.autocast("cpu", dtype=torch.bfloat16) around the forward pass and the loss
(the logits cast to fp32 for the loss), fp32 weights and AdamW, as hpc-opt's bf16 does.

Each is compiled by hpc-opt without --train (with --precision=P appended when
--precision is not fp32), and `MODEL.bin run --input NAME=X.npy --output-dir D --warmup 1
--iters N --threads T` (its "time: X ms/run" line, mean of the N timed runs after one
untimed run that faults in the mapped weights and the arena, and its min) is measured against N timed session.run of onnxruntime (CPU EP, intra-op T,
inter-op 1, default graph optimizations, 10 warm-up runs), as scripts/bench_ort.sh
does. For gpt2-small a round also times N forward passes of the PyTorch replica of the
same weights (torch_gpt, eval mode, torch.no_grad, fp32; 10 warm-up passes in the
first round, 1 after) and, in the first round only, --torch-bf16-iters passes (at most
N, after one warm-up) under torch.autocast("cpu", dtype=torch.bfloat16): bf16 matmuls
are very slow on CPUs without AVX-512 BF16. R rounds, medians; the diff column is the
largest |hpc - ort| of the logits.

Every round's numbers go to stderr with the load average it started at; the tables
(markdown) go to stdout.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

TRAIN_FLAGS = ["--train", "--loss=cross-entropy:logits,labels", "--optimizer=adamw",
               "--lr=1e-3"]
LR = 1e-3
WEIGHT_DECAY = 0.01

GPT_MODELS = {
    # name: (onnx source, generator config or None, batch, seq)
    "gpt2": (os.path.join(ROOT, "examples", "gpt2.onnx"), None, 4, 64),
    "gpt-6x512": ("gpt-6x512.onnx",
                  dict(layers=6, embd=512, heads=8, vocab=1024, max_pos=256), 4, 256),
}
RESNET_TRAIN = dict(classes=10, image=64, batch=1)
DEFAULT_ROUNDS = {"gpt2": 5, "gpt-6x512": 1, "resnet18": 5}
SAMPLES_BATCHES = 4  # data files hold 4 batches; step s uses batch (s-1) % 4


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def wait_quiet(limit, max_wait_s=120):
    """With --quiet-load L: wait (at most max_wait_s, 2 min) for the 1-minute load average to
    drop below L before a round. Returns the load average the round starts at."""
    t0 = time.time()
    while limit > 0 and loadavg() >= limit and time.time() - t0 < max_wait_s:
        time.sleep(5)
    return loadavg()


def run_cmd(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return out


def error_line(out):
    """The first line that says 'error' in a failed command's output (else its last line)."""
    text = (out.stderr or "") + (out.stdout or "")
    lines = [l for l in text.splitlines() if l.strip()]
    for l in lines:
        if "error" in l.lower():
            return l.strip()
    return lines[-1].strip() if lines else f"exit status {out.returncode}"


# ---------------------------------------------------------------------------
# Models: ONNX, data, and the PyTorch replica
# ---------------------------------------------------------------------------

def onnx_params(path):
    m = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def gpt_config(params):
    """The configuration of a gen_examples.py GPT from its initializers."""
    V, E = params["wte"].shape
    P = params["wpe"].shape[0]
    L = len({k.split(".")[0] for k in params if re.match(r"h\d+\.", k)})
    hdim = int(params["head_dim"].reshape(-1)[0])
    return dict(vocab=V, embd=E, max_pos=P, layers=L, heads=E // hdim, eps=1e-5)


def torch_gpt(params, cfg):
    """The gen_examples.py GPT-2 graph in PyTorch (same op order, tied lm head)."""
    import torch
    import torch.nn.functional as F

    class GPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.names = [k for k in params
                          if k in ("wte", "wpe") or re.match(r"(h\d+|ln_f)\.", k)]
            self.ps = torch.nn.ParameterList(
                [torch.nn.Parameter(torch.from_numpy(params[k].copy())) for k in self.names])
            self.idx = {k: i for i, k in enumerate(self.names)}
            P = cfg["max_pos"]
            self.register_buffer("mask", torch.tril(torch.ones(P, P, dtype=torch.bool)))

        def p(self, name):
            return self.ps[self.idx[name]]

        def forward(self, ids):
            E, H, eps = cfg["embd"], cfg["heads"], cfg["eps"]
            D = E // H
            B, S = ids.shape
            p = self.p
            x = F.embedding(ids, p("wte")) + p("wpe")[:S]
            mask = self.mask[:S, :S]
            neg = torch.tensor(-1e9, dtype=torch.float32)
            scale = 1.0 / float(np.sqrt(D))
            for i in range(cfg["layers"]):
                n = f"h{i}."
                a = F.layer_norm(x, (E,), p(n + "ln_1.g"), p(n + "ln_1.b"), eps)
                qkv = a @ p(n + "attn.c_attn.w") + p(n + "attn.c_attn.b")
                q, k, v = qkv.split(E, dim=-1)
                q = q.reshape(B, S, H, D).transpose(1, 2)
                k = k.reshape(B, S, H, D).permute(0, 2, 3, 1)
                v = v.reshape(B, S, H, D).transpose(1, 2)
                s = torch.where(mask, (q @ k) * scale, neg)
                o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, E)
                x = x + (o @ p(n + "attn.c_proj.w") + p(n + "attn.c_proj.b"))
                m = F.layer_norm(x, (E,), p(n + "ln_2.g"), p(n + "ln_2.b"), eps)
                m = F.gelu(m @ p(n + "mlp.c_fc.w") + p(n + "mlp.c_fc.b"), approximate="tanh")
                x = x + (m @ p(n + "mlp.c_proj.w") + p(n + "mlp.c_proj.b"))
            x = F.layer_norm(x, (E,), p("ln_f.g"), p("ln_f.b"), eps)
            return x @ p("wte").t()

    return GPT()


def resnet18_torch(classes, seed):
    """torchvision's ResNet-18 with random weights and random batch-norm statistics and
    affine parameters (so no two initializers are equal: the exporter would merge them)."""
    import torch
    import torchvision
    torch.manual_seed(seed)
    m = torchvision.models.resnet18(num_classes=classes)
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.normal_(0.0, 0.1)
                mod.running_mean.normal_(0.0, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
    return m.eval()


def export_resnet18(path, classes, image, keep_bn, seed=0):
    import torch
    import warnings
    m = resnet18_torch(classes, seed)
    x = torch.randn(1, 3, image, image)
    kw = {}
    if keep_bn:
        # PRESERVE with an eval() model: BatchNormalization nodes in inference mode
        # (the EVAL default folds them into the convolutions).
        kw["training"] = torch.onnx.TrainingMode.PRESERVE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), path, opset_version=17, input_names=["image"],
                          output_names=["logits"], dynamo=False, **kw)
    return path


def torch_resnet18_from_onnx(params, classes):
    import torch
    m = resnet18_torch(classes, seed=1)  # architecture; the weights come from the ONNX
    sd = m.state_dict()
    missing = [k for k in sd if not k.endswith("num_batches_tracked") and k not in params]
    if missing:
        raise RuntimeError(f"ONNX initializers lack {missing[:5]}")
    m.load_state_dict({k: torch.from_numpy(params[k].copy()) if k in params else v
                       for k, v in sd.items()})
    return m.eval()


class Bench:
    """One training benchmark: the ONNX model, its data and the torch replica."""

    def __init__(self, name, workdir):
        self.name = name
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        rng = np.random.default_rng(1234)
        if name in GPT_MODELS:
            src, gen, self.batch, seq = GPT_MODELS[name]
            if gen is not None:
                import gen_gpt
                self.onnx = os.path.join(self.dir, src)
                model, _ = gen_gpt.build(gen["layers"], gen["embd"], gen["heads"],
                                         gen["vocab"], gen["max_pos"])
                onnx.save(model, self.onnx)
            else:
                self.onnx = src
            self.params = onnx_params(self.onnx)
            self.cfg = gpt_config(self.params)
            self.flags = [f"--input-shape=input_ids={self.batch},{seq}"]
            toks = rng.integers(0, self.cfg["vocab"], (self.batch * SAMPLES_BATCHES, seq + 1))
            self.data = {"input_ids": toks[:, :-1].astype(np.int64),
                         "labels": toks[:, 1:].astype(np.int64)}
            self.x_name = "input_ids"
            self.shape = f"{self.batch}x{seq} tokens"
        elif name == "resnet18":
            c = RESNET_TRAIN
            self.batch = c["batch"]
            self.onnx = export_resnet18(os.path.join(self.dir, "resnet18-train.onnx"),
                                        c["classes"], c["image"], keep_bn=True)
            self.params = onnx_params(self.onnx)
            self.flags = []
            n = self.batch * SAMPLES_BATCHES
            self.data = {
                "image": rng.standard_normal((n, 3, c["image"], c["image"])).astype(np.float32),
                "labels": rng.integers(0, c["classes"], (n,)).astype(np.int64)}
            self.x_name = "image"
            self.shape = f"{self.batch}x3x{c['image']}x{c['image']}, {c['classes']} classes"
        else:
            raise SystemExit(f"bench_train: error: unknown model '{name}'")
        self.files = {}
        for k, a in self.data.items():
            self.files[k] = os.path.join(self.dir, f"{k}.npy")
            np.save(self.files[k], a)
        self.binary = os.path.join(self.dir, f"{name}-train.bin")

    def compile(self, hpc_opt, precision="fp32", hpc_flags=()):
        extra = [f"--precision={precision}"] if precision != "fp32" else []
        extra += list(hpc_flags)
        cmd = [hpc_opt, self.onnx] + self.flags + TRAIN_FLAGS + extra + ["-o", self.binary]
        self.compile_cmd = cmd
        out = run_cmd(cmd)
        if out.returncode != 0:
            return error_line(out)
        return None

    def torch_model(self):
        if self.name in GPT_MODELS:
            return torch_gpt(self.params, self.cfg)
        return torch_resnet18_from_onnx(self.params, RESNET_TRAIN["classes"])

    def batch_at(self, step):
        """The tensors of step `step` (from 1), as the train command picks them."""
        import torch
        n = next(iter(self.data.values())).shape[0]
        rows = [((step - 1) * self.batch + i) % n for i in range(self.batch)]
        return {k: torch.from_numpy(a[rows]) for k, a in self.data.items()}


def hpc_train(bench, threads, warmup, steps):
    metrics = os.path.join(bench.dir, f"metrics-t{threads}.jsonl")
    cmd = [bench.binary, "train", "--steps", str(warmup + steps), "--metrics", metrics,
           "--threads", str(threads), "--log-every", str(warmup + steps)]
    for k, f in bench.files.items():
        cmd += ["--data", f"{k}={f}"]
    out = run_cmd(cmd)
    if out.returncode != 0:
        return None, error_line(out)
    lines = [json.loads(l) for l in open(metrics) if l.strip()]
    rows = {l["step"]: l for l in lines if "step" in l and not l.get("summary")}
    summary = [l for l in lines if l.get("summary")][-1]
    ms = [rows[s]["step_ms"] for s in range(warmup + 1, warmup + steps + 1)]
    losses = [rows[s]["loss"] for s in range(1, warmup + steps + 1)]
    return dict(ms=statistics.median(ms), losses=losses,
                planned=summary["planned_bytes_per_rank"],
                peak=summary["peak_bytes_per_rank"]), None


def torch_train(bench, threads, warmup, steps, variant, bf16=False):
    import contextlib
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    model = bench.torch_model()
    kw = {"fused": True} if variant == "fused" else {}
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=WEIGHT_DECAY, **kw)
    times, losses = [], []
    for s in range(1, warmup + steps + 1):
        t0 = time.perf_counter()
        b = bench.batch_at(s)
        opt.zero_grad(set_to_none=True)
        # bf16: PyTorch's CPU autocast around the forward pass and the loss,
        # as --precision=bf16 compiles (fp32 master weights and AdamW).
        amp = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with amp:
            logits = model(b[bench.x_name])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                   b["labels"].reshape(-1))
        loss.backward()
        opt.step()
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(float(loss.detach()))
    return dict(ms=statistics.median(times[warmup:]), losses=losses)


def loss_check(a, b):
    """(|step-1 difference| relative, largest relative difference over all steps)."""
    rel = [abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b)]
    return rel[0], max(rel)


def mib(b):
    return b / (1 << 20)


def train_benchmarks(args):
    rows = []
    variants = args.torch_adamw
    for name in args.models:
        log(f"== {name}: making the model")
        bench = Bench(name, args.workdir)
        err = bench.compile(args.hpc_opt, args.precision, args.hpc_flag)
        log("   " + " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c
                              for c in bench.compile_cmd))
        if err:
            log(f"   COMPILE FAILED: {err}")
            rows.append(dict(model=name, shape=bench.shape, error=f"hpc-opt: {err}"))
            continue
        rounds = args.rounds or DEFAULT_ROUNDS[name]
        for t in args.threads:
            per = []
            for r in range(rounds):
                load = wait_quiet(args.quiet_load)
                h, err = hpc_train(bench, t, args.warmup, args.steps)
                if err:
                    log(f"   TRAIN FAILED: {err}")
                    break
                tr = {v: torch_train(bench, t, args.warmup, args.steps, v,
                                     args.precision == "bf16") for v in variants}
                per.append((h, tr))
                log(f"   T={t} round {r + 1}: hpc {h['ms']:.2f} ms | " +
                    " | ".join(f"torch {v} {tr[v]['ms']:.2f} ms (hpc/torch "
                               f"{h['ms'] / tr[v]['ms']:.2f})" for v in variants) +
                    f" | loss step 1 hpc {h['losses'][0]:.6f} torch "
                    f"{tr[variants[0]]['losses'][0]:.6f} | load {load:.2f}")
            if err:
                rows.append(dict(model=name, shape=bench.shape, threads=t,
                                 error=f"train: {err}"))
                break
            row = dict(model=name, shape=bench.shape, threads=t, rounds=rounds,
                       hpc_ms=statistics.median(h["ms"] for h, _ in per),
                       planned=per[-1][0]["planned"], peak=per[-1][0]["peak"])
            for v in variants:
                row[f"torch_{v}_ms"] = statistics.median(tr[v]["ms"] for _, tr in per)
                row[f"ratio_{v}"] = statistics.median(h["ms"] / tr[v]["ms"] for h, tr in per)
                ratios = [h["ms"] / tr[v]["ms"] for h, tr in per]
                row[f"ratio_{v}_range"] = (min(ratios), max(ratios))
            d1, dmax = loss_check(per[0][0]["losses"], per[0][1][variants[0]]["losses"])
            row.update(loss1_hpc=per[0][0]["losses"][0],
                       loss1_torch=per[0][1][variants[0]]["losses"][0],
                       loss1_rel=d1, loss_rel_max=dmax)
            rows.append(row)
    return rows


def print_train_table(rows, variants):
    head = ["model", "shape", "T", "hpc-opt ms/step"]
    for v in variants:
        head += [f"torch {v} ms/step", f"hpc/torch {v}"]
    head += ["planned MiB/rank", "peak MiB/rank", "peak/planned", "loss step 1 (hpc / torch)",
             "max loss rel. diff"]
    print("| " + " | ".join(head) + " |")
    print("| " + " | ".join(["---", "---"] + ["---:"] * (len(head) - 3) + ["---:"]) + " |")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['shape']} | {r.get('threads', '')} | "
                  f"**failed**: `{r['error']}` |" + " |" * (len(head) - 4))
            continue
        cells = [r["model"], r["shape"], str(r["threads"]), f"{r['hpc_ms']:.2f}"]
        for v in variants:
            lo, hi = r[f"ratio_{v}_range"]
            rng = f" ({lo:.2f}-{hi:.2f})" if r["rounds"] > 1 else ""
            cells += [f"{r[f'torch_{v}_ms']:.2f}", f"**{r[f'ratio_{v}']:.2f}**{rng}"]
        cells += [f"{mib(r['planned']):.1f}", f"{mib(r['peak']):.1f}",
                  f"{r['peak'] / r['planned']:.4f}",
                  f"{r['loss1_hpc']:.6f} / {r['loss1_torch']:.6f}",
                  f"{r['loss_rel_max']:.1e}"]
        print("| " + " | ".join(cells) + " |", flush=True)


# ---------------------------------------------------------------------------
# Inference (ResNet-18, GPT-2 small) against onnxruntime and PyTorch
# ---------------------------------------------------------------------------

INFER_MODELS = ("resnet18", "gpt2-small")
GPT2_SMALL = dict(layers=12, embd=768, heads=12, vocab=50257, max_pos=1024)
GPT2_SMALL_SEQ = 128
INFER_WARMUP = 10  # untimed onnxruntime (and torch fp32) runs before the timed ones


def infer_model(args, name):
    """The inference benchmark `name`: dict(onnx, flags, input name, input array, shape
    text, torch model or None), the model made under --workdir when missing."""
    rng = np.random.default_rng(0)
    if name == "resnet18":
        d = os.path.join(args.workdir, "resnet18-infer")
        os.makedirs(d, exist_ok=True)
        model = export_resnet18(os.path.join(d, "resnet18-224.onnx"), 1000, 224, keep_bn=False)
        x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
        return dict(dir=d, onnx=model, flags=[], x_name="image", x=x,
                    shape="1x3x224x224", torch=None)
    d = os.path.join(args.workdir, "gpt2-small-infer")
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "gpt2-small.onnx")
    c = GPT2_SMALL
    if not os.path.exists(model):  # ~500 MB of random weights (seed 0): made once
        tmp = model + ".tmp"
        cmd = [sys.executable, os.path.join(HERE, "gen_gpt.py"), "--layers", str(c["layers"]),
               "--embd", str(c["embd"]), "--heads", str(c["heads"]), "--vocab", str(c["vocab"]),
               "--max-pos", str(c["max_pos"]), "-o", tmp]
        log("   " + " ".join(cmd))
        out = run_cmd(cmd)
        if out.returncode != 0:
            raise RuntimeError(f"gen_gpt.py: {error_line(out)}")
        os.replace(tmp, model)
    params = onnx_params(model)
    tm = torch_gpt(params, gpt_config(params)).eval()
    del params
    x = rng.integers(0, c["vocab"], (1, GPT2_SMALL_SEQ)).astype(np.int64)
    return dict(dir=d, onnx=model, flags=["--input-shape", f"input_ids=1,{GPT2_SMALL_SEQ}"],
                x_name="input_ids", x=x, shape=f"1x{GPT2_SMALL_SEQ} tokens", torch=tm)


def torch_infer(model, x, threads, iters, warmup, bf16):
    """Mean ms of `iters` forward passes (after `warmup`) in eval/no_grad mode, fp32 or
    under torch.autocast("cpu", bfloat16); and the last logits (fp32 numpy)."""
    import contextlib
    import torch
    torch.set_num_threads(threads)
    ids = torch.from_numpy(x)
    amp = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    times = []
    with torch.no_grad(), amp:
        for i in range(warmup + iters):
            t0 = time.perf_counter()
            y = model(ids)
            times.append((time.perf_counter() - t0) * 1e3)
    return sum(times[warmup:]) / iters, y.float().numpy()


def infer_one(args, name):
    import onnxruntime as ort
    log(f"== {name} inference: making the model")
    try:
        b = infer_model(args, name)
    except RuntimeError as e:
        return [dict(model=name, shape="", error=str(e))]
    d, model, shape = b["dir"], b["onnx"], b["shape"]
    exe = os.path.join(d, os.path.splitext(os.path.basename(model))[0] + ".bin")
    cmd = [args.hpc_opt, model] + b["flags"] + ["-o", exe]
    if args.precision != "fp32":
        cmd.append(f"--precision={args.precision}")
    log(f"== {name} inference: " + " ".join(cmd))
    out = run_cmd(cmd)
    if out.returncode != 0:
        return [dict(model=name, shape=shape, error=f"hpc-opt: {error_line(out)}")]
    x = b["x"]
    npy = os.path.join(d, f"{b['x_name']}.npy")
    np.save(npy, x)
    outdir = os.path.join(d, "out")
    tm = b["torch"]
    rows = []
    for t in args.threads:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = t
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        out_name = sess.get_outputs()[0].name
        feed = {b["x_name"]: x}
        for _ in range(INFER_WARMUP):
            ref = sess.run(None, feed)[0]
        per, bf16 = [], None
        for r in range(args.infer_rounds):
            load = wait_quiet(args.quiet_load)
            out = run_cmd([exe, "run", "--input", f"{b['x_name']}={npy}", "--output-dir", outdir,
                           "--warmup", "1", "--iters", str(args.infer_iters),
                           "--threads", str(t)])
            m = re.search(r"^time: ([0-9.]+) ms/run .*min ([0-9.]+) ms", out.stdout, re.M)
            if out.returncode != 0 or not m:
                rows.append(dict(model=name, shape=shape, threads=t,
                                 error=f"run: {error_line(out)}"))
                break
            hpc_mean, hpc_min = float(m.group(1)), float(m.group(2))
            times = []
            for _ in range(args.infer_iters):
                t0 = time.perf_counter()
                sess.run(None, feed)
                times.append((time.perf_counter() - t0) * 1e3)
            ort_mean, ort_min = sum(times) / len(times), min(times)
            p = dict(hpc_mean=hpc_mean, hpc_min=hpc_min, ort_mean=ort_mean, ort_min=ort_min,
                     ratio=hpc_mean / ort_mean)
            msg = (f"   T={t} round {r + 1}: hpc mean {hpc_mean:.2f} min {hpc_min:.2f} | ort mean "
                   f"{ort_mean:.2f} min {ort_min:.2f} | hpc/ort {hpc_mean / ort_mean:.2f}")
            if tm is not None:
                # Warm-up: the first round only (the model and its threads stay).
                p["torch_mean"], ty = torch_infer(tm, x, t, args.infer_iters,
                                                  INFER_WARMUP if r == 0 else 1, bf16=False)
                p["ratio_torch"] = hpc_mean / p["torch_mean"]
                msg += (f" | torch fp32 {p['torch_mean']:.2f} (hpc/torch "
                        f"{p['ratio_torch']:.2f}, |torch-ort| {np.abs(ty - ref).max():.1e})")
                if r == 0 and args.torch_bf16_iters > 0:
                    # bf16 autocast: slow where the CPU lacks AVX-512 BF16; first round only.
                    bf16, by = torch_infer(tm, x, t, min(args.torch_bf16_iters, args.infer_iters),
                                         1, bf16=True)
                    msg += f" | torch bf16 {bf16:.2f} (|bf16-ort| {np.abs(by - ref).max():.1e})"
            per.append(p)
            log(msg + f" | load {load:.2f}")
        else:
            got = np.load(os.path.join(outdir, f"{out_name}.npy"))
            row = {k: statistics.median(p[k] for p in per) for k in per[0]}
            ratios = [p["ratio"] for p in per]
            row.update(model=name, shape=shape, threads=t, range=(min(ratios), max(ratios)),
                       torch_bf16_mean=bf16, diff=float(np.abs(got - ref).max()))
            rows.append(row)
    return rows


def infer_benchmark(args):
    rows = []
    for name in args.infer_models:
        rows += infer_one(args, name)
    return rows


def print_infer_table(rows, args):
    print("| model | T | hpc mean ms | hpc min ms | ort mean ms | ort min ms | hpc/ort (range) "
          "| torch fp32 mean ms | torch bf16 mean ms | hpc/torch fp32 | max abs diff of logits |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        label = f"{r['model']} {r['shape']}".strip()
        if "error" in r:
            print(f"| {label} | {r.get('threads', '')} | **failed**: "
                  f"`{r['error']}` | | | | | | | | |")
            continue
        tf = f"{r['torch_mean']:.2f}" if "torch_mean" in r else ""
        tb = f"{r['torch_bf16_mean']:.2f}" if r.get("torch_bf16_mean") is not None else ""
        rt = f"**{r['ratio_torch']:.2f}**" if "ratio_torch" in r else ""
        print(f"| {label} | {r['threads']} | {r['hpc_mean']:.2f} | "
              f"{r['hpc_min']:.2f} | {r['ort_mean']:.2f} | {r['ort_min']:.2f} | "
              f"**{r['ratio']:.2f}** ({r['range'][0]:.2f}-{r['range'][1]:.2f}) | "
              f"{tf} | {tb} | {rt} | {r['diff']:.1e} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hpc-opt", default=os.path.join(ROOT, "build", "bin", "hpc-opt"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--models", default="gpt2,gpt-6x512,resnet18",
                    type=lambda s: [m for m in s.split(",") if m])
    ap.add_argument("--threads", default="1,2", type=lambda s: [int(t) for t in s.split(",")])
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed first steps (default 3)")
    ap.add_argument("--rounds", type=int, default=0,
                    help="rounds per model and T (default: 5, 1 for gpt-6x512)")
    ap.add_argument("--torch-adamw", default="default,fused",
                    type=lambda s: [v for v in s.split(",") if v])
    ap.add_argument("--infer", dest="infer", action="store_true", default=True)
    ap.add_argument("--no-infer", dest="infer", action="store_false")
    ap.add_argument("--no-train", dest="train", action="store_false", default=True)
    ap.add_argument("--infer-iters", type=int, default=20)
    ap.add_argument("--infer-rounds", type=int, default=5)
    ap.add_argument("--infer-models", default=",".join(INFER_MODELS),
                    type=lambda s: [m for m in s.split(",") if m],
                    help="inference benchmarks (default resnet18,gpt2-small)")
    ap.add_argument("--torch-bf16-iters", type=int, default=2,
                    help="timed torch bf16-autocast runs of GPT-2 small, first round only "
                         "(default 2; 0: skip)")
    ap.add_argument("--hpc-flag", action="append", default=[],
                    help="one more hpc-opt flag for the train steps "
                         "(--hpc-flag=--no-fused-gradients); repeatable")
    ap.add_argument("--precision", default="fp32",
                    help="passed to hpc-opt as --precision=P when not fp32 (default fp32); "
                         "bf16 also trains PyTorch under CPU bf16 autocast")
    ap.add_argument("--quiet-load", type=float, default=0.0,
                    help="before each round wait (up to 2 min) for the 1-minute load "
                         "average to drop below this (default 0: do not wait)")
    args = ap.parse_args()
    for v in args.torch_adamw:
        if v not in ("default", "fused"):
            ap.error(f"--torch-adamw: '{v}' is not default or fused")
    for m in args.infer_models:
        if m not in INFER_MODELS:
            ap.error(f"--infer-models: '{m}' is not one of {','.join(INFER_MODELS)}")
    if not os.access(args.hpc_opt, os.X_OK):
        ap.error(f"no hpc-opt at {args.hpc_opt}")
    os.makedirs(args.workdir, exist_ok=True)

    import onnxruntime
    import torch
    import torchvision
    torch.set_num_interop_threads(1)
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    print(f"machine: {os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))}), {cpu}, "
          f"load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}; torch {torch.__version__}, "
          f"torchvision {torchvision.__version__}, onnxruntime {onnxruntime.__version__}, "
          f"numpy {np.__version__}")
    if args.train:
        print(f"steps: {args.warmup} warm-up + {args.steps} timed; threads {args.threads}; "
              f"precision {args.precision}")
    if args.infer:
        print(f"inference: {','.join(args.infer_models)}; {args.infer_iters} iterations x "
              f"{args.infer_rounds} rounds; precision {args.precision}")
    if args.train:
        rows = train_benchmarks(args)
        print()
        print_train_table(rows, args.torch_adamw)
    if args.infer:
        rows = infer_benchmark(args)
        print()
        print_infer_table(rows, args)
    print(f"load average at the end: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
