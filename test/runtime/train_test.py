#!/usr/bin/env python3
"""End-to-end test of `./model train`: links the stand-in train-step programs
(FakeTrainProgram.c, a least-squares model trained by SGD with momentum;
FakeTrainProgramTokens.c, a token model) with libhpcrt exactly as
hpcrt-link.txt says, then checks the train command against a numpy replica
of the fake's arithmetic: the metrics file, the data order and its wrap-
around, the token windows and labels, the lr schedules, every data error,
the checkpoint layout and its files, bitwise-equal resumes after a kill and
after a stop, corrupted and foreign checkpoints (refused, the directory left
as it was), --save, --save-onnx (a hand-made ONNX model rewritten: field by
field, external data inlined), --init-weights, evaluation, --dump-outputs, the manifest
checks of the state and train sections, and (with mpirun) a data-parallel
program on two ranks. Every user error must be one line
`model: error: ...` and exit status 1.

usage: train_test.py CC TEST_SOURCE_DIR INCLUDE_DIR HPCRT_LINK_TXT [MPIRUN]
Exit 77 (skipped) when numpy is missing; the multi-rank part is skipped
(and says so) when mpirun is missing.
"""
import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:  # reported as skipped (ctest SKIP_RETURN_CODE 77)
    print(f"skipped: {e}")
    sys.exit(77)

FAILURES = []
TIMEOUT = 120
B = 8  # the fake's global batch
W0 = np.array([0.5, -1.0, 0.25, 2.0], np.float32)
B0 = np.float32(0.1)
LR = np.float32(0.05)


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)
    return cond


def hash64(data: bytes) -> int:
    h, prime, mask = 0xcbf29ce484222325, 0x100000001b3, (1 << 64) - 1
    n = len(data)
    for i in range(0, n - n % 8, 8):
        h = ((h ^ int.from_bytes(data[i:i + 8], "little")) * prime) & mask
    if n % 8:
        tail = data[n - n % 8:] + b"\0" * (8 - n % 8)
        h = ((h ^ int.from_bytes(tail, "little")) * prime) & mask
    return h ^ n


# ---------------------------------------------------------------------------
# safetensors
# ---------------------------------------------------------------------------

ST_DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def write_safetensors(path, tensors, metadata=None, align=64):
    header, data, off = {}, b"", 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, arr in tensors.items():
        dt = {np.dtype("float32"): "F32", np.dtype("float64"): "F64",
              np.dtype("int64"): "I64"}[arr.dtype]
        raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    text = json.dumps(header)
    text += " " * ((-(8 + len(text))) % align)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + data)


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        out[name] = (e["dtype"], np.frombuffer(data[a:b], ST_DTYPES[e["dtype"]]).reshape(e["shape"]))
    return out, meta, 8 + n


# ---------------------------------------------------------------------------
# Building and running
# ---------------------------------------------------------------------------

class Env:
    def __init__(self, cc, srcdir, include, link, mpirun, tmp):
        self.cc, self.srcdir, self.include, self.link, self.mpirun, self.tmp = (
            cc, srcdir, include, link, mpirun, tmp)

    def build(self, name, source, defines=(), source_text=None):
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        src = os.path.join(self.srcdir, source) if source_text is None else os.path.join(d, source)
        if source_text is not None:
            with open(src, "w") as f:
                f.write(source_text)
        obj, exe = os.path.join(d, "program.o"), os.path.join(d, "model")
        subprocess.run([self.cc, "-c", "-O1", *defines, "-I", self.include, src, "-o", obj], check=True)
        subprocess.run([self.cc, obj, *self.link, "-lm", "-o", exe], check=True)
        return exe

    def mpi_env(self):
        return dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
                    OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_orte_tmpdir_base=self.tmp)


def run(model, *args, env=None, mpi=None, n=2):
    cmd = [model, *args]
    if mpi:
        cmd = [mpi.mpirun, "--allow-run-as-root", "--oversubscribe", "-n", str(n), *cmd]
    full = mpi.mpi_env() if mpi else dict(os.environ)
    full.pop("HPC_FAULT", None)
    full.update(env or {})
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=full)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out: {' '.join(cmd)}"
    return p.returncode, p.stdout, p.stderr


def expect_error(model, args, needle, what, env=None):
    rc, out, err = run(model, *args, env=env)
    lines = err.strip().splitlines()
    ok = rc == 1 and len(lines) == 1 and lines[0].startswith("model: error: ") and needle in lines[0]
    check(ok, f"{what}: rc={rc} stderr={err!r} (want one line with {needle!r})")
    return lines[0] if lines else ""


def metrics(path):
    """(step lines, summary or None, raw loss text by step)."""
    steps, summary, loss_text = [], None, {}
    for line in open(path):
        obj = json.loads(line)
        if obj.get("summary"):
            summary = obj
            continue
        steps.append(obj)
        loss_text[obj["step"]] = re.search(r'"loss": ([^,}]+)', line).group(1)
    return steps, summary, loss_text


def tree_digest(root):
    """Every path under root with the sha256 of each file (a listing to compare)."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs):
            out.append((os.path.relpath(os.path.join(d, name), root), "dir"))
        for name in sorted(files):
            p = os.path.join(d, name)
            out.append((os.path.relpath(p, root), hashlib.sha256(open(p, "rb").read()).hexdigest()))
    return sorted(out)


def flip_byte(path, offset_from_end=1):
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) - offset_from_end] ^= 0x40
    open(path, "wb").write(bytes(raw))


# ---------------------------------------------------------------------------
# The numpy replica of FakeTrainProgram.c
# ---------------------------------------------------------------------------

def replica(x, y, steps, lr=LR, w=W0, b=B0, first=0):
    """Per step: (loss, grad_norm, w, b) after the step, float32 arithmetic."""
    w, b = w.astype(np.float32).copy(), np.float32(b)
    wbuf, bbuf = np.zeros(4, np.float32), np.float32(0)
    out = []
    n = len(x)
    for s in range(1, steps + 1):
        idx = [(first + (s - 1) * B + r) % n for r in range(B)]
        xb, yb = x[idx], y[idx]
        r = (xb @ w + b - yb).astype(np.float32)
        loss = np.float32((r * r).sum() / B)
        gw = (2 * (r[:, None] * xb).sum(0) / B).astype(np.float32)
        gb = np.float32(2 * r.sum() / B)
        gn = np.float32(np.sqrt((gw * gw).sum() + gb * gb))
        wbuf = (np.float32(0.9) * wbuf + gw).astype(np.float32)
        bbuf = np.float32(np.float32(0.9) * bbuf + gb)
        w = (w - lr * wbuf).astype(np.float32)
        b = np.float32(b - lr * bbuf)
        out.append((float(loss), float(gn), w.copy(), b))
    return out


def place_weights(model_dir):
    wts = np.zeros(32, "<f4")
    wts[0:4] = W0
    wts[16] = B0
    raw = wts.tobytes()
    # One entry per planned tensor (the runtime checks them against the plan).
    text = json.dumps({"__metadata__": {"hpc_hash": "%016x" % hash64(raw)},
                       "fc.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                       "fc.bias": {"dtype": "F32", "shape": [1], "data_offsets": [64, 68]}})
    text += " " * ((-(8 + len(text))) % 64)
    with open(os.path.join(model_dir, "fake_train.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + raw)


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------

def test_info_and_refusals(env, model, tmp):
    rc, out, err = run(model, "info")
    check(rc == 0 and "state: 256 bytes, 4 tensors" in out
          # The 20 bytes of initial values (fc.weight, fc.bias) are released
          # once the state has them: 108 of the 128 weights bytes stay.
          and "memory plan: 1240 bytes per rank (state 256, arena 704, weights 108, inputs 172;"
          in out and "the 20 bytes of weights that only initialize the state" in out
          and "state  fc.weight: f32 [4] param (init weights at 0)" in out
          and "state  fc.bias.momentum_buffer: f32 [1] optimizer (init zeros)" in out
          and "train: loss mse (labels 'y'), batch 8" in out and "optimizer: sgd" in out
          and "lr schedule: constant" in out, f"info: {out!r} {err!r}")
    expect_error(model, ["run", "--output-dir", os.path.join(tmp, "o")], "train-step program",
                 "run on a train program")
    plain = env.build("plain", "FakeProgram.c")
    expect_error(plain, ["train", "--steps", "1"], "no train step", "train on an inference program")
    rc, out, err = run(model, "--help")
    check(rc == 0 and "train --data" in out and "HPC_FAULT" in out, f"usage: {out!r}")


def test_basic(env, model, tmp, x, y):
    m = os.path.join(tmp, "basic.jsonl")
    rc, out, err = run(model, "train", "--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy",
                       "--steps", "50", "--metrics", m, "--log-every", "10")
    check(rc == 0, f"basic run: {err}")
    steps, summary, _ = metrics(m)
    check([s["step"] for s in steps] == list(range(1, 51)), "metrics steps 1..50")
    keys = {"step", "loss", "lr", "grad_norm", "step_ms", "tokens_per_s"}
    check(all(keys <= set(s) for s in steps), f"metrics keys: {steps[0]}")
    losses = [s["loss"] for s in steps]
    check(np.mean(losses[:5]) > 20 * np.mean(losses[-5:]), f"loss decreases: {losses}")
    ref = replica(x, y, 50)
    check(np.allclose(losses, [r[0] for r in ref], rtol=2e-4, atol=1e-6),
          f"losses vs the numpy replica: {losses[:5]} vs {[r[0] for r in ref][:5]}")
    check(np.allclose([s["grad_norm"] for s in steps], [r[1] for r in ref], rtol=2e-4, atol=1e-6),
          "grad norms vs the numpy replica")
    check(all(s["lr"] == 0.05 for s in steps), "constant lr from the manifest")
    check(summary is not None and summary["steps"] == 50
          and summary["planned_bytes_per_rank"] == 256 + 704 + (128 - 20) + 172
          and summary["weights_resident_bytes"] == 108
          and summary["peak_bytes_per_rank"] >= summary["planned_bytes_per_rank"]
          and summary["peak_rss_bytes_per_rank"] > summary["peak_bytes_per_rank"],
          f"summary: {summary}")
    plain = [l for l in out.splitlines() if l.startswith("step ")]
    check([l.split()[1] for l in plain] == ["10/50", "20/50", "30/50", "40/50", "50/50"]
          and all("samples/s" in l for l in plain), f"plain progress every 10 steps: {plain}")
    # On a terminal: one progress line redrawn in place.
    master, slave = os.openpty()
    p = subprocess.run([model, "train", "--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy",
                        "--steps", "5"], stdout=slave, stderr=subprocess.PIPE, timeout=TIMEOUT)
    os.close(slave)
    tty = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        tty += chunk
    os.close(master)
    text = tty.decode(errors="replace")
    check(p.returncode == 0 and text.count("\rstep ") == 5 and "step 5/5" in text and "ETA" in text
          and "steps/s" in text and "\nstep " not in text, f"terminal progress: {text!r}")
    return steps


def test_data(env, model, tmp, x, y):
    d = os.path.join(tmp, "dump")
    rc, out, err = run(model, "train", "--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy",
                       "--steps", "3", "--dump-outputs", d, "--dump-steps", "1,3", "--lr", "0.01")
    check(rc == 0, f"dump run: {err}")
    for s, idx in [(1, list(range(8))), (3, [16, 17, 18, 19, 0, 1, 2, 3])]:
        sx = np.load(f"{d}/step-{s}/seen.x.npy")
        sy = np.load(f"{d}/step-{s}/seen.y.npy")
        check(np.array_equal(sx, x[idx]) and np.array_equal(sy, y[idx]),
              f"step {s} takes samples {idx} (wrap-around)")
        check(int(np.load(f"{d}/step-{s}/seen.step.npy")) == s, f"hpc.step of step {s}")
        check(np.load(f"{d}/step-{s}/seen.lr.npy") == np.float32(0.01), f"--lr feeds hpc.lr ({s})")
        check(os.path.exists(f"{d}/step-{s}/grad.fc.weight.npy"), "grad outputs dumped")
    check(not os.path.exists(f"{d}/step-2"), "only the --dump-steps are dumped")
    g1 = np.load(f"{d}/step-1/grad.fc.weight.npy")
    r = x[:8] @ W0 + B0 - y[:8]
    check(np.allclose(g1, 2 * (r[:, None] * x[:8]).sum(0) / 8, rtol=1e-5), "grad at step 1")

    xy = [f"x={tmp}/x.npy", f"y={tmp}/y.npy"]
    np.save(f"{tmp}/x5.npy", x[:5])
    np.save(f"{tmp}/y5.npy", y[:5])
    expect_error(model, ["train", "--data", f"x={tmp}/x5.npy", "--data", f"y={tmp}/y5.npy", "--steps", "1"],
                 "x5.npy: 5 samples, fewer than the batch of 8", "fewer than B samples")
    np.save(f"{tmp}/x64.npy", x.astype(np.float64))
    expect_error(model, ["train", "--data", f"x={tmp}/x64.npy", "--data", xy[1], "--steps", "1"],
                 "expected f32 samples of shape [4] (input 'x' is f32 [8, 4]), got f64 [20, 4]",
                 "wrong data dtype")
    np.save(f"{tmp}/x3.npy", x[:, :3].copy())
    expect_error(model, ["train", "--data", f"x={tmp}/x3.npy", "--data", xy[1], "--steps", "1"],
                 "x3.npy: expected f32 samples of shape [4]", "wrong per-sample shape")
    np.save(f"{tmp}/y19.npy", y[:19])
    expect_error(model, ["train", "--data", xy[0], "--data", f"y={tmp}/y19.npy", "--steps", "1"],
                 "needs the same number", "sample counts differ")
    expect_error(model, ["train", "--data", xy[0], "--steps", "1"], "missing --data for input 'y'",
                 "missing --data")
    expect_error(model, ["train", "--data", xy[0], "--data", xy[1], "--data", f"z={tmp}/x.npy",
                         "--steps", "1"], "no data input 'z'", "unknown data input")
    expect_error(model, ["train", "--data", xy[0], "--data", xy[1], "--data", f"hpc.lr={tmp}/x.npy",
                         "--steps", "1"], "which the driver feeds", "step input given as data")
    expect_error(model, ["train", "--data", xy[0], "--data", xy[0], "--data", xy[1], "--steps", "1"],
                 "--data x given twice", "data input twice")
    expect_error(model, ["train", "--data", f"x={tmp}/none.npy", "--data", xy[1], "--steps", "1"],
                 "none.npy: cannot open", "missing data file")
    expect_error(model, ["train", "--steps", "1"], "missing --data", "no data at all")
    expect_error(model, ["train", *sum([["--data", v] for v in xy], [])], "missing --steps", "no --steps")
    common = ["train", "--data", xy[0], "--data", xy[1], "--steps", "2"]
    expect_error(model, common + ["--steps", "0"], "positive integer", "--steps 0")
    expect_error(model, common + ["--bogus"], "unknown option '--bogus'", "unknown option")
    expect_error(model, common + ["--ckpt-every", "2"], "--ckpt-every needs --ckpt-dir", "ckpt-every alone")
    expect_error(model, common + ["--resume"], "--resume needs --ckpt-dir", "resume alone")
    expect_error(model, common + ["--ckpt-dir", f"{tmp}/c0", "--resume", "--resume-from", f"{tmp}/c0/step-1"],
                 "exclude each other", "resume and resume-from")
    expect_error(model, common + ["--lr-schedule", "step:3"], "--lr-schedule needs", "bad schedule")
    expect_error(model, common + ["--dump-steps", "1"], "come together", "dump-steps alone")
    expect_error(model, common + ["--eval-every", "1"], "--eval-every needs", "eval-every alone")
    expect_error(model, common, "HPC_FAULT: unknown fault 'boom' (expected nan-grad@STEP, loss-spike@STEP, kill@STEP", "bad HPC_FAULT",
                 env={"HPC_FAULT": "boom"})
    # A program without train.loss_scale_input (this stand-in, or one compiled by an
    # older hpc-opt) cannot take nan-grad.
    expect_error(model, common, "HPC_FAULT: nan-grad needs a program whose backward starts from "
                 "the input hpc.loss_scale", "nan-grad without a loss scale input",
                 env={"HPC_FAULT": "nan-grad@1"})
    check(not os.path.exists(f"{tmp}/c0"), "no checkpoint directory made by failed runs")


def test_tokens(env, tmp):
    model = env.build("tokens", "FakeTrainProgramTokens.c")
    emb = (np.arange(16, dtype=np.float32) * np.float32(0.1)).astype("<f4")
    raw = emb.tobytes()
    text = json.dumps({"__metadata__": {"hpc_hash": "%016x" % hash64(raw)},
                       "emb": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}})
    text += " " * ((-(8 + len(text))) % 64)
    with open(os.path.join(os.path.dirname(model), "fake_tokens.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + raw)
    T, Bt = 8, 4
    toks = np.array([(i * 5 + i // 3) % 16 for i in range(51)], np.uint16)  # (51-1)/8 = 6 samples
    toks.astype("<u2").tofile(f"{tmp}/train.bin")
    np.save(f"{tmp}/train_tokens.npy", toks.astype(np.int32))
    for name, tokfile in [("raw", f"{tmp}/train.bin"), ("npy", f"{tmp}/train_tokens.npy")]:
        d, m = f"{tmp}/tokdump-{name}", f"{tmp}/tok-{name}.jsonl"
        rc, out, err = run(model, "train", "--tokens", tokfile, "--steps", "3", "--metrics", m,
                           "--dump-outputs", d, "--dump-steps", "1,2,3")
        check(rc == 0, f"tokens ({name}): {err}")
        if rc:
            continue
        for s, samples in [(1, [0, 1, 2, 3]), (2, [4, 5, 0, 1]), (3, [2, 3, 4, 5])]:
            ids = np.load(f"{d}/step-{s}/seen.input_ids.npy")
            lab = np.load(f"{d}/step-{s}/seen.labels.npy")
            want_ids = np.stack([toks[k * T:k * T + T] for k in samples]).astype(np.int64)
            want_lab = np.stack([toks[k * T + 1:k * T + T + 1] for k in samples]).astype(np.int64)
            check(np.array_equal(ids, want_ids), f"tokens ({name}) step {s}: windows {ids} vs {want_ids}")
            check(np.array_equal(lab, want_lab), f"tokens ({name}) step {s}: labels shifted by one")
            check(np.array_equal(np.load(f"{d}/step-{s}/seen.attention_mask.npy"),
                                 np.ones((Bt, T), np.float32)), "attention_mask ones (f32)")
            check(np.array_equal(np.load(f"{d}/step-{s}/seen.position_ids.npy"),
                                 np.arange(T, dtype=np.int64)[None]), "position_ids 0..T-1")
        steps, summary, _ = metrics(m)
        check([s["lr"] for s in steps] == [0, 0.25, 0.5], f"cosine:2,10 lr of the manifest: {steps}")
        check(all(s["tokens_per_s"] > 0 for s in steps) and "tokens/s" in out, "tokens/s reported")
        check("input_ids <- " in out and "labels <- " in out, f"data line: {out!r}")
    m = f"{tmp}/tok-linear.jsonl"
    rc, out, err = run(model, "train", "--tokens", f"{tmp}/train.bin", "--steps", "3", "--metrics", m,
                       "--lr", "1", "--lr-schedule", "linear:0,4")
    check(rc == 0 and [s["lr"] for s in metrics(m)[0]] == [1, 0.75, 0.5], "--lr-schedule linear:0,4")
    toks[:20].astype("<u2").tofile(f"{tmp}/short.bin")
    expect_error(model, ["train", "--tokens", f"{tmp}/short.bin", "--steps", "1"],
                 "20 tokens make 2 samples of 8 tokens", "too few tokens")
    with open(f"{tmp}/odd.bin", "wb") as f:
        f.write(b"\0" * 41)
    expect_error(model, ["train", "--tokens", f"{tmp}/odd.bin", "--steps", "1"], "odd size", "odd token file")
    np.save(f"{tmp}/ftok.npy", np.zeros(60, np.float32))
    expect_error(model, ["train", "--tokens", f"{tmp}/ftok.npy", "--steps", "1"], "tokens must be integers",
                 "float tokens")
    # Evaluation on tokens: the training losses stay what they were.
    m2 = f"{tmp}/tok-eval.jsonl"
    rc, out, err = run(model, "train", "--tokens", f"{tmp}/train.bin", "--steps", "3", "--metrics", m2,
                       "--eval-tokens", f"{tmp}/train.bin", "--eval-every", "2")
    ref = metrics(f"{tmp}/tok-raw.jsonl")[2]
    got = metrics(m2)
    check(rc == 0 and got[2] == ref and "eval_loss" in got[0][1] and "eval_loss" not in got[0][0],
          f"--eval-tokens: {err} {got[0]}")


def test_checkpoints(env, model, tmp, x, y, ref_steps):
    data = ["--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy"]
    c = f"{tmp}/ckpt"
    m = f"{tmp}/ckpt.jsonl"
    save = f"{tmp}/saved.safetensors"
    rc, out, err = run(model, "train", *data, "--steps", "50", "--ckpt-dir", c, "--ckpt-every", "10",
                       "--metrics", m, "--save", save)
    check(rc == 0, f"checkpointed run: {err}")
    check(sorted(os.listdir(c)) == ["latest", "step-30", "step-40", "step-50"],
          f"keep 3 + latest: {sorted(os.listdir(c))}")
    check(open(f"{c}/latest").read() == "step-50", "latest names step-50")
    check(sorted(os.listdir(f"{c}/step-50")) == ["manifest.json", "rank-0.safetensors"], "step dir files")
    man = json.load(open(f"{c}/step-50/manifest.json"))
    plan = re.search(r"plan ([0-9a-f]{16})", out).group(1)
    shard = f"{c}/step-50/rank-0.safetensors"
    raw = open(shard, "rb").read()
    check(man["format_version"] == 2 and man["plan_hash"] == plan and man["step"] == 50
          and man["model"] == "fake_train.onnx" and man["data_position"]["next_sample"] == 400
          and man["rng"]["seed_counter"] == 0 and len(man["shards"]) == 1
          and man["shards"][0] == {"file": "rank-0.safetensors", "bytes": len(raw),
                                   "hash": "%016x" % hash64(raw)}, f"manifest.json: {man}")
    tensors, meta, data_off = read_safetensors(shard)
    check(data_off % 64 == 0, "shard data section 64-byte aligned")
    check(sorted(tensors) == ["fc.bias", "fc.bias.momentum_buffer", "fc.weight",
                              "fc.weight.momentum_buffer"]
          and meta["hpc_plan_hash"] == plan and meta["hpc_step"] == "50"
          and json.loads(meta["hpc_slice.fc.weight"]) == {"global_shape": [4], "slice": [[0, 4]]},
          f"shard records and metadata: {sorted(tensors)} {meta}")
    final = replica(x, y, 50)[-1]
    check(np.allclose(tensors["fc.weight"][1], final[2], rtol=1e-4, atol=1e-6), "shard holds the state")
    saved, smeta, _ = read_safetensors(save)
    check(sorted(saved) == ["fc.bias", "fc.weight"] and saved["fc.weight"][0] == "F32"
          and saved["fc.weight"][1].shape == (4,) and saved["fc.bias"][1].shape == (1,)
          and np.array_equal(saved["fc.weight"][1], tensors["fc.weight"][1])
          and np.array_equal(saved["fc.bias"][1], tensors["fc.bias"][1]) and smeta.get("format") == "pt",
          f"--save: {saved} {smeta}")
    ref_loss = metrics(m)[2]
    check(ref_loss == metrics(f"{tmp}/basic.jsonl")[2], "checkpointing does not change the losses")

    # A fresh run into a directory with checkpoints is refused; nothing changes.
    before = tree_digest(c)
    expect_error(model, ["train", *data, "--steps", "5", "--ckpt-dir", c], "already holds checkpoints",
                 "fresh run into a used directory")
    check(tree_digest(c) == before, "used directory untouched")

    c2 = f"{tmp}/ckpt-keep2"
    rc, _, err = run(model, "train", *data, "--steps", "30", "--ckpt-dir", c2, "--ckpt-every", "5",
                     "--ckpt-keep", "2")
    check(rc == 0 and sorted(os.listdir(c2)) == ["latest", "step-25", "step-30"], f"--ckpt-keep 2: {err}")

    # Killed in step 31, resumed: steps 31..50 bitwise as the uninterrupted run.
    k, mk = f"{tmp}/ckpt-kill", f"{tmp}/kill.jsonl"
    rc, out, err = run(model, "train", *data, "--steps", "50", "--ckpt-dir", k, "--ckpt-every", "10",
                       "--metrics", mk, env={"HPC_FAULT": "kill@31"})
    check(rc == -signal.SIGKILL, f"HPC_FAULT=kill@31 kills the process: rc={rc} {err}")
    steps, _, _ = metrics(mk)
    check([s["step"] for s in steps] == list(range(1, 31)), "killed before step 31's metrics")
    check(sorted(os.listdir(k)) == ["latest", "step-10", "step-20", "step-30"], f"kill: {os.listdir(k)}")
    rc, out, err = run(model, "train", *data, "--steps", "50", "--ckpt-dir", k, "--ckpt-every", "10",
                       "--metrics", mk, "--resume")
    check(rc == 0 and "resumed from" in out and "step-30" in out, f"resume after kill: {err} {out}")
    steps, summary, loss = metrics(mk)
    check([s["step"] for s in steps] == list(range(1, 51)), "resumed run appends 31..50")
    check(loss == ref_loss, "kill@31 + --resume: losses bitwise equal to the uninterrupted run")
    check(summary and summary["first_step"] == 31 and summary["steps"] == 50, f"resume summary {summary}")
    check(open(f"{k}/step-50/rank-0.safetensors", "rb").read() == raw,
          "the resumed run's step-50 shard equals the uninterrupted run's")

    # Stopped after 30 and resumed.
    s30, m30 = f"{tmp}/ckpt-stop", f"{tmp}/stop.jsonl"
    rc, _, err = run(model, "train", *data, "--steps", "30", "--ckpt-dir", s30, "--ckpt-every", "10",
                     "--metrics", m30)
    rc2, out, err2 = run(model, "train", *data, "--steps", "50", "--ckpt-dir", s30, "--ckpt-every", "10",
                         "--metrics", m30, "--resume")
    check(rc == 0 and rc2 == 0 and metrics(m30)[2] == ref_loss,
          f"stop at 30 + --resume: bitwise equal losses {err} {err2}")
    rc, out, err = run(model, "train", *data, "--steps", "50", "--ckpt-dir", s30, "--resume")
    check(rc == 0 and "nothing to do" in out, f"resume at the last step: {out} {err}")

    # --resume-from a corrupted or truncated shard: one line naming it, directory untouched.
    bad = f"{tmp}/ckpt-bad"
    shutil.copytree(c, bad)
    flip_byte(f"{bad}/step-50/rank-0.safetensors")
    before = tree_digest(bad)
    expect_error(model, ["train", *data, "--steps", "60", "--ckpt-dir", bad, "--ckpt-every", "10",
                         "--resume-from", f"{bad}/step-50"],
                 f"{bad}/step-50/rank-0.safetensors: checksum", "corrupted shard")
    check(tree_digest(bad) == before, "corrupted checkpoint directory untouched")
    trunc = f"{tmp}/ckpt-trunc"
    shutil.copytree(c, trunc)
    with open(f"{trunc}/step-40/rank-0.safetensors", "r+b") as f:
        f.truncate(100)
    before = tree_digest(trunc)
    expect_error(model, ["train", *data, "--steps", "60", "--resume-from", f"{trunc}/step-40"],
                 "rank-0.safetensors: 100 bytes", "truncated shard")
    check(tree_digest(trunc) == before, "truncated checkpoint directory untouched")

    # --resume skips the corrupted newest checkpoint with a warning.
    mb = f"{tmp}/skip.jsonl"
    shutil.copy(m, mb)
    with open(mb) as f:
        lines = [l for l in f if json.loads(l).get("step", 0) <= 40 and "summary" not in l]
    with open(mb, "w") as f:
        f.writelines(lines)
    rc, out, err = run(model, "train", *data, "--steps", "50", "--ckpt-dir", bad, "--ckpt-every", "10",
                       "--metrics", mb, "--resume")
    warn = [l for l in err.splitlines() if l]
    check(rc == 0 and len(warn) == 1 and warn[0].startswith("model: warning: skipping")
          and "step-50" in warn[0] and "resumed from" in out and "step-40" in out,
          f"--resume skips a corrupt newest: rc={rc} {err!r} {out!r}")
    check(metrics(mb)[2] == ref_loss, "resumed from step-40: losses bitwise equal")
    check(open(f"{bad}/step-50/rank-0.safetensors", "rb").read() == raw,
          "the corrupt step-50 was rewritten by the resumed run")
    allbad = f"{tmp}/ckpt-allbad"
    shutil.copytree(c, allbad)
    for s in (30, 40, 50):
        flip_byte(f"{allbad}/step-{s}/rank-0.safetensors")
    before = tree_digest(allbad)
    expect_error(model, ["train", *data, "--steps", "60", "--ckpt-dir", allbad, "--resume"],
                 "no checkpoint verifies", "no valid checkpoint")
    check(tree_digest(allbad) == before, "all-corrupt directory untouched")
    expect_error(model, ["train", *data, "--steps", "60", "--ckpt-dir", f"{tmp}/empty-ckpt", "--resume"],
                 "no checkpoint directory to resume from", "resume from nothing")
    check(not os.path.exists(f"{tmp}/empty-ckpt"), "--resume does not create the directory")

    # A checkpoint of another model/plan is refused.
    other = env.build("other", "FakeTrainProgram.c", ['-DFAKE_TRAIN_MODEL="\\"other.onnx\\""'])
    place_weights(os.path.dirname(other))
    before = tree_digest(c)
    expect_error(other, ["train", *data, "--steps", "60", "--resume-from", f"{c}/step-50"],
                 "of another model or plan", "another plan (--resume-from)")
    expect_error(other, ["train", *data, "--steps", "60", "--ckpt-dir", c, "--resume"],
                 "of another model or plan", "another plan (--resume)")
    check(tree_digest(c) == before, "foreign checkpoint directory untouched")
    return save


def test_init_weights(env, model, tmp, x, y):
    data = ["--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy"]
    good = f"{tmp}/true.safetensors"
    write_safetensors(good, {"fc.weight": np.array([1.0, 2.0, -1.0, 0.5], np.float32),
                             "fc.bias": np.array([0.3], np.float32)})
    m = f"{tmp}/init.jsonl"
    rc, out, err = run(model, "train", *data, "--steps", "2", "--metrics", m, "--init-weights", good)
    steps = metrics(m)[0] if rc == 0 else []
    check(rc == 0 and len(steps) == 2 and steps[0]["loss"] < 1e-10 and steps[0]["grad_norm"] < 1e-5,
          f"--init-weights with the true solution gives loss 0: {err} {steps}")
    bad = f"{tmp}/bad-init.safetensors"
    write_safetensors(bad, {"fc.weight": np.zeros(4, np.float32)})
    expect_error(model, ["train", *data, "--steps", "1", "--init-weights", bad], "no tensor 'fc.bias'",
                 "init: missing tensor")
    write_safetensors(bad, {"fc.weight": np.zeros(4, np.float32), "fc.bias": np.zeros(1, np.float32),
                            "extra": np.zeros(2, np.float32)})
    expect_error(model, ["train", *data, "--steps", "1", "--init-weights", bad],
                 "tensor 'extra' is not a param", "init: extra tensor")
    write_safetensors(bad, {"fc.weight": np.zeros(5, np.float32), "fc.bias": np.zeros(1, np.float32)})
    expect_error(model, ["train", *data, "--steps", "1", "--init-weights", bad],
                 "tensor 'fc.weight' is F32 [5], the program's param is F32 [4]", "init: wrong shape")
    write_safetensors(bad, {"fc.weight": np.zeros(4, np.float64), "fc.bias": np.zeros(1, np.float32)})
    expect_error(model, ["train", *data, "--steps", "1", "--init-weights", bad], "is F64 [4]",
                 "init: wrong dtype")
    write_safetensors(bad, {"fc.weight": np.zeros(4, np.float32), "fc.bias": np.zeros(1, np.float32),
                            "fc.weight.momentum_buffer": np.zeros(4, np.float32)})
    expect_error(model, ["train", *data, "--steps", "1", "--init-weights", bad],
                 "'fc.weight.momentum_buffer' is not a param", "init: optimizer state is not a param")


# ---------------------------------------------------------------------------
# --save-onnx: a hand-made ModelProto (protobuf wire format, as onnx.proto
# numbers its fields), and a decoder to check what the runtime wrote
# ---------------------------------------------------------------------------

def pb_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def pb_int(field, v):
    return pb_varint(field << 3) + pb_varint(v)


def pb_bytes(field, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return pb_varint(field << 3 | 2) + pb_varint(len(payload)) + payload


def pb_fields(raw):
    """[(field, wire, value or payload bytes, the field's own bytes)]."""
    out, i = [], 0
    while i < len(raw):
        start = i

        def varint():
            nonlocal i
            v, shift = 0, 0
            while True:
                b = raw[i]
                i += 1
                v |= (b & 0x7f) << shift
                shift += 7
                if not b & 0x80:
                    return v
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            val = varint()
        elif wire == 2:
            n = varint()
            val = raw[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire}")
        out.append((field, wire, val, raw[start:i]))
    return out


def onnx_tensor(name, dims, *, floats=None, external=None, packed_dims=False, doc=None):
    t = b""
    t += pb_bytes(1, b"".join(pb_varint(d) for d in dims)) if packed_dims else b"".join(
        pb_int(1, d) for d in dims)
    t += pb_int(2, 1)  # FLOAT
    if floats is not None:
        t += pb_bytes(4, np.asarray(floats, "<f4").tobytes())  # float_data, packed
    t += pb_bytes(8, name)
    if doc:
        t += pb_bytes(12, doc)
    if external:
        for k, v in external.items():
            t += pb_bytes(13, pb_bytes(1, k) + pb_bytes(2, v))
        t += pb_int(14, 1)  # data_location EXTERNAL
    return t


def onnx_model(initializers):
    node = pb_bytes(1, "x") + pb_bytes(1, "fc.weight") + pb_bytes(2, "y") + pb_bytes(3, "mm") + \
        pb_bytes(4, "MatMul")
    graph = pb_bytes(1, node) + pb_bytes(2, "g")
    for t in initializers:
        graph += pb_bytes(5, t)
    graph += pb_bytes(11, pb_bytes(1, "x")) + pb_bytes(12, pb_bytes(1, "y"))
    return (pb_int(1, 8) + pb_bytes(2, "train_test") + pb_bytes(7, graph) +
            pb_bytes(8, pb_bytes(1, "") + pb_int(2, 17)))


def test_save_onnx(env, model, tmp, x, y):
    data = ["--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy"]
    d = f"{tmp}/onnx"
    os.makedirs(d, exist_ok=True)
    # fc.bias and scale (not trained) live in ext.bin: 8 bytes of padding,
    # the bias, then scale's two floats.
    ext = b"\xee" * 8 + np.float32(B0).tobytes() + np.array([3.0, 4.0], "<f4").tobytes()
    open(f"{d}/ext.bin", "wb").write(ext)
    inits = [onnx_tensor("fc.weight", [4], floats=W0, doc="kept"),
             onnx_tensor("fc.bias", [1], packed_dims=True,
                         external={"location": "ext.bin", "offset": "8", "length": "4"}),
             onnx_tensor("scale", [2], external={"location": "ext.bin", "offset": "12", "length": "8"})]
    src = onnx_model(inits)
    open(f"{d}/model.onnx", "wb").write(src)
    out, save = f"{d}/trained.onnx", f"{d}/trained.safetensors"
    rc, o, err = run(model, "train", *data, "--steps", "5", "--save", save, "--save-onnx", out,
                     "--onnx", f"{d}/model.onnx")
    check(rc == 0 and f"saved: {out} ({d}/model.onnx with the trained parameters)" in o,
          f"--save-onnx run: {err} {o}")
    saved = read_safetensors(save)[0] if rc == 0 else {}
    w = saved.get("fc.weight", ("", np.zeros(4)))[1]
    b = saved.get("fc.bias", ("", np.zeros(1)))[1]
    check(np.allclose(w, replica(x, y, 5)[-1][2], rtol=1e-5, atol=1e-7), "--save-onnx: trained w")
    got = open(out, "rb").read() if os.path.exists(out) else b""
    src_fields, got_fields = pb_fields(src), pb_fields(got)
    check([f for f in src_fields if f[0] != 7] == [f for f in got_fields if f[0] != 7]
          and [f[0] for f in got_fields] == [f[0] for f in src_fields],
          "--save-onnx: the model's other fields unchanged, in order")
    graph = [f for f in got_fields if f[0] == 7][0][2] if got_fields else b""
    src_graph = [f for f in src_fields if f[0] == 7][0][2]
    check([f for f in pb_fields(graph) if f[0] != 5] == [f for f in pb_fields(src_graph) if f[0] != 5],
          "--save-onnx: the graph's other fields unchanged")
    tensors = [pb_fields(f[2]) for f in pb_fields(graph) if f[0] == 5]

    def fields(t, n):
        return [f[2] for f in t if f[0] == n]
    check(len(tensors) == 3 and [fields(t, 8) for t in tensors] == [[b"fc.weight"], [b"fc.bias"], [b"scale"]],
          f"--save-onnx: three initializers in order: {tensors}")
    if len(tensors) == 3:
        tw, tb, ts = tensors
        check(fields(tw, 1) == [4] and fields(tw, 2) == [1] and fields(tw, 12) == [b"kept"]
              and not fields(tw, 4) and fields(tw, 9) == [w.astype("<f4").tobytes()],
              f"--save-onnx: fc.weight keeps dims, type, doc; float_data -> trained raw_data: {tw}")
        check(fields(tb, 1) == [pb_varint(1)] and not fields(tb, 13) and not fields(tb, 14)
              and fields(tb, 9) == [b.astype("<f4").tobytes()],
              f"--save-onnx: external fc.bias -> trained raw_data: {tb}")
        check(not fields(ts, 13) and not fields(ts, 14) and fields(ts, 9) == [ext[12:20]],
              f"--save-onnx: untrained external scale inlined: {ts}")

    # Errors: one line, before training, nothing written.
    os.remove(out)
    no = f"{d}/no.onnx"
    expect_error(model, ["train", *data, "--steps", "1", "--save-onnx", no],
                 "records no source model (manifest model_path", "--save-onnx without model_path")
    expect_error(model, ["train", *data, "--steps", "1", "--save-onnx", no, "--onnx", f"{d}/none.onnx"],
                 "none.onnx: cannot open", "--save-onnx: missing source")
    open(f"{d}/nobias.onnx", "wb").write(onnx_model([inits[0]]))
    expect_error(model, ["train", *data, "--steps", "1", "--save-onnx", no, "--onnx", f"{d}/nobias.onnx"],
                 "nobias.onnx: no initializer 'fc.bias' (a trained parameter, f32 [1])",
                 "--save-onnx: a param without an initializer")
    open(f"{d}/shape.onnx", "wb").write(onnx_model([onnx_tensor("fc.weight", [5], floats=np.zeros(5)),
                                                    inits[1]]))
    expect_error(model, ["train", *data, "--steps", "1", "--save-onnx", no, "--onnx", f"{d}/shape.onnx"],
                 "initializer 'fc.weight' is f32 [5], the trained parameter is f32 [4]",
                 "--save-onnx: another shape")
    open(f"{d}/noext.onnx", "wb").write(onnx_model(
        [inits[0], inits[1], onnx_tensor("scale", [2], external={"location": "gone.bin"})]))
    expect_error(model, ["train", *data, "--steps", "1", "--save-onnx", no, "--onnx", f"{d}/noext.onnx"],
                 "gone.bin: cannot open the external data of initializer 'scale'",
                 "--save-onnx: missing external data")
    open(f"{d}/garbage.onnx", "wb").write(b"\x0a\xff\xff")
    expect_error(model, ["train", *data, "--steps", "1", "--save-onnx", no, "--onnx", f"{d}/garbage.onnx"],
                 "garbage.onnx: malformed ONNX model", "--save-onnx: not a model")
    expect_error(model, ["train", *data, "--steps", "1", "--onnx", f"{d}/model.onnx"],
                 "needs --save-onnx FILE.onnx", "--onnx without --save-onnx")
    check(not os.path.exists(no) and not os.path.exists(out), "--save-onnx errors write nothing")


def test_eval(env, model, tmp, x, y):
    rng = np.random.default_rng(7)
    xe = rng.standard_normal((12, 4)).astype(np.float32)
    ye = (xe @ np.array([1.0, 2.0, -1.0, 0.5], np.float32) + 0.3).astype(np.float32)
    np.save(f"{tmp}/xe.npy", xe)
    np.save(f"{tmp}/ye.npy", ye)
    m = f"{tmp}/eval.jsonl"
    rc, out, err = run(model, "train", "--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy",
                       "--eval-data", f"x={tmp}/xe.npy", "--eval-data", f"y={tmp}/ye.npy",
                       "--eval-every", "5", "--steps", "50", "--metrics", m)
    check(rc == 0, f"eval run: {err}")
    steps, _, loss = metrics(m)
    check(loss == metrics(f"{tmp}/basic.jsonl")[2], "evaluation leaves the training losses bitwise equal")
    check([s["step"] for s in steps if "eval_loss" in s] == list(range(5, 51, 5)), "eval every 5 steps")
    ref = replica(x, y, 50)
    for s in (5, 25, 50):
        w, b = ref[s - 1][2], ref[s - 1][3]
        want = float((((xe[:8] @ w + b) - ye[:8]) ** 2).mean())
        got = steps[s - 1]["eval_loss"]
        check(abs(got - want) <= 1e-4 * max(1, abs(want)), f"eval_loss at {s}: {got} vs {want}")
    m2 = f"{tmp}/eval2.jsonl"
    rc, out, err = run(model, "train", "--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy",
                       "--eval-data", f"x={tmp}/xe.npy", "--eval-data", f"y={tmp}/ye.npy",
                       "--eval-every", "10", "--eval-batches", "2", "--steps", "10", "--metrics", m2)
    w, b = ref[9][2], ref[9][3]
    idx = [i % 12 for i in range(16)]
    want = float(np.mean([(((xe[idx[k:k + 8]] @ w + b) - ye[idx[k:k + 8]]) ** 2).mean() for k in (0, 8)]))
    got = metrics(m2)[0][9].get("eval_loss") if rc == 0 else None
    check(got is not None and abs(got - want) <= 1e-4 * max(1, abs(want)),
          f"--eval-batches 2 (samples wrap): {got} vs {want} {err}")
    expect_error(model, ["train", "--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy", "--steps", "1",
                         "--eval-data", f"x={tmp}/xe.npy", "--eval-every", "1"],
                 "missing --eval-data for input 'y'", "eval data incomplete")


BAD_MANIFEST_PROGRAM = r'''
#include "hpcrt.h"
const char hpc_manifest[] = %s;
void hpc_program_run(hpcrt_ctx *ctx) { (void)ctx; }
'''


def base_manifest():
    return {
        "version": 1, "model": "bad.onnx", "arena_bytes": 64, "state_bytes": 128,
        "weights": {"file": "w.safetensors", "bytes": 64, "hash": "0" * 16},
        "inputs": [{"name": "x", "tensor": 0}, {"name": "hpc.lr", "tensor": 1},
                   {"name": "hpc.step", "tensor": 2}],
        "outputs": [{"name": "loss", "tensor": 5}],
        "tensors": [{"dtype": 1, "shape": [8, 2], "region": "input", "index": 0},
                    {"dtype": 1, "shape": [], "region": "input", "index": 1},
                    {"dtype": 7, "shape": [], "region": "input", "index": 2},
                    {"dtype": 1, "shape": [4], "region": "state", "offset": 0},
                    {"dtype": 1, "shape": [4], "region": "state", "offset": 64},
                    {"dtype": 1, "shape": [], "region": "arena", "offset": 0}],
        "state": [{"name": "w", "tensor": 3, "role": "param", "init": "weights", "weights_offset": 0},
                  {"name": "m", "tensor": 4, "role": "optimizer", "init": "zeros"}],
        "train": {"loss": "output", "batch": 8, "lr_input": "hpc.lr", "step_input": "hpc.step",
                  "loss_output": "loss", "optimizer": {"name": "sgd", "lr": 0.1}},
    }


def test_manifest_checks(env):
    def variant(mutate):
        m = base_manifest()
        mutate(m)
        return m
    cases = [
        ("valid", lambda m: None, None),
        ("unlisted", lambda m: m["state"].pop(), "tensors[4] is in the state but is neither listed"),
        ("view", lambda m: m["tensors"].append({"dtype": 1, "shape": [2, 2], "region": "state",
                                                "offset": 0}), None),
        ("twice", lambda m: m["state"].append(dict(m["state"][1], name="m2")), "tensors[4] is listed twice"),
        ("beyond", lambda m: m["tensors"][4].update(offset=120), "beyond state_bytes 128"),
        ("init", lambda m: m["state"][1].update(init="ones"), "unknown init 'ones'"),
        ("role", lambda m: m["state"][1].update(role="moment"), "unknown role 'moment'"),
        ("woff", lambda m: m["state"][0].update(weights_offset=56), "weights_offset 56 + 16 bytes"),
        ("nostatebytes", lambda m: m.pop("state_bytes"), "no \\\"state_bytes\\\""),
        ("overlap", lambda m: m["tensors"][4].update(offset=8), "overlap"),
        ("notstate", lambda m: m["state"][1].update(tensor=5), "not of region \\\"state\\\""),
        ("lrinput", lambda m: m["train"].update(lr_input="lr"), "train.lr_input 'lr' is not an input"),
        ("stepdtype", lambda m: m["tensors"][2].update(dtype=6), "train.step_input 'hpc.step' is i32 []"),
        ("batch", lambda m: m["train"].update(batch=0), "train.batch 0 is not positive"),
        ("schedule", lambda m: m["train"].update(lr_schedule={"kind": "step"}), "kind 'step'"),
    ]
    for name, mutate, needle in cases:
        text = json.dumps(json.dumps(variant(mutate)))
        exe = env.build(f"manifest-{name}", "program.c", source_text=BAD_MANIFEST_PROGRAM % text)
        rc, out, err = run(exe, "info")
        if needle is None:
            check(rc == 0 and "state: 128 bytes, 2 tensors" in out, f"valid manifest: {out} {err}")
            continue
        needle = needle.replace('\\"', '"')
        lines = err.strip().splitlines()
        check(rc == 1 and len(lines) == 1 and lines[0].startswith("model: error: manifest: ")
              and needle in lines[0], f"manifest check {name}: rc={rc} {err!r} (want {needle!r})")


def test_mpi(env, tmp, x, y):
    if not env.mpirun or not shutil.which(env.mpirun):
        print("note: mpirun not found; the data-parallel checks are skipped")
        return
    model = env.build("dp", "FakeTrainProgram.c", ["-DFAKE_TRAIN_DP"])
    place_weights(os.path.dirname(model))
    data = ["--data", f"x={tmp}/x.npy", "--data", f"y={tmp}/y.npy"]
    m, d, c = f"{tmp}/dp.jsonl", f"{tmp}/dp-dump", f"{tmp}/dp-ckpt"
    rc, out, err = run(model, "train", *data, "--steps", "30", "--metrics", m, "--dump-outputs", d,
                       "--dump-steps", "1", "--ckpt-dir", c, "--ckpt-every", "10", mpi=env)
    if not check(rc == 0, f"dp=2 run: rc={rc} {err}"):
        return
    steps, summary, loss = metrics(m)
    single = metrics(f"{tmp}/basic.jsonl")[0][:30]
    check([s["step"] for s in steps] == list(range(1, 31)) and summary["ranks"] == 2,
          "rank 0 alone writes the metrics")
    check(np.allclose([s["loss"] for s in steps], [s["loss"] for s in single], rtol=1e-4, atol=1e-6),
          "dp=2 losses agree with the single-rank run (each rank read its half of the batch)")
    check(np.array_equal(np.load(f"{d}/step-1/seen.x.npy"), x[:4]), "rank 0 holds rows 0..3 of step 1")
    man = json.load(open(f"{c}/step-30/manifest.json"))
    files = sorted(os.listdir(f"{c}/step-30"))
    check(files == ["manifest.json", "rank-0.safetensors", "rank-1.safetensors"]
          and [s["file"] for s in man["shards"]] == ["rank-0.safetensors", "rank-1.safetensors"]
          and all(s["bytes"] == os.path.getsize(f"{c}/step-30/{s['file']}") for s in man["shards"]),
          f"one shard per rank: {files} {man}")
    m2, c2 = f"{tmp}/dp-stop.jsonl", f"{tmp}/dp-ckpt-stop"
    rc, _, err = run(model, "train", *data, "--steps", "20", "--metrics", m2, "--ckpt-dir", c2,
                     "--ckpt-every", "10", mpi=env)
    rc2, _, err2 = run(model, "train", *data, "--steps", "30", "--metrics", m2, "--ckpt-dir", c2,
                       "--ckpt-every", "10", "--resume", mpi=env)
    check(rc == 0 and rc2 == 0 and metrics(m2)[2] == loss,
          f"dp=2 stop at 20 + --resume: bitwise equal losses {err} {err2}")
    rc, out, err = run(model, "train", *data, "--steps", "1", mpi=env, n=1)
    check(rc == 1 and "compiled for 2 ranks (mesh dp=2) but started with 1" in err, f"world size: {err}")
    bad = f"{tmp}/dp-bad"
    shutil.copytree(c, bad)
    flip_byte(f"{bad}/step-30/rank-1.safetensors")
    before = tree_digest(bad)
    rc, out, err = run(model, "train", *data, "--steps", "40", "--resume-from", f"{bad}/step-30", mpi=env)
    check(rc != 0 and "model: error: " in err and "rank-1.safetensors: checksum" in err
          and tree_digest(bad) == before, f"dp=2 corrupted shard of rank 1: rc={rc} {err!r}")


def main():
    cc, srcdir, include, link_txt = sys.argv[1:5]
    mpirun = sys.argv[5] if len(sys.argv) > 5 else ""
    keep = "--keep" in sys.argv
    tmp = tempfile.mkdtemp(prefix="hpcrt_train_")
    try:
        env = Env(cc, srcdir, include, open(link_txt).read().split(), mpirun, tmp)
        model = env.build("fake", "FakeTrainProgram.c")
        place_weights(os.path.dirname(model))
        rng = np.random.default_rng(0)
        x = rng.standard_normal((20, 4)).astype(np.float32)
        y = (x @ np.array([1.0, 2.0, -1.0, 0.5], np.float32) + np.float32(0.3)).astype(np.float32)
        np.save(f"{tmp}/x.npy", x)
        np.save(f"{tmp}/y.npy", y)
        test_info_and_refusals(env, model, tmp)
        ref = test_basic(env, model, tmp, x, y)
        test_data(env, model, tmp, x, y)
        test_tokens(env, tmp)
        test_checkpoints(env, model, tmp, x, y, ref)
        test_init_weights(env, model, tmp, x, y)
        test_save_onnx(env, model, tmp, x, y)
        test_eval(env, model, tmp, x, y)
        test_manifest_checks(env)
        test_mpi(env, tmp, x, y)
    finally:
        if keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all train checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
