#!/usr/bin/env python3
"""End-to-end test of a model executable: link FakeProgram.c with libhpcrt
exactly as hpcrt-link.txt says, then drive `./model run` and `./model info`:
outputs against numpy, the trace, the arena high-water mark, and every user
error (one line `model: error: ...` on stderr, exit status 1).

usage: cli_test.py CC FAKE_PROGRAM.c INCLUDE_DIR HPCRT_LINK_TXT
"""
import json
import os
import shutil
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


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def hash64(data: bytes) -> int:
    h, prime, mask = 0xcbf29ce484222325, 0x100000001b3, (1 << 64) - 1
    n = len(data)
    for i in range(0, n - n % 8, 8):
        h = ((h ^ int.from_bytes(data[i:i + 8], "little")) * prime) & mask
    if n % 8:
        tail = data[n - n % 8:] + b"\0" * (8 - n % 8)
        h = ((h ^ int.from_bytes(tail, "little")) * prime) & mask
    return h ^ n


def write_safetensors(path, data: bytes, meta_hash: str):
    header = json.dumps({"__metadata__": {"hpc_hash": meta_hash},
                         "w": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, len(data)]}})
    header += " " * ((-len(header)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header.encode())
        f.write(data)


def tensor_proto(arr: np.ndarray) -> bytes:
    """A TensorProto with dims, data_type and raw_data."""
    def varint(v):
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7f) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)
    codes = {np.dtype("float32"): 1, np.dtype("int64"): 7}
    msg = b""
    for d in arr.shape:
        msg += varint(1 << 3) + varint(d)
    msg += varint(2 << 3) + varint(codes[arr.dtype])
    raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
    msg += varint((9 << 3) | 2) + varint(len(raw)) + raw
    return msg


def run(model, *args):
    p = subprocess.run([model, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def expect_error(model, args, needle, what):
    rc, out, err = run(model, *args)
    lines = err.strip().splitlines()
    ok = rc == 1 and len(lines) == 1 and lines[0].startswith("model: error: ") and needle in lines[0]
    check(ok, f"{what}: rc={rc} stderr={err!r} (want one line with {needle!r})")


def main():
    cc, fake, include, link_txt = sys.argv[1:5]
    tmp = tempfile.mkdtemp(prefix="hpcrt_cli_")
    try:
        model = os.path.join(tmp, "model")
        obj = os.path.join(tmp, "program.o")
        subprocess.run([cc, "-c", "-O1", "-I", include, fake, "-o", obj], check=True)
        link = open(link_txt).read().split()
        subprocess.run([cc, obj, *link, "-o", model], check=True)

        w = (np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 2).astype("<f4")
        whash = "%016x" % hash64(w.tobytes())
        write_safetensors(os.path.join(tmp, "model.safetensors"), w.tobytes(), whash)

        rc, out, err = run(model, "info")
        check(rc == 0 and "input  x: f32 [2, 3]" in out and "output best: i64 [2]" in out
              and "arena: 160 bytes" in out and whash in out, f"info: {out!r} {err!r}")

        x = np.array([[1, -2, 0.5], [3, 0, -1]], dtype=np.float32)
        y = np.array([0.25, 1, -0.5], dtype=np.float32)
        idx = np.array([2, -3], dtype=np.int64)
        np.save(os.path.join(tmp, "x.npy"), x)
        np.save(os.path.join(tmp, "y.npy"), y)
        with open(os.path.join(tmp, "idx.pb"), "wb") as f:
            f.write(tensor_proto(idx))
        ins = ["--input", f"x={tmp}/x.npy", "--input", f"y={tmp}/y.npy",
               "--input", f"idx={tmp}/idx.pb"]
        outdir = os.path.join(tmp, "out")
        trace = os.path.join(tmp, "trace.json")
        rc, out, err = run(model, "run", *ins, "--output-dir", outdir, "--iters", "3",
                           "--threads", "2", "--trace", trace, "--verbose")
        check(rc == 0, f"run failed: {err}")
        z = (x + y) @ w
        probs = np.exp(z - z.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        got = np.load(os.path.join(outdir, "probs.npy"))
        check(got.dtype == np.float32 and got.shape == (2, 4) and np.allclose(got, probs, rtol=1e-5, atol=1e-6),
              f"probs {got} vs {probs}")
        rows = np.load(os.path.join(outdir, "rows_gathered.npy"))
        check(np.array_equal(rows, w[idx]), f"rows {rows}")
        best = np.load(os.path.join(outdir, "best.npy"))
        check(best.dtype == np.int64 and np.array_equal(best, z.argmax(1)), f"best {best}")
        check("probs: f32 [2, 4] mean=0.25" in out, f"summary line: {out!r}")
        check("time: " in out and "mean of 3 runs" in out, f"time line: {out!r}")
        check("arena: planned 160 bytes, high-water 160 bytes" in out, f"high-water: {out!r}")
        events = json.load(open(trace))["traceEvents"]
        check(len(events) == 15 and all(e["ph"] == "X" for e in events)
              and [e["name"] for e in events[:5]] == ["hpc.add", "hpc.matmul", "hpc.softmax",
                                                       "hpc.gather", "hpc.argmax"]
              and events[1]["args"]["loc"] == "MatMul_1", f"trace: {events[:2]}")

        # --weights elsewhere; same results.
        other = os.path.join(tmp, "elsewhere.safetensors")
        shutil.copy(os.path.join(tmp, "model.safetensors"), other)
        rc, out, err = run(model, "run", *ins, "--output-dir", outdir, "--weights", other)
        check(rc == 0, f"--weights: {err}")

        # User errors: one line, exit 1.
        expect_error(model, ["run", *ins[:4], "--output-dir", outdir], "missing input 'idx'", "missing input")
        expect_error(model, ["run", *ins, "--input", f"z={tmp}/x.npy", "--output-dir", outdir],
                     "unknown input 'z'", "unknown input")
        np.save(os.path.join(tmp, "x32.npy"), x.T.copy())
        expect_error(model, ["run", "--input", f"x={tmp}/x32.npy", *ins[2:], "--output-dir", outdir],
                     "expected f32 [2, 3], got f32 [3, 2]", "wrong shape")
        np.save(os.path.join(tmp, "y64.npy"), y.astype(np.float64))
        expect_error(model, ["run", ins[0], ins[1], "--input", f"y={tmp}/y64.npy", *ins[4:],
                             "--output-dir", outdir], "expected f32 [3], got f64 [3]", "wrong dtype")
        with open(os.path.join(tmp, "bad.npy"), "wb") as f:
            f.write(b"\x93NUMPY garbage")
        expect_error(model, ["run", "--input", f"x={tmp}/bad.npy", *ins[2:], "--output-dir", outdir],
                     "bad.npy", "malformed npy")
        with open(os.path.join(tmp, "bad.pb"), "wb") as f:
            f.write(b"\x0a\xff")
        expect_error(model, ["run", *ins[:4], "--input", f"idx={tmp}/bad.pb", "--output-dir", outdir],
                     "bad.pb: malformed TensorProto", "malformed pb")
        expect_error(model, ["run", "--input", f"x={tmp}/nope.npy", *ins[2:], "--output-dir", outdir],
                     "nope.npy: cannot open", "missing input file")
        expect_error(model, ["run", *ins], "missing --output-dir", "missing output dir")
        expect_error(model, ["run", *ins, "--output-dir", outdir, "--bogus"], "unknown option '--bogus'",
                     "unknown option")
        expect_error(model, ["run", *ins, "--output-dir", outdir, "--iters", "0"], "positive integer",
                     "bad iters")
        expect_error(model, ["run", *ins, "--output-dir", outdir, "--warmup", "-1"],
                     "--warmup needs a non-negative integer, got '-1'", "bad warmup")
        # Warm-up runs are run (and traced) but not timed.
        rc, out, err = run(model, "run", *ins, "--output-dir", outdir, "--iters", "2",
                           "--warmup", "1", "--trace", trace)
        check(rc == 0 and "mean of 2 runs" in out, f"warm-up run: {out!r} {err!r}")
        events = json.load(open(trace))["traceEvents"]
        check(len(events) == 15 and {e["args"]["run"] for e in events} == {1, 2, 3},
              f"warm-up trace: {len(events)} events")
        expect_error(model, [], "missing command", "no command")
        expect_error(model, ["frobnicate"], "unknown command", "bad command")
        np.save(os.path.join(tmp, "badidx.npy"), np.array([0, 5], dtype=np.int64))
        expect_error(model, ["run", *ins[:4], "--input", f"idx={tmp}/badidx.npy", "--output-dir", outdir],
                     "op 3 (hpc.gather at 'Gather_3'): gather: index 5 is out of range", "gather range")
        expect_error(model, ["run", *ins, "--output-dir", outdir, "--weights", f"{tmp}/none.safetensors"],
                     "none.safetensors: cannot open", "missing --weights file")
        w2 = w.copy()
        w2[0, 0] += 1
        write_safetensors(other, w2.tobytes(), whash)
        expect_error(model, ["run", *ins, "--output-dir", outdir, "--weights", other],
                     "data hash", "tampered weights")
        write_safetensors(other, w.tobytes(), "0" * 16)
        expect_error(model, ["run", *ins, "--output-dir", outdir, "--weights", other],
                     "hpc_hash 0000000000000000 does not match", "metadata hash")
        os.remove(os.path.join(tmp, "model.safetensors"))
        expect_error(model, ["run", *ins, "--output-dir", outdir], "model.safetensors: cannot open",
                     "missing weights next to the executable")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all CLI checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
