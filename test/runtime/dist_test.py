#!/usr/bin/env python3
"""Multi-rank test of the dist kernels and of the mesh process model.

Writes stand-in programs (C, like FakeProgram.c: a manifest with a "mesh" and
an hpc_program_run that calls hpcrt_all_reduce, hpcrt_all_gather, ...),
links each with libhpcrt exactly as hpcrt-link.txt says, runs it under
`mpirun -n 2` / `-n 4` and checks rank 0's outputs against a numpy model of
every rank (the semantics in hpcrt.h, "Collectives"). Every result is
all_gather-ed over the whole mesh before it becomes an output, so rank 0's
files show what each rank computed. Also checks the bytes each rank counts
(`--verbose`), the wrong world size, errors on one rank only, `info`, and the
merged trace.

usage: dist_test.py CC INCLUDE_DIR HPCRT_LINK_TXT MPIRUN [--keep]
Exit 77 (skipped) when numpy or mpirun is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

FAILURES = []
TIMEOUT = 120

DTYPES = {  # name: (code, numpy storage dtype, element bytes)
    "f32": (1, np.float32, 4), "f64": (11, np.float64, 8), "f16": (10, np.float16, 2),
    "bf16": (16, np.uint16, 2), "i32": (6, np.int32, 4), "i64": (7, np.int64, 8),
    "i8": (3, np.int8, 1), "u8": (2, np.uint8, 1), "bool": (9, np.bool_, 1),
}
SUM, MAX, MIN, PROD, AVG = range(5)
# A reduction's ranks_per_node: 0 runs the flat rings (hpcrt.h).
FLAT = 0


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)
    return cond


# ---------------------------------------------------------------------------
# bf16 <-> float (round to nearest even), as the runtime does
# ---------------------------------------------------------------------------

def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return (u >> 16).astype(np.uint16)


# ---------------------------------------------------------------------------
# A stand-in program: tensor table, ops, C source
# ---------------------------------------------------------------------------

class Program:
    def __init__(self, mesh):
        self.mesh = mesh  # [(name, size)]
        self.tensors = []  # dicts for the manifest
        self.info = []  # (dtype name, shape)
        self.inputs, self.outputs, self.ops = [], [], []
        self.arena = 0
        self.bytes_per_rank = None

    def axis(self, name):
        return [n for n, _ in self.mesh].index(name)

    def _add(self, dt, shape, entry):
        self.tensors.append(dict(dtype=DTYPES[dt][0], shape=list(shape), **entry))
        self.info.append((dt, tuple(shape)))
        return len(self.tensors) - 1

    def input(self, name, dt, shape):
        t = self._add(dt, shape, dict(region="input", index=len(self.inputs)))
        self.inputs.append((name, t))
        return t

    def tensor(self, dt, shape):
        off = self.arena
        nbytes = int(np.prod(shape, dtype=np.int64)) * DTYPES[dt][2]
        self.arena += (nbytes + 63) // 64 * 64
        return self._add(dt, shape, dict(region="arena", offset=off))

    def op(self, name, results, operands, iattrs, **meta):
        self.ops.append(dict(name=name, results=results, operands=operands, iattrs=iattrs, **meta))

    def output(self, name, t):
        self.outputs.append((name, t))

    def manifest(self):
        m = {"version": 1, "model": "dist_test.onnx", "arena_bytes": self.arena,
             "inputs": [{"name": n, "tensor": t} for n, t in self.inputs],
             "outputs": [{"name": n, "tensor": t} for n, t in self.outputs],
             "tensors": self.tensors,
             "ops": [{"name": o["name"], "loc": f"{o['name']}_{i}"} for i, o in enumerate(self.ops)]}
        if self.mesh:
            m["mesh"] = {"axes": [{"name": n, "size": s, "level": "intra_node"} for n, s in self.mesh]}
        if self.bytes_per_rank is not None:
            m["bytes_per_rank"] = self.bytes_per_rank
        return json.dumps(m)

    def c_source(self):
        kernels = sorted({o["name"].split(".", 1)[1] for o in self.ops})
        lines = ['#include "hpcrt.h"']
        for k in kernels:
            lines.append(f"void hpcrt_{k}(hpcrt_ctx *, int32_t, const int32_t *, const int64_t *,"
                         " const double *, const char *const *);")
        lines.append("const char hpc_manifest[] = " + json.dumps(self.manifest()) + ";")
        lines.append("void hpc_program_run(hpcrt_ctx *ctx) {")
        for i, o in enumerate(self.ops):
            ids = [len(o["results"]), *o["results"], len(o["operands"]), *o["operands"]]
            ia = o["iattrs"] or [0]
            lines.append(f"  {{ static const int32_t ids[] = {{{', '.join(map(str, ids))}}};")
            lines.append(f"    static const int64_t ia[] = {{{', '.join(map(str, ia))}}};")
            lines.append(f"    hpcrt_{o['name'].split('.', 1)[1]}(ctx, {i}, ids, ia, 0, 0); }}")
        lines.append("}")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# The numpy model of every rank
# ---------------------------------------------------------------------------

def sizes_of(mesh):
    return [s for _, s in mesh]


def coords_of(mesh, r):
    return list(np.unravel_index(r, sizes_of(mesh))) if mesh else []


def group(mesh, r, axes):
    """(members by group index, this rank's group index)."""
    sizes = sizes_of(mesh)
    c = coords_of(mesh, r)
    gs = [sizes[a] for a in axes]
    members = []
    for j in range(int(np.prod(gs, dtype=np.int64))):
        cc = list(c)
        for a, v in zip(axes, np.unravel_index(j, gs) if axes else []):
            cc[a] = int(v)
        members.append(int(np.ravel_multi_index(cc, sizes)))
    index = int(np.ravel_multi_index([c[a] for a in axes], gs)) if axes else 0
    return members, index


def reduce_values(values, kind, dt):
    """Reduces the members' arrays (all exactly representable test data)."""
    if dt == "bool":
        stack = np.stack(values)
        return stack.any(0) if kind in (SUM, MAX) else stack.all(0)
    if dt == "bf16":
        vals = [bf16_to_f32(v) for v in values]
    else:
        vals = [v.astype(np.float64) if dt in ("f32", "f16") else v for v in values]
    stack = np.stack(vals)
    g = len(values)
    if kind in (SUM, AVG):
        acc = stack.astype(np.int64).sum(0) if dt not in ("f32", "f64", "f16", "bf16") else stack.sum(0)
        if kind == AVG:
            acc = np.trunc(acc / g).astype(acc.dtype) if acc.dtype.kind == "i" else acc / g
    elif kind == MAX:
        acc = stack.max(0)
    elif kind == MIN:
        acc = stack.min(0)
    else:
        acc = stack.astype(np.int64).prod(0) if dt not in ("f32", "f64", "f16", "bf16") else stack.prod(0)
    if dt == "bf16":
        return f32_to_bf16(acc.astype(np.float32))
    return acc.astype(DTYPES[dt][1])


def chunk_bytes_all_reduce(n, g, r, esize):
    chunk = lambda i: n // g + (1 if i < n % g else 0)
    return sum(chunk((r - s) % g) + chunk((r - s + 1) % g) for s in range(g - 1)) * esize


def simulate(prog, inputs):
    """Returns (state per rank, [bytes sent per rank], [operations per rank])."""
    n = int(np.prod(sizes_of(prog.mesh), dtype=np.int64)) if prog.mesh else 1
    state = [dict() for _ in range(n)]
    for r in range(n):
        for (name, t) in prog.inputs:
            state[r][t] = inputs[name]
    sent = [0] * n
    count = [0] * n
    mailbox = {}
    for o in prog.ops:
        kind = o["name"]
        for r in range(n):
            ia = list(o["iattrs"])
            if kind in ("dist.send", "dist.recv"):
                axis, offset = ia
                c = coords_of(prog.mesh, r)
                pc = c[axis] + offset
                if not 0 <= pc < prog.mesh[axis][1]:
                    if kind == "dist.recv":
                        dt, shape = prog.info[o["results"][0]]
                        state[r][o["results"][0]] = np.zeros(shape, DTYPES[dt][1])
                    continue
                cc = list(c)
                cc[axis] = pc
                peer = int(np.ravel_multi_index(cc, sizes_of(prog.mesh)))
                count[r] += 1
                if kind == "dist.send":
                    x = state[r][o["operands"][0]]
                    mailbox.setdefault((r, peer), []).append(x.copy())
                    sent[r] += x.nbytes
                else:
                    state[r][o["results"][0]] = mailbox[(peer, r)].pop(0)
                continue
            if not kind.startswith("dist."):
                continue  # hpc ops are not modelled (error tests only)
            nax = ia[0]
            axes, rest = ia[1:1 + nax], ia[1 + nax:]
            members, idx = group(prog.mesh, r, axes)
            g = len(members)
            src = o["operands"][0]
            x = state[r][src]
            dt = prog.info[src][0]
            out = o["results"][0]
            if kind == "dist.all_reduce":
                y = reduce_values([state[m][src] for m in members], rest[1], dt)
                sent[r] += chunk_bytes_all_reduce(x.size, g, idx, x.itemsize)
            elif kind == "dist.reduce_scatter":
                dim, _, red = rest
                full = reduce_values([state[m][src] for m in members], red, dt)
                y = np.split(full, g, axis=dim)[idx]
                sent[r] += (g - 1) * y.nbytes
            elif kind == "dist.all_gather":
                y = np.concatenate([state[m][src] for m in members], axis=rest[0])
                sent[r] += (g - 1) * x.nbytes
            elif kind == "dist.all_to_all":
                concat_dim, split_dim = rest
                y = np.concatenate([np.split(state[m][src], g, axis=split_dim)[idx] for m in members],
                                   axis=concat_dim)
                sent[r] += (g - 1) * x.nbytes // g
            elif kind == "dist.broadcast":
                root = rest[0]
                y = state[members[root]][src].copy()
                if g > 1 and (idx - root) % g != g - 1:
                    sent[r] += x.nbytes
            elif kind == "dist.all_slice":
                y = np.split(x, g, axis=rest[0])[idx].copy()
            else:
                raise ValueError(kind)
            if kind != "dist.all_slice":
                count[r] += 1
            state[r][("new", out)] = np.ascontiguousarray(y)
        for r in range(n):
            for k in [k for k in state[r] if isinstance(k, tuple)]:
                state[r][k[1]] = state[r].pop(k)
    return state, sent, count


# ---------------------------------------------------------------------------
# Building, running
# ---------------------------------------------------------------------------

class Env:
    def __init__(self, cc, include, link, mpirun, tmp):
        self.cc, self.include, self.link, self.mpirun, self.tmp = cc, include, link, mpirun, tmp
        self.count = 0

    def build(self, prog, name):
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        src = os.path.join(d, "program.c")
        with open(src, "w") as f:
            f.write(prog.c_source())
        obj = os.path.join(d, "program.o")
        exe = os.path.join(d, "model")
        subprocess.run([self.cc, "-c", "-O0", "-I", self.include, src, "-o", obj], check=True)
        subprocess.run([self.cc, obj, *self.link, "-o", exe], check=True)
        return d, exe

    def mpi(self, n, exe, *args, extra_env=None):
        # A session directory of its own: another mpirun (lit's) may run at
        # the same time (see test/mpirun-private.sh).
        env = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
                   OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_orte_tmpdir_base=self.tmp)
        if extra_env:
            env.update(extra_env)
        cmd = [self.mpirun, "--allow-run-as-root", "--oversubscribe", "-n", str(n), exe, *args]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
        except subprocess.TimeoutExpired:
            return 124, "", f"timed out after {TIMEOUT}s: {' '.join(cmd)}"
        return p.returncode, p.stdout, p.stderr


def save_input(path, dt, arr):
    if dt == "bf16":
        np.save(path, arr.astype(np.uint16).view("V2"))
    else:
        np.save(path, arr.astype(DTYPES[dt][1]))


def load_output(path, dt):
    a = np.load(path)
    if dt == "bf16":
        return a.view(np.uint16)
    return a


def test_data(dt, shape, rng):
    """Small integers: every sum, product (of up to 4 ranks) and power-of-2
    average is exact in every dtype."""
    if dt == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dt == "u8":
        return rng.integers(0, 3, shape).astype(np.uint8)
    v = rng.integers(-2, 3, shape)
    if dt == "bf16":
        return f32_to_bf16(v.astype(np.float32))
    return v.astype(DTYPES[dt][1])


def run_and_compare(env, prog, name, inputs, ranks, verbose_check=True):
    """Builds, runs under mpirun -n ranks, compares every output with the model."""
    d, exe = env.build(prog, name)
    args = []
    for (iname, t) in prog.inputs:
        p = os.path.join(d, iname + ".npy")
        save_input(p, prog.info[t][0], inputs[iname])
        args += ["--input", f"{iname}={p}"]
    outdir = os.path.join(d, "out")
    rc, out, err = env.mpi(ranks, exe, "run", *args, "--output-dir", outdir, "--verbose")
    if not check(rc == 0, f"{name}: rc={rc}\nstdout={out}\nstderr={err}"):
        return None
    state, sent, count = simulate(prog, inputs)
    for (oname, t) in prog.outputs:
        dt = prog.info[t][0]
        got = load_output(os.path.join(outdir, oname + ".npy"), dt)
        want = state[0][t]
        check(got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got, want),
              f"{name}: output {oname} ({dt}) differs:\n got {got.ravel()[:24]}\nwant {want.ravel()[:24]}")
    if verbose_check:
        for r in range(ranks):
            line = f"comm: rank {r} sent {sent[r]} bytes in {count[r]} collectives per run"
            check(line in out, f"{name}: want '{line}' in\n{out}")
        if prog.bytes_per_rank is not None:
            check(f"comm: the compiler planned {prog.bytes_per_rank} bytes per rank per run\n" in out,
                  f"{name}: planned bytes line missing or differs:\n{out}")
    # Rank 0 alone prints.
    check(out.count("time: ") == 1, f"{name}: one time line expected:\n{out}")
    env.count += 1
    return out


# ---------------------------------------------------------------------------
# The programs
# ---------------------------------------------------------------------------

def collectives_program(mesh, dt, axes_lists, reductions):
    """x [R*2, 4, 6] whole on every rank; a = this rank's [2, 4, 6] piece; then
    every collective over every axes list; each result gathered over the
    whole mesh (dim 0) as an output."""
    p = Program(mesh)
    R = int(np.prod(sizes_of(mesh)))
    everything = list(range(len(mesh)))
    x = p.input("x", dt, (R * 2, 4, 6))
    a = p.tensor(dt, (2, 4, 6))
    p.op("dist.all_slice", [a], [x], [len(everything), *everything, 0])

    def out(t, label):
        dtn, shape = p.info[t]
        y = p.tensor(dtn, (shape[0] * R, *shape[1:]))
        p.op("dist.all_gather", [y], [t], [len(everything), *everything, 0])
        p.output(label, y)

    out(a, "a")
    for axes in axes_lists:
        g = int(np.prod([mesh[i][1] for i in axes]))
        tag = "_".join(mesh[i][0] for i in axes)
        ax = [len(axes), *axes]
        for red in reductions:
            t = p.tensor(dt, (2, 4, 6))
            p.op("dist.all_reduce", [t], [a], [*ax, FLAT, red])
            out(t, f"ar{red}_{tag}")
        t = p.tensor(dt, (2, 4 // g, 6))
        p.op("dist.reduce_scatter", [t], [a], [*ax, 1, FLAT, reductions[0]])
        out(t, f"rs1_{tag}")
        if 2 % g == 0:
            t = p.tensor(dt, (2 // g, 4, 6))
            p.op("dist.reduce_scatter", [t], [a], [*ax, 0, FLAT, reductions[-1]])
            out(t, f"rs0_{tag}")
        for dim in (0, 1, 2):
            shape = [2, 4, 6]
            shape[dim] *= g
            t = p.tensor(dt, tuple(shape))
            p.op("dist.all_gather", [t], [a], [*ax, dim])
            out(t, f"ag{dim}_{tag}")
        pairs = [(1, 2), (1, 0), (1, 1)] + ([(2, 1)] if 6 % g == 0 else [])
        for split, concat in pairs:
            shape = [2, 4, 6]
            shape[split] //= g
            shape[concat] *= g
            t = p.tensor(dt, tuple(shape))
            p.op("dist.all_to_all", [t], [a], [*ax, concat, split])
            out(t, f"a2a{split}{concat}_{tag}")
        for root in sorted({0, g - 1}):
            t = p.tensor(dt, (2, 4, 6))
            p.op("dist.broadcast", [t], [a], [*ax, root])
            out(t, f"bc{root}_{tag}")
        t = p.tensor(dt, (2, 4 // g, 6))
        p.op("dist.all_slice", [t], [a], [*ax, 1])
        out(t, f"sl_{tag}")
    return p


def axes_lists_of(mesh):
    k = len(mesh)
    lists = [[i] for i in range(k)]
    if k > 1:
        lists.append(list(range(k)))
        lists.append(list(reversed(range(k))))
    return lists


def test_collectives(env, rng):
    meshes = {
        "dp2": [("dp", 2)],
        "tp4": [("tp", 4)],
        "dp2tp2": [("dp", 2), ("tp", 2)],
    }
    plan = [
        ("dp2", ["f32", "i64", "bf16", "bool"]),
        ("tp4", ["f32", "f16", "i32", "u8"]),
        ("dp2tp2", ["f32", "f64", "bf16", "i8"]),
    ]
    for mname, dts in plan:
        mesh = meshes[mname]
        R = int(np.prod(sizes_of(mesh)))
        for dt in dts:
            reductions = [SUM, MAX, MIN, PROD] if dt == "bool" else [SUM, MAX, MIN, PROD, AVG]
            prog = collectives_program(mesh, dt, axes_lists_of(mesh), reductions)
            x = test_data(dt, (R * 2, 4, 6), rng)
            run_and_compare(env, prog, f"coll_{mname}_{dt}", {"x": x}, R)


def test_uneven_and_bytes(env, rng):
    """all_reduce of 7 and 0 elements over 4 ranks (chunks 2,2,2,1): every
    rank sends a different count; the compiler's bytes_per_rank line."""
    mesh = [("dp", 2), ("tp", 2)]
    p = Program(mesh)
    both = [2, 0, 1]
    x = p.input("x", "f32", (4 * 7,))
    a = p.tensor("f32", (7,))
    p.op("dist.all_slice", [a], [x], [*both, 0])
    s = p.tensor("f32", (7,))
    p.op("dist.all_reduce", [s], [a], [*both, FLAT, SUM])
    g = p.tensor("f32", (28,))
    p.op("dist.all_gather", [g], [s], [*both, 0])
    p.output("sum", g)
    e = p.input("e", "f32", (0, 3))
    es = p.tensor("f32", (0, 3))
    p.op("dist.all_reduce", [es], [e], [*both, FLAT, SUM])
    p.output("empty", es)
    # Rank 0: 2+2+2 (reduce-scatter) + 2+1+2 (all-gather) chunks... as simulated.
    _, sent, _ = simulate(p, {"x": np.zeros(28, np.float32), "e": np.zeros((0, 3), np.float32)})
    p.bytes_per_rank = sent[0]
    xs = rng.integers(-9, 9, 28).astype(np.float32)
    run_and_compare(env, p, "uneven", {"x": xs, "e": np.zeros((0, 3), np.float32)}, 4)
    check(len(set(sent)) > 1, f"uneven: ranks should send different counts, model says {sent}")


def test_large(env, rng):
    """Tensors beyond the broadcast segment (256 KiB): several segments
    through the chain, and a ring all_reduce of 200003 elements."""
    mesh = [("dp", 2), ("tp", 2)]
    p = Program(mesh)
    both = [2, 0, 1]
    n = 200003
    x = p.input("x", "f32", (4, n))
    a = p.tensor("f32", (1, n))
    p.op("dist.all_slice", [a], [x], [*both, 0])
    for label, opname, ia in (("bc", "dist.broadcast", [*both, 2]),
                              ("bc_tp", "dist.broadcast", [1, 1, 1]),
                              ("ar", "dist.all_reduce", [*both, FLAT, SUM])):
        t = p.tensor("f32", (1, n))
        p.op(opname, [t], [a], ia)
        g = p.tensor("f32", (4, n))
        p.op("dist.all_gather", [g], [t], [*both, 0])
        p.output(label, g)
    run_and_compare(env, p, "large", {"x": rng.integers(-50, 50, (4, n)).astype(np.float32)}, 4)


def test_bitwise_identical(env, rng):
    """Random floats: every rank's all_reduce result is bitwise the same, and
    close to numpy's sum (the ring sums in another order)."""
    mesh = [("dp", 2), ("tp", 2)]
    p = Program(mesh)
    both = [2, 0, 1]
    n = 1000
    x = p.input("x", "f32", (4, n))
    a = p.tensor("f32", (1, n))
    p.op("dist.all_slice", [a], [x], [*both, 0])
    outs = {}
    for label, red, dt in (("sum", SUM, "f32"), ("avg", AVG, "f32")):
        s = p.tensor(dt, (1, n))
        p.op("dist.all_reduce", [s], [a], [*both, FLAT, red])
        g = p.tensor(dt, (4, n))
        p.op("dist.all_gather", [g], [s], [*both, 0])
        p.output(label, g)
    d, exe = env.build(p, "bitwise")
    xs = rng.standard_normal((4, n)).astype(np.float32)
    np.save(os.path.join(d, "x.npy"), xs)
    rc, out, err = env.mpi(4, exe, "run", "--input", f"x={d}/x.npy", "--output-dir", f"{d}/out")
    if not check(rc == 0, f"bitwise: rc={rc} {err}"):
        return
    for label, want in (("sum", xs.astype(np.float64).sum(0)), ("avg", xs.astype(np.float64).mean(0))):
        got = np.load(f"{d}/out/{label}.npy")
        same = all(np.array_equal(got[0].view(np.uint32), got[r].view(np.uint32)) for r in range(4))
        check(same, f"bitwise {label}: ranks differ")
        check(np.allclose(got[0], want, rtol=1e-5, atol=1e-5), f"bitwise {label}: far from numpy")


def test_send_recv(env, rng):
    """send along tp +1 / recv from tp -1 (the first stage receives zeros),
    and along dp -1 / from dp +1; a rank sends before it receives."""
    mesh = [("dp", 2), ("tp", 2)]
    p = Program(mesh)
    both = [2, 0, 1]
    x = p.input("x", "i32", (4, 3))
    a = p.tensor("i32", (1, 3))
    p.op("dist.all_slice", [a], [x], [*both, 0])
    p.op("dist.send", [], [a], [1, 1])
    p.op("dist.send", [], [a], [0, -1])
    r1 = p.tensor("i32", (1, 3))
    p.op("dist.recv", [r1], [], [1, -1])
    r2 = p.tensor("i32", (1, 3))
    p.op("dist.recv", [r2], [], [0, 1])
    for label, t in (("from_tp_prev", r1), ("from_dp_next", r2)):
        g = p.tensor("i32", (4, 3))
        p.op("dist.all_gather", [g], [t], [*both, 0])
        p.output(label, g)
    run_and_compare(env, p, "sendrecv", {"x": np.arange(12, dtype=np.int32).reshape(4, 3) + 1}, 4)


def test_errors(env, rng):
    mesh = [("dp", 2), ("tp", 2)]
    both = [2, 0, 1]
    # A valid 4-rank program for the world-size checks, info and trace.
    p = Program(mesh)
    x = p.input("x", "f32", (4, 2))
    s = p.tensor("f32", (4, 2))
    p.op("dist.all_reduce", [s], [x], [*both, FLAT, SUM])
    p.output("s", s)
    d, exe = env.build(p, "ok4")
    np.save(f"{d}/x.npy", np.ones((4, 2), np.float32))
    run = ["run", "--input", f"x={d}/x.npy", "--output-dir", f"{d}/out"]
    want = "model: error: compiled for 4 ranks (mesh dp=2, tp=2) but started with 2; run it with mpirun -n 4"
    rc, out, err = env.mpi(2, exe, *run)
    ours = [l for l in err.splitlines() if l.startswith("model:")]
    check(rc == 1 and ours == [want], f"world size 2: rc={rc} stderr={err!r}")
    # Without mpirun (a singleton MPI process).
    try:
        pr = subprocess.run([exe, *run], capture_output=True, text=True, timeout=TIMEOUT,
                            env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                     OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
        ours = [l for l in pr.stderr.splitlines() if l.startswith("model:")]
        check(pr.returncode == 1 and ours == [want.replace("started with 2", "started with 1")],
              f"no mpirun: rc={pr.returncode} stderr={pr.stderr!r}")
    except subprocess.TimeoutExpired:
        check(False, "no mpirun: timed out")
    # info: no MPI needed.
    pr = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=TIMEOUT)
    check(pr.returncode == 0 and "mesh: dp=2 (intra_node), tp=2 (intra_node); 4 ranks" in pr.stdout,
          f"info: {pr.stdout!r} {pr.stderr!r}")
    # The merged trace: one process per rank.
    rc, out, err = env.mpi(4, exe, *run, "--trace", f"{d}/trace.json", "--iters", "2")
    if check(rc == 0, f"trace run: {err}"):
        ev = json.load(open(f"{d}/trace.json"))["traceEvents"]
        check(sorted({e["pid"] for e in ev}) == [0, 1, 2, 3] and len(ev) == 8
              and all(e["name"] == "dist.all_reduce" for e in ev), f"trace: {ev[:3]}")
    # A user error every rank meets (missing input): one line.
    rc, out, err = env.mpi(4, exe, "run", "--output-dir", f"{d}/out")
    ours = [l for l in err.splitlines() if l.startswith("model:")]
    check(rc == 1 and len(ours) == 1 and "missing input 'x'" in ours[0],
          f"missing input: rc={rc} stderr={err!r}")
    rc, out, err = env.mpi(4, exe, "run", "--input", f"x={d}/nope.npy", "--output-dir", f"{d}/out")
    ours = [l for l in err.splitlines() if l.startswith("model:")]
    check(rc == 1 and len(ours) == 1 and "nope.npy: cannot open" in ours[0],
          f"missing file: rc={rc} stderr={err!r}")

    # An error on rank 1 only (its index is out of range), followed by a
    # collective: rank 1 must still take part, then every rank exits 1.
    p = Program([("dp", 2)])
    data = p.input("data", "f32", (3, 2))
    idx = p.input("idx", "i64", (2,))
    mine = p.tensor("i64", (1,))
    p.op("dist.all_slice", [mine], [idx], [1, 0, 0])
    rows = p.tensor("f32", (1, 2))
    p.op("hpc.gather", [rows], [data, mine], [0])
    s = p.tensor("f32", (1, 2))
    p.op("dist.all_reduce", [s], [rows], [1, 0, FLAT, SUM])
    p.output("s", s)
    d, exe = env.build(p, "rank1_error")
    np.save(f"{d}/data.npy", np.ones((3, 2), np.float32))
    np.save(f"{d}/idx.npy", np.array([0, 5], np.int64))
    rc, out, err = env.mpi(2, exe, "run", "--input", f"data={d}/data.npy", "--input",
                           f"idx={d}/idx.npy", "--output-dir", f"{d}/out")
    ours = [l for l in err.splitlines() if l.startswith("model:")]
    check(rc == 1 and len(ours) == 1 and ours[0].startswith("model: error: rank 1: op 1 (hpc.gather")
          and "index 5 is out of range" in ours[0], f"rank-1 error: rc={rc} stderr={err!r}")
    check(not os.path.exists(f"{d}/out/s.npy"), "rank-1 error: outputs written anyway")

    # A kernel error every rank meets (wrong result shape): one line.
    p = Program(mesh)
    x = p.input("x", "f32", (4, 2))
    y = p.tensor("f32", (4, 3))
    p.op("dist.all_gather", [y], [x], [*both, 1])
    p.output("y", y)
    d, exe = env.build(p, "bad_shape")
    np.save(f"{d}/x.npy", np.ones((4, 2), np.float32))
    rc, out, err = env.mpi(4, exe, "run", "--input", f"x={d}/x.npy", "--output-dir", f"{d}/out")
    ours = [l for l in err.splitlines() if l.startswith("model:")]
    check(rc == 1 and len(ours) == 1 and "op 0 (dist.all_gather at 'dist.all_gather_0')" in ours[0]
          and "has shape [4, 3], expected [4, 8]" in ours[0], f"bad shape: rc={rc} stderr={err!r}")

    # The manifest names the op: hpcrt_all_reduce listed as dist.all_gather.
    p = Program([("dp", 2)])
    x = p.input("x", "f32", (2,))
    y = p.tensor("f32", (2,))
    p.op("dist.all_reduce", [y], [x], [1, 0, FLAT, SUM])
    p.output("y", y)
    src = p.c_source().replace('\\"name\\": \\"dist.all_reduce\\"', '\\"name\\": \\"dist.all_gather\\"')
    d = os.path.join(env.tmp, "bad_name")
    os.makedirs(d)
    with open(f"{d}/program.c", "w") as f:
        f.write(src)
    subprocess.run([env.cc, "-c", "-I", env.include, f"{d}/program.c", "-o", f"{d}/program.o"], check=True)
    subprocess.run([env.cc, f"{d}/program.o", *env.link, "-o", f"{d}/model"], check=True)
    np.save(f"{d}/x.npy", np.ones(2, np.float32))
    rc, out, err = env.mpi(2, f"{d}/model", "run", "--input", f"x={d}/x.npy", "--output-dir", f"{d}/out")
    ours = [l for l in err.splitlines() if l.startswith("model:")]
    check(rc == 1 and len(ours) == 1 and "the manifest lists op 0 as dist.all_gather" in ours[0],
          f"op name check: rc={rc} stderr={err!r}")

    # A dist op in a program without a mesh: single rank, no MPI.
    p = Program([])
    x = p.input("x", "f32", (2,))
    y = p.tensor("f32", (2,))
    p.op("dist.all_reduce", [y], [x], [0, FLAT, SUM])
    p.output("y", y)
    d, exe = env.build(p, "no_mesh")
    np.save(f"{d}/x.npy", np.ones(2, np.float32))
    pr = subprocess.run([exe, "run", "--input", f"x={d}/x.npy", "--output-dir", f"{d}/out"],
                        capture_output=True, text=True, timeout=TIMEOUT)
    check(pr.returncode == 1 and pr.stderr.strip().splitlines() ==
          ["model: error: op 0 (dist.all_reduce at 'dist.all_reduce_0'): a dist op in a program without a mesh"],
          f"no mesh: rc={pr.returncode} stderr={pr.stderr!r}")
    # A single-rank program started by mpirun with several processes.
    rc, out, err = env.mpi(2, exe, "run", "--input", f"x={d}/x.npy", "--output-dir", f"{d}/out")
    ours = [l for l in err.splitlines() if l.startswith("model:")]
    check(rc == 1 and ours == ["model: error: compiled for 1 rank (no mesh) but started with 2; "
                               "run it without mpirun, or compile it with --mesh"],
          f"no mesh under mpirun -n 2: rc={rc} stderr={err!r}")


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    cc, include, link_txt, mpirun = sys.argv[1:5]
    keep = "--keep" in sys.argv[5:]
    if not shutil.which(mpirun):
        print(f"skipped: {mpirun} not found")
        return 77
    link = open(link_txt).read().split()
    tmp = tempfile.mkdtemp(prefix="hpcrt_dist_")
    env = Env(cc, include, link, mpirun, tmp)
    rng = np.random.default_rng(7)
    try:
        test_collectives(env, rng)
        test_uneven_and_bytes(env, rng)
        test_large(env, rng)
        test_bitwise_identical(env, rng)
        test_send_recv(env, rng)
        test_errors(env, rng)
    finally:
        if keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print(f"all dist checks passed ({env.count} multi-rank programs compared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
