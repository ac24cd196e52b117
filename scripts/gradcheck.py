#!/usr/bin/env python3
#===- gradcheck.py - hpc-autodiff's gradients against finite differences --===#
#
# For every op with a GradientInterface model (dialects/HPC/HPCGradients.cpp)
# this writes small float64 programs
#
#   func.func @main(%x: tensor<...xf64> {hpc.name = "x"}, ...) -> loss
#     y = op(x, ...)                       // indices and masks are constants
#     loss = reduce_sum(y * R)             // R: a fixed random constant of
#                                          // y's shape; several results add up
#
# compiles each with
#
#   hpc-opt case.mlir --hpc-autodiff=wrt-inputs=true -o ad.mlir
#   hpc-opt ad.mlir --emit=exe -o case.bin
#
# runs it once for the analytic gradients grad.<input>, and then, for every
# float input x and DIRECTIONS random directions v, evaluates the loss at
# x + EPS v and x - EPS v (the same executable; the other inputs unchanged):
#
#   fd  = (loss(x + EPS v) - loss(x - EPS v)) / (2 EPS)
#   err = |fd - <grad.x, v>| / max(1, |<grad.x, v>|)      must be <= TOL
#
# with EPS = 1e-6 and TOL = 1e-6. In float64 the central difference is
# accurate to about EPS^2 |f'''| + 1e-16 |loss| / EPS, i.e. 1e-10 for these
# O(1) losses, so TOL leaves four orders of margin while a wrong formula
# (even a 1e-5 relative error) fails. Input domains keep 0.1 or more away
# from kinks and undefined points (positive bases and arguments for pow, log
# and sqrt, distinct values for max, min, top_k and pooling, no ties,
# nothing near the jumps of floor, mod or clip), so EPS never crosses one.
#
# The casts are the exception to float64 end to end (f64 -> f32 -> f64 and an
# f32 input): their cases use data exactly representable in float32 (inputs
# on a dyadic grid, directions and R rounded to float32, EPS = 2^-12), so
# x +- EPS v is exact in float32 and the same TOL applies.
#
# Every op registered in HPCGradients.cpp must have a case (checked first,
# from the registration list and the mnemonics in HPCOps.td/HPCTrainOps.td).
# Prints one line per case (its op and worst relative error); exits 1 listing
# every failing case (a wrong gradient, or a case that did not compile or
# run).
#
# --self-test checks that the harness can fail: it runs mutants whose
# gradient program differs from the loss program (a 1e-5 relative error, GELU
# tanh's gradient for exact GELU's, softmax's gradient on the wrong axis) and
# exits 0 only when every mutant fails the check.
#
# Python 3 + numpy only: runs with Debian's /usr/bin/python3.
#
#===-----------------------------------------------------------------------===#

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

EPS = 1e-6
TOL = 1e-6
DIRECTIONS = 2
# The cast cases: a power of two so that x +- EPS v stays on the f32 grid.
CAST_EPS = 2.0 ** -12

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- writing MLIR -----------------------------------------------------------


def ttype(shape, dt):
    return "tensor<" + "".join("%dx" % d for d in shape) + dt + ">"


def fmt_float(v):
    # 17 significant digits round-trip a double; MLIR wants a '.'.
    return "%.17e" % float(v)


def fmt_elements(a, dt):
    if a.ndim == 0:
        v = a.item()
        if dt == "i1":
            return "true" if v else "false"
        if dt.startswith("i"):
            return str(int(v))
        return fmt_float(v)
    return "[" + ", ".join(fmt_elements(s, dt) for s in a) + "]"


def i64s(values):
    return "array<i64: " + ", ".join(str(int(v)) for v in values) + ">"


def i64(v):
    return "%d : i64" % v


def f64(v):
    return fmt_float(v) + " : f64"


def boolean(v):
    return "true" if v else "false"


def string(s):
    return '"%s"' % s


NP_TYPES = {"f64": np.float64, "f32": np.float32}


class Graph:
    """A @main under construction: inputs, constants, ops (generic form)."""

    def __init__(self, seed, r_scale=1.0, f32_data=False):
        self.rng = np.random.default_rng(seed)
        self.r_scale = r_scale
        self.f32_data = f32_data
        self.args = []
        self.lines = []
        self.types = {}
        self.inputs = {}
        self.count = 0

    def _fresh(self):
        self.count += 1
        return "%%v%d" % self.count

    def input(self, name, value, dt="f64"):
        value = np.asarray(value, dtype=NP_TYPES[dt])
        ssa = "%" + re.sub(r"[^A-Za-z0-9_]", "_", name)
        self.args.append('%s: %s {hpc.name = "%s"}' % (ssa, ttype(value.shape, dt), name))
        self.types[ssa] = (value.shape, dt)
        self.inputs[name] = value
        return ssa

    def const(self, value, dt="f64"):
        value = np.asarray(value)
        ssa = self._fresh()
        t = ttype(value.shape, dt)
        self.lines.append('%s = "hpc.constant"() <{value = dense<%s> : %s}> : () -> %s'
                          % (ssa, fmt_elements(value, dt), t, t))
        self.types[ssa] = (value.shape, dt)
        return ssa

    def op(self, name, operands, attrs=None, out=None, outs=None, dt="f64"):
        """One hpc op; `out` the result shape (of `dt`), or `outs` a list of
        (shape, dtype) for several results (then a list of values)."""
        results = outs if outs is not None else [(tuple(out), dt)]
        ssa = self._fresh()
        props = ""
        if attrs:
            props = " <{" + ", ".join("%s = %s" % kv for kv in attrs.items()) + "}>"
        in_types = ", ".join(ttype(*self.types[o]) for o in operands)
        out_types = ", ".join(ttype(s, d) for s, d in results)
        if len(results) > 1:
            out_types = "(" + out_types + ")"
        lhs = ssa if len(results) == 1 else "%s:%d" % (ssa, len(results))
        self.lines.append('%s = "hpc.%s"(%s)%s : (%s) -> %s'
                          % (lhs, name, ", ".join(operands), props, in_types, out_types))
        if len(results) == 1:
            self.types[ssa] = (tuple(results[0][0]), results[0][1])
            return ssa
        values = []
        for i, (s, d) in enumerate(results):
            v = "%s#%d" % (ssa, i)
            self.types[v] = (tuple(s), d)
            values.append(v)
        return values

    def finish(self, results):
        """loss = sum over the results y of reduce_sum(y * R_y), as text."""
        loss = None
        for y in results:
            shape, dt = self.types[y]
            r = self.rng.standard_normal(shape) * self.r_scale
            if self.f32_data:
                r = r.astype(np.float32).astype(np.float64)
            term = self.op("mul", [y, self.const(r, dt)], out=shape, dt=dt)
            if len(shape):
                term = self.op("reduce_sum", [term],
                               {"axes": i64s(range(len(shape))), "keepdims": "false"},
                               out=(), dt=dt)
            loss = term if loss is None else self.op("add", [loss, term], out=(), dt=dt)
        t = ttype(*self.types[loss])
        return ("func.func @main(%s) -> (%s {hpc.name = \"loss\"}) {\n  %s\n  return %s : %s\n}\n"
                % (", ".join(self.args), t, "\n  ".join(self.lines), loss, t))


# --- input domains ----------------------------------------------------------


def uniform(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def away(lo, hi):
    """Random sign times U(lo, hi): away from 0."""
    return lambda rng, shape: rng.choice([-1.0, 1.0], shape) * rng.uniform(lo, hi, shape)


def distinct(scale=0.3):
    """A shuffled ramp with jitter: any two values differ by >= 0.6 scale."""
    def gen(rng, shape):
        n = int(np.prod(shape, dtype=np.int64))
        ramp = rng.permutation(n) - (n - 1) / 2.0
        return ((ramp + rng.uniform(-0.2, 0.2, n)) * scale).reshape(shape)
    return gen


def intervals(*spans):
    """Each element uniform in one of the spans, every span used."""
    def gen(rng, shape):
        n = int(np.prod(shape, dtype=np.int64))
        which = rng.permutation(np.arange(n) % len(spans))
        lo = np.array([spans[w][0] for w in which])
        hi = np.array([spans[w][1] for w in which])
        return rng.uniform(lo, hi).reshape(shape)
    return gen


def with_zeros(gen, positions):
    """gen's values with exact zeros at `positions` (reduce_prod's gradient
    must not divide by them)."""
    def zeroed(rng, shape):
        x = gen(rng, shape)
        for p in positions:
            x[p] = 0.0
        return x
    return zeroed


def fractional(lo, hi):
    """An integer in [-3, 3] plus a fraction in [lo, hi]: away from the jumps
    of floor, ceil and round (and from 0 for sign)."""
    def gen(rng, shape):
        k = rng.integers(-3, 3, shape).astype(np.float64)
        return k + rng.uniform(lo, hi, shape)
    return gen


def dyadic(rng, shape):
    """Multiples of 1/64 in (-2, 2): exact in f32, as are x +- CAST_EPS v."""
    return rng.integers(-127, 128, shape) / 64.0


def mod_operands(rng, lhs_shape, rhs_shape, out_shape):
    """l, r with r away from 0 and l/r at least 0.05 from an integer."""
    while True:
        l = rng.uniform(-3, 3, lhs_shape)
        r = rng.choice([-1.0, 1.0], rhs_shape) * rng.uniform(0.7, 1.5, rhs_shape)
        q = np.broadcast_to(l, out_shape) / np.broadcast_to(r, out_shape)
        frac = q - np.floor(q)
        if np.all((frac > 0.05) & (frac < 0.95)):
            return l, r


# --- shapes -----------------------------------------------------------------


def conv_out(size, k, s, pb, pe, d):
    return (size + pb + pe - ((k - 1) * d + 1)) // s + 1


def pool_out(size, k, s, pb, pe, d, ceil_mode):
    span = size + pb + pe - ((k - 1) * d + 1)
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + pb:
        out -= 1
    return out


def conv_transpose_out(size, k, s, pb, pe, d, op):
    return s * (size - 1) + op + (k - 1) * d + 1 - pb - pe


# --- the cases --------------------------------------------------------------


class Case:
    def __init__(self, name, op, build, eps=EPS, tol=TOL, f32_data=False, grad_build=None,
                 r_scale_grad=1.0):
        self.name = name
        self.op = op
        self.build = build
        self.eps = eps
        self.tol = tol
        self.f32_data = f32_data
        # Self-test mutants: the gradients come from another program.
        self.grad_build = grad_build
        self.r_scale_grad = r_scale_grad

    def program(self, build, r_scale=1.0):
        g = Graph(zlib.crc32(self.name.encode()), r_scale=r_scale, f32_data=self.f32_data)
        text = g.finish(build(g))
        return text, g.inputs

    def mutant(self):
        return self.grad_build is not None or self.r_scale_grad != 1.0


def unary(op, gen, shape=(2, 3), attrs=None):
    def build(g):
        x = g.input("x", gen(g.rng, shape))
        return [g.op(op, [x], attrs, out=shape)]
    return build


def binary(op, lhs_shape, rhs_shape, out_shape, lhs_gen, rhs_gen):
    def build(g):
        a = g.input("a", lhs_gen(g.rng, lhs_shape))
        b = g.input("b", rhs_gen(g.rng, rhs_shape))
        return [g.op(op, [a, b], out=out_shape)]
    return build


def mod_case(op):
    def build(g):
        l, r = mod_operands(g.rng, (2, 3), (3,), (2, 3))
        a, b = g.input("a", l), g.input("b", r)
        return [g.op(op, [a, b], out=(2, 3))]
    return build


def pow_int_exponent(g):
    # x ** [2, 3, -1]: a negative base with a constant integral exponent
    # (the exponent's gradient, log of a negative, is built but unused).
    x = g.input("x", away(0.5, 2)(g.rng, (2, 3)))
    e = g.const(np.array([2.0, 3.0, -1.0]))
    return [g.op("pow", [x, e], out=(2, 3))]


def where_case(cond_shape, lhs_shape, rhs_shape, out_shape):
    def build(g):
        n = int(np.prod(cond_shape))
        mask = (g.rng.permutation(n) % 2 == 0).reshape(cond_shape)
        c = g.const(mask, "i1")
        a = g.input("a", uniform(-2, 2)(g.rng, lhs_shape))
        b = g.input("b", uniform(-2, 2)(g.rng, rhs_shape))
        return [g.op("where", [c, a, b], out=out_shape)]
    return build


def cast_pair(g):
    x = g.input("x", dyadic(g.rng, (2, 3)))
    y = g.op("cast", [x], {"to": "f32"}, out=(2, 3), dt="f32")
    return [g.op("cast", [y], {"to": "f64"}, out=(2, 3))]


def cast_from_f32(g):
    x = g.input("x", dyadic(g.rng, (2, 3)), dt="f32")
    return [g.op("cast", [x], {"to": "f64"}, out=(2, 3))]


def matmul(lhs_shape, rhs_shape, out_shape):
    return binary("matmul", lhs_shape, rhs_shape, out_shape, uniform(-1, 1), uniform(-1, 1))


def gemm(trans_a, trans_b, alpha, beta, c_shape):
    m, k, n = 3, 4, 5

    def build(g):
        a = g.input("a", uniform(-1, 1)(g.rng, (k, m) if trans_a else (m, k)))
        b = g.input("b", uniform(-1, 1)(g.rng, (n, k) if trans_b else (k, n)))
        operands = [a, b]
        if c_shape is not None:
            operands.append(g.input("c", uniform(-1, 1)(g.rng, c_shape)))
        attrs = {"alpha": f64(alpha), "beta": f64(beta),
                 "trans_a": boolean(trans_a), "trans_b": boolean(trans_b)}
        return [g.op("gemm", operands, attrs, out=(m, n))]
    return build


def conv(x_shape, w_shape, strides, pads, dilations, group=1, bias=True):
    def build(g):
        spatial = len(x_shape) - 2
        x = g.input("x", uniform(-1, 1)(g.rng, x_shape))
        w = g.input("w", uniform(-1, 1)(g.rng, w_shape))
        operands = [x, w]
        if bias:
            operands.append(g.input("bias", uniform(-1, 1)(g.rng, (w_shape[0],))))
        out = [x_shape[0], w_shape[0]] + [
            conv_out(x_shape[2 + i], w_shape[2 + i], strides[i], pads[i], pads[spatial + i],
                     dilations[i]) for i in range(spatial)]
        attrs = {"strides": i64s(strides), "pads": i64s(pads), "dilations": i64s(dilations),
                 "group": i64(group),
                 # input, weight, bias, residual (none: the autodiff runs
                 # before hpc-fuse-epilogues puts one there)
                 "operandSegmentSizes": "array<i32: 1, 1, %d, 0>" % int(bias)}
        return [g.op("conv", operands, attrs, out=out)]
    return build


def conv_transpose(x_shape, w_shape, strides, pads, dilations, output_padding, group=1,
                   bias=True):
    def build(g):
        spatial = len(x_shape) - 2
        x = g.input("x", uniform(-1, 1)(g.rng, x_shape))
        w = g.input("w", uniform(-1, 1)(g.rng, w_shape))
        channels = w_shape[1] * group
        operands = [x, w]
        if bias:
            operands.append(g.input("bias", uniform(-1, 1)(g.rng, (channels,))))
        out = [x_shape[0], channels] + [
            conv_transpose_out(x_shape[2 + i], w_shape[2 + i], strides[i], pads[i],
                               pads[spatial + i], dilations[i], output_padding[i])
            for i in range(spatial)]
        attrs = {"strides": i64s(strides), "pads": i64s(pads), "dilations": i64s(dilations),
                 "output_padding": i64s(output_padding), "group": i64(group)}
        return [g.op("conv_transpose", operands, attrs, out=out)]
    return build


def pool(op, x_shape, kernel, strides, pads, dilations, ceil_mode=False,
         count_include_pad=None):
    def build(g):
        spatial = len(x_shape) - 2
        x = g.input("x", distinct(0.1)(g.rng, x_shape))
        out = list(x_shape[:2]) + [
            pool_out(x_shape[2 + i], kernel[i], strides[i], pads[i], pads[spatial + i],
                     dilations[i], ceil_mode) for i in range(spatial)]
        attrs = {"kernel_shape": i64s(kernel), "strides": i64s(strides), "pads": i64s(pads),
                 "dilations": i64s(dilations), "ceil_mode": boolean(ceil_mode)}
        if count_include_pad is not None:
            attrs["count_include_pad"] = boolean(count_include_pad)
        return [g.op(op, [x], attrs, out=out)]
    return build


def global_pool(op):
    def build(g):
        x = g.input("x", distinct(0.1)(g.rng, (2, 3, 3, 4)))
        return [g.op(op, [x], out=(2, 3, 1, 1))]
    return build


def layer_norm(x_shape, axis, with_bias, scale_shape=None):
    """scale_shape: a scale that broadcasts over the normalized dims (the
    autodiff's composed form; a full one takes hpc.layer_norm_grad)."""
    def build(g):
        norm = x_shape[axis:] if scale_shape is None else scale_shape
        x = g.input("x", uniform(-2, 2)(g.rng, x_shape))
        s = g.input("scale", uniform(0.5, 1.5)(g.rng, norm))
        operands = [x, s]
        if with_bias:
            operands.append(g.input("bias", uniform(-1, 1)(g.rng, norm)))
        return [g.op("layer_norm", operands, {"axis": i64(axis)}, out=x_shape)]
    return build


def rms_norm(x_shape, axis):
    def build(g):
        x = g.input("x", uniform(-2, 2)(g.rng, x_shape))
        s = g.input("scale", uniform(0.5, 1.5)(g.rng, x_shape[axis:]))
        return [g.op("rms_norm", [x, s], {"axis": i64(axis)}, out=x_shape)]
    return build


def batch_norm(g):
    shape, c = (2, 3, 2, 2), (3,)
    x = g.input("x", uniform(-2, 2)(g.rng, shape))
    scale = g.input("scale", uniform(0.5, 1.5)(g.rng, c))
    bias = g.input("bias", uniform(-1, 1)(g.rng, c))
    mean = g.input("mean", uniform(-1, 1)(g.rng, c))
    var = g.input("var", uniform(0.5, 2)(g.rng, c))
    return [g.op("batch_norm", [x, scale, bias, mean, var], {"epsilon": f64(1e-5)}, out=shape)]


def reduce(op, axes, keepdims, gen, x_shape=(2, 3, 4)):
    out = [1 if d in axes else n for d, n in enumerate(x_shape)]
    if not keepdims:
        out = [n for d, n in enumerate(x_shape) if d not in axes]
    attrs = {"axes": i64s(axes), "keepdims": boolean(keepdims)}
    return lambda g: [g.op(op, [g.input("x", gen(g.rng, x_shape))], attrs, out=out)]


def gather(x_shape, indices, axis):
    def build(g):
        idx = np.array(indices)
        x = g.input("x", uniform(-1, 1)(g.rng, x_shape))
        out = list(x_shape[:axis]) + list(idx.shape) + list(x_shape[axis + 1:])
        return [g.op("gather", [x, g.const(idx, "i64")], {"axis": i64(axis)}, out=out)]
    return build


def gather_elements(x_shape, indices, axis):
    def build(g):
        idx = np.array(indices)
        x = g.input("x", uniform(-1, 1)(g.rng, x_shape))
        return [g.op("gather_elements", [x, g.const(idx, "i64")], {"axis": i64(axis)},
                     out=idx.shape)]
    return build


def scatter_elements(x_shape, indices, axis, reduction):
    def build(g):
        idx = np.array(indices)
        x = g.input("x", uniform(-1, 1)(g.rng, x_shape))
        u = g.input("updates", uniform(-1, 1)(g.rng, idx.shape))
        return [g.op("scatter_elements", [x, g.const(idx, "i64"), u],
                     {"axis": i64(axis), "reduction": string(reduction)}, out=x_shape)]
    return build


def top_k(x_shape, k, axis, largest):
    def build(g):
        out = list(x_shape)
        out[axis] = k
        x = g.input("x", distinct(0.1)(g.rng, x_shape))
        values, _ = g.op("top_k", [x], {"k": i64(k), "axis": i64(axis),
                                        "largest": boolean(largest)},
                         outs=[(out, "f64"), (out, "i64")])
        return [values]
    return build


# Routed choices of 5 tokens among 3 experts (top-2); with capacity 2,
# expert 0's fourth and fifth choices and expert 2's third are dropped.
MOE_EXPERTS = [[0, 2], [1, 0], [0, 1], [2, 0], [0, 2]]


def moe_slots(g, num_experts, capacity):
    idx = g.const(np.array(MOE_EXPERTS), "i64")
    shape = np.array(MOE_EXPERTS).shape
    slots, _ = g.op("moe_route", [idx], {"capacity": i64(capacity),
                                          "num_experts": i64(num_experts)},
                    outs=[(shape, "i64"), ((num_experts,), "i64")])
    return slots


def moe_dispatch(per_choice, capacity):
    def build(g):
        t, k = np.array(MOE_EXPERTS).shape
        shape = (t, k, 4) if per_choice else (t, 4)
        x = g.input("x", uniform(-1, 1)(g.rng, shape))
        slots = moe_slots(g, 3, capacity)
        return [g.op("moe_dispatch", [x, slots], {"capacity": i64(capacity),
                                                  "num_experts": i64(3)},
                     out=(3, capacity, 4))]
    return build


def moe_gather(capacity):
    def build(g):
        t, k = np.array(MOE_EXPERTS).shape
        buf = g.input("buffer", uniform(-1, 1)(g.rng, (3, capacity, 4)))
        return [g.op("moe_gather", [buf, moe_slots(g, 3, capacity)], out=(t, k, 4))]
    return build


def moe_layer(g):
    """A routed layer: dispatch, one batched product per expert, gather,
    the gates' weighted sum."""
    t, k = np.array(MOE_EXPERTS).shape
    x = g.input("x", uniform(-1, 1)(g.rng, (t, 4)))
    w = g.input("w", uniform(-1, 1)(g.rng, (3, 4, 3)))
    gates = g.input("gates", uniform(0.1, 1)(g.rng, (t, k, 1)))
    slots = moe_slots(g, 3, 2)
    buf = g.op("moe_dispatch", [x, slots], {"capacity": i64(2), "num_experts": i64(3)},
               out=(3, 2, 4))
    y = g.op("matmul", [buf, w], out=(3, 2, 3))
    rows = g.op("moe_gather", [y, slots], out=(t, k, 3))
    weighted = g.op("mul", [rows, gates], out=(t, k, 3))
    return [g.op("reduce_sum", [weighted], {"axes": i64s([1]), "keepdims": "false"},
                 out=(t, 3))]


# Two groups' slots (expert parallelism's per-rank buffers): 3 tokens each,
# top-2 of 3 experts of capacity 2, a slot at most once per group.
MOE_GROUP_SLOTS = [[[0, 3], [2, -1], [1, 4]], [[5, 1], [-1, 0], [2, 3]]]


def moe_groups(g):
    """Batched dispatch and gather: each group into its own buffers, a
    product per expert, the rows back."""
    slots = g.const(np.array(MOE_GROUP_SLOTS), "i64")
    x = g.input("x", uniform(-1, 1)(g.rng, (2, 3, 4)))
    w = g.input("w", uniform(-1, 1)(g.rng, (3, 4, 3)))
    buf = g.op("moe_dispatch", [x, slots], {"capacity": i64(2), "num_experts": i64(3)},
               out=(2, 3, 2, 4))
    y = g.op("matmul", [buf, w], out=(2, 3, 2, 3))
    return [g.op("moe_gather", [y, slots], out=(2, 3, 2, 3))]


def view(op, x_shape, attrs, out):
    return lambda g: [g.op(op, [g.input("x", uniform(-1, 1)(g.rng, x_shape))], attrs, out=out)]


def slice_case(x_shape, starts, ends, steps):
    out = [len(range(s, e, st)) for s, e, st in zip(starts, ends, steps)]
    return view("slice", x_shape, {"starts": i64s(starts), "ends": i64s(ends),
                                   "steps": i64s(steps)}, out)


def concat(g):
    a = g.input("a", uniform(-1, 1)(g.rng, (2, 3)))
    b = g.input("b", uniform(-1, 1)(g.rng, (2, 1)))
    c = g.input("c", uniform(-1, 1)(g.rng, (2, 2)))
    return [g.op("concat", [a, b, c], {"axis": i64(1)}, out=(2, 6))]


def concat_axis0(g):
    a = g.input("a", uniform(-1, 1)(g.rng, (1, 3)))
    b = g.input("b", uniform(-1, 1)(g.rng, (2, 3)))
    return [g.op("concat", [a, b], {"axis": i64(-2)}, out=(3, 3))]


def split(sizes, used):
    def build(g):
        x = g.input("x", uniform(-1, 1)(g.rng, (2, sum(sizes))))
        parts = g.op("split", [x], {"axis": i64(1), "sizes": i64s(sizes)},
                     outs=[((2, s), "f64") for s in sizes])
        return [parts[i] for i in used]
    return build


def pad(x_shape, pads, value):
    rank = len(x_shape)
    out = [n + pads[d] + pads[rank + d] for d, n in enumerate(x_shape)]
    return view("pad", x_shape, {"pads": i64s(pads), "value": f64(value)}, out)


def composite(g):
    # x feeds three ops and w two: gradients accumulate over the uses.
    x = g.input("x", uniform(-1, 1)(g.rng, (2, 4)))
    w = g.input("w", uniform(-1, 1)(g.rng, (4, 4)))
    h = g.op("matmul", [x, w], out=(2, 4))
    h = g.op("gelu", [g.op("add", [h, x], out=(2, 4))], out=(2, 4))
    h = g.op("matmul", [h, w], out=(2, 4))
    return [g.op("mul", [h, g.op("tanh", [x], out=(2, 4))], out=(2, 4))]


def gelu_with(approximate):
    return unary("gelu", uniform(-3, 3), attrs={"approximate": string(approximate)})


def softmax_axis(axis):
    return unary("softmax", uniform(-2, 2), (2, 3, 4), {"axis": i64(axis)})


def cases():
    u2 = uniform(-2, 2)
    c = [
        # Unary elementwise.
        Case("neg", "neg", unary("neg", u2)),
        # Inference dropout is the identity (train mode multiplies by a mask,
        # whose gradient is mul's).
        Case("dropout", "dropout", unary("dropout", u2, attrs={"ratio": f64(0.3)})),
        Case("abs", "abs", unary("abs", away(0.2, 2))),
        Case("sign", "sign", unary("sign", away(0.2, 2))),
        Case("floor", "floor", unary("floor", fractional(0.1, 0.9))),
        Case("ceil", "ceil", unary("ceil", fractional(0.1, 0.9))),
        Case("round", "round", unary("round", fractional(0.1, 0.4))),
        Case("exp", "exp", unary("exp", u2)),
        Case("log", "log", unary("log", uniform(0.5, 3))),
        Case("sqrt", "sqrt", unary("sqrt", uniform(0.5, 3))),
        Case("reciprocal", "reciprocal", unary("reciprocal", away(0.5, 2))),
        Case("relu", "relu", unary("relu", away(0.2, 2))),
        Case("sigmoid", "sigmoid", unary("sigmoid", u2)),
        Case("tanh", "tanh", unary("tanh", u2)),
        Case("erf", "erf", unary("erf", u2)),
        Case("sin", "sin", unary("sin", uniform(-3, 3))),
        Case("cos", "cos", unary("cos", uniform(-3, 3))),
        Case("silu", "silu", unary("silu", uniform(-3, 3))),
        Case("softplus", "softplus", unary("softplus", uniform(-3, 3))),
        Case("hard_swish", "hard_swish",
             unary("hard_swish", intervals((-5, -3.2), (-2.8, 2.8), (3.2, 5)), (3, 4))),
        Case("gelu", "gelu", gelu_with("none")),
        Case("gelu_tanh", "gelu", gelu_with("tanh")),
        Case("leaky_relu", "leaky_relu",
             unary("leaky_relu", away(0.2, 2), attrs={"alpha": f64(0.1)})),
        Case("elu", "elu", unary("elu", away(0.2, 2), attrs={"alpha": f64(1.5)})),
        Case("hard_sigmoid", "hard_sigmoid",
             unary("hard_sigmoid", intervals((-4, -2.7), (-2.3, 2.3), (2.7, 4)), (3, 4),
                   {"alpha": f64(0.2), "beta": f64(0.5)})),
        Case("clip_min", "clip",
             unary("clip", intervals((-2, -0.7), (-0.3, 2)), attrs={"min": f64(-0.5)})),
        Case("clip_min_max", "clip",
             unary("clip", intervals((-2, -0.7), (-0.3, 0.6), (1.0, 2)), (3, 4),
                   {"min": f64(-0.5), "max": f64(0.8)})),
        Case("cast_f64_f32_f64", "cast", cast_pair, eps=CAST_EPS, f32_data=True),
        Case("cast_f32_f64", "cast", cast_from_f32, eps=CAST_EPS, f32_data=True),
        # Binary elementwise, broadcasting.
        Case("add", "add", binary("add", (2, 1), (1, 3), (2, 3), u2, u2)),
        Case("sub", "sub", binary("sub", (2, 3), (3,), (2, 3), u2, u2)),
        Case("mul", "mul", binary("mul", (3,), (2, 3), (2, 3), u2, u2)),
        Case("div", "div", binary("div", (2, 3), (2, 1), (2, 3), u2, away(0.5, 2))),
        Case("pow", "pow", binary("pow", (2, 3), (3,), (2, 3), uniform(0.5, 2),
                                  uniform(-1.5, 1.5))),
        Case("pow_int_exponent", "pow", pow_int_exponent),
        Case("max", "max", binary("max", (2, 3), (3,), (2, 3), distinct(0.3), distinct(0.3))),
        Case("min", "min", binary("min", (3,), (2, 3), (2, 3), distinct(0.3), distinct(0.3))),
        Case("mod", "mod", mod_case("mod")),
        Case("fmod", "fmod", mod_case("fmod")),
        Case("where", "where", where_case((2, 3), (2, 3), (3,), (2, 3))),
        Case("where_broadcast_cond", "where", where_case((2, 1), (1, 3), (2, 3), (2, 3))),
        # Contractions.
        Case("matmul", "matmul", matmul((3, 4), (4, 5), (3, 5))),
        Case("matmul_batch_broadcast", "matmul", matmul((2, 1, 3, 4), (3, 4, 2), (2, 3, 3, 2))),
        Case("matmul_1d_lhs", "matmul", matmul((4,), (2, 4, 3), (2, 3))),
        Case("matmul_1d_rhs", "matmul", matmul((2, 3, 4), (4,), (2, 3))),
        Case("matmul_1d_both", "matmul", matmul((4,), (4,), ())),
        Case("gemm_nn_c", "gemm", gemm(False, False, 0.7, 1.3, (3, 5))),
        Case("gemm_tn_c_row", "gemm", gemm(True, False, 1.0, 0.5, (5,))),
        Case("gemm_nt_c_col", "gemm", gemm(False, True, 2.0, -1.0, (3, 1))),
        Case("gemm_tt", "gemm", gemm(True, True, 0.5, 1.0, None)),
        Case("conv", "conv", conv((2, 3, 5, 5), (4, 3, 3, 3), [1, 1], [0, 0, 0, 0], [1, 1])),
        Case("conv_stride_pad", "conv",
             conv((1, 2, 6, 7), (3, 2, 3, 2), [2, 1], [1, 0, 1, 1], [1, 1], bias=False)),
        Case("conv_dilation", "conv",
             conv((1, 2, 7, 7), (2, 2, 3, 3), [1, 2], [2, 2, 2, 1], [2, 2])),
        Case("conv_group", "conv",
             conv((2, 4, 5, 5), (6, 2, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], group=2)),
        Case("conv_depthwise", "conv",
             conv((1, 3, 5, 4), (3, 1, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1], group=3)),
        Case("conv_1d", "conv", conv((2, 3, 8), (4, 3, 3), [2], [1, 1], [1])),
        Case("conv_transpose", "conv_transpose",
             conv_transpose((1, 2, 3, 3), (2, 3, 3, 3), [1, 1], [0, 0, 0, 0], [1, 1], [0, 0])),
        Case("conv_transpose_stride_output_padding", "conv_transpose",
             conv_transpose((1, 2, 3, 4), (2, 2, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1], [1, 1],
                            bias=False)),
        Case("conv_transpose_group_dilation", "conv_transpose",
             conv_transpose((1, 4, 3, 3), (4, 1, 3, 3), [2, 1], [0, 1, 0, 1], [1, 2], [1, 0],
                            group=2)),
        # Pooling.
        Case("max_pool", "max_pool",
             pool("max_pool", (1, 2, 5, 5), [2, 2], [2, 2], [0, 0, 0, 0], [1, 1])),
        Case("max_pool_ceil_pads", "max_pool",
             pool("max_pool", (1, 2, 5, 6), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], True)),
        Case("max_pool_overlap_dilation", "max_pool",
             pool("max_pool", (1, 1, 6, 5), [2, 3], [1, 1], [0, 0, 0, 0], [2, 1])),
        Case("avg_pool", "avg_pool",
             pool("avg_pool", (1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False, False)),
        Case("avg_pool_count_include_pad", "avg_pool",
             pool("avg_pool", (1, 2, 5, 5), [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], False, True)),
        Case("avg_pool_ceil", "avg_pool",
             pool("avg_pool", (1, 1, 5, 5), [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], True, False)),
        Case("avg_pool_ceil_count_include_pad", "avg_pool",
             pool("avg_pool", (1, 1, 6, 6), [3, 3], [2, 2], [1, 0, 1, 1], [1, 1], True, True)),
        Case("global_avg_pool", "global_avg_pool", global_pool("global_avg_pool")),
        Case("global_max_pool", "global_max_pool", global_pool("global_max_pool")),
        # Normalization and softmax.
        Case("softmax", "softmax", softmax_axis(1)),
        Case("softmax_last", "softmax", softmax_axis(-1)),
        Case("log_softmax", "log_softmax",
             unary("log_softmax", u2, (2, 3, 4), {"axis": i64(0)})),
        Case("layer_norm", "layer_norm", layer_norm((2, 3, 4), -1, True)),
        Case("layer_norm_no_bias_axis1", "layer_norm", layer_norm((2, 3, 4), 1, False)),
        Case("layer_norm_broadcast_scale", "layer_norm", layer_norm((2, 3, 4), 1, True, (4,))),
        Case("rms_norm", "rms_norm", rms_norm((2, 3, 4), -1)),
        Case("rms_norm_axis1", "rms_norm", rms_norm((2, 3, 4), 1)),
        Case("batch_norm", "batch_norm", batch_norm),
        # Reductions.
        Case("reduce_sum", "reduce_sum", reduce("reduce_sum", [1], False, u2)),
        Case("reduce_sum_keepdims", "reduce_sum", reduce("reduce_sum", [0, 2], True, u2)),
        Case("reduce_mean", "reduce_mean", reduce("reduce_mean", [0, 2], False, u2)),
        Case("reduce_mean_keepdims", "reduce_mean", reduce("reduce_mean", [1], True, u2)),
        Case("reduce_max", "reduce_max", reduce("reduce_max", [2], False, distinct())),
        Case("reduce_max_keepdims", "reduce_max", reduce("reduce_max", [0, 1], True, distinct())),
        Case("reduce_max_all", "reduce_max", reduce("reduce_max", [0, 1, 2], False, distinct())),
        Case("reduce_min", "reduce_min", reduce("reduce_min", [0, 1], False, distinct())),
        Case("reduce_min_keepdims", "reduce_min", reduce("reduce_min", [2], True, distinct())),
        Case("reduce_prod", "reduce_prod", reduce("reduce_prod", [1], False, away(0.5, 1.5))),
        Case("reduce_prod_keepdims", "reduce_prod",
             reduce("reduce_prod", [0, 2], True, away(0.5, 1.5))),
        # One zero in the group of (0, :, 0), two in that of (1, :, 2).
        Case("reduce_prod_zeros", "reduce_prod",
             reduce("reduce_prod", [1], True,
                    with_zeros(away(0.5, 1.5), [(0, 1, 0), (1, 0, 2), (1, 2, 2)]))),
        # Indexing.
        Case("gather_axis0", "gather", gather((5, 3), [[0, -1], [2, 0]], 0)),
        Case("gather_axis1", "gather", gather((2, 4, 3), [1, -1, 1], 1)),
        Case("gather_scalar_index", "gather", gather((4, 3), -2, 0)),
        Case("gather_elements_axis1", "gather_elements",
             gather_elements((3, 4), [[0, -1], [2, 2], [3, 0]], 1)),
        Case("gather_elements_axis0", "gather_elements",
             gather_elements((3, 2), [[0, -1], [0, 1], [2, 0], [-3, 1]], 0)),
        Case("scatter_elements", "scatter_elements",
             scatter_elements((3, 4), [[1, 0, 2, -1], [0, 2, 1, 0]], 0, "none")),
        Case("scatter_elements_add", "scatter_elements",
             scatter_elements((2, 5), [[0, 0, 3], [4, -1, 1]], 1, "add")),
        Case("top_k", "top_k", top_k((3, 5), 2, 1, True)),
        Case("top_k_smallest_axis0", "top_k", top_k((4, 3), 3, 0, False)),
        # Mixture of experts (moe_route has no gradient: its slots are integers).
        Case("moe_dispatch", "moe_dispatch", moe_dispatch(False, 2)),
        Case("moe_dispatch_per_choice", "moe_dispatch", moe_dispatch(True, 2)),
        Case("moe_dispatch_no_drops", "moe_dispatch", moe_dispatch(False, 5)),
        Case("moe_gather", "moe_gather", moe_gather(2)),
        Case("moe_layer", "moe_gather", moe_layer),
        Case("moe_groups", "moe_gather", moe_groups),
        # Data movement.
        Case("reshape", "reshape", view("reshape", (2, 3, 4), {"shape": i64s([4, 6])}, (4, 6))),
        Case("squeeze", "squeeze",
             view("squeeze", (2, 1, 3, 1), {"axes": i64s([1, 3])}, (2, 3))),
        Case("unsqueeze", "unsqueeze",
             view("unsqueeze", (2, 3), {"axes": i64s([0, 2])}, (1, 2, 1, 3))),
        Case("transpose", "transpose",
             view("transpose", (2, 3, 4), {"perm": i64s([2, 0, 1])}, (4, 2, 3))),
        Case("expand", "expand", view("expand", (3, 1), {"shape": i64s([2, 3, 4])}, (2, 3, 4))),
        Case("tile", "tile", view("tile", (2, 3), {"repeats": i64s([2, 3])}, (4, 9))),
        Case("slice_step1", "slice", slice_case((4, 5), [1, 0], [3, 5], [1, 1])),
        Case("slice_step2", "slice", slice_case((5, 6), [0, 1], [5, 6], [2, 2])),
        Case("slice_step_neg1", "slice", slice_case((4, 5), [3, 4], [-1, 1], [-1, -1])),
        Case("slice_steps_mixed", "slice",
             slice_case((3, 5, 6), [0, 4, 1], [3, -1, 6], [1, -2, 3])),
        Case("concat", "concat", concat),
        Case("concat_axis0", "concat", concat_axis0),
        Case("split", "split", split([2, 3], [0, 1])),
        Case("split_unused_result", "split", split([1, 2, 2], [0, 2])),
        Case("pad", "pad", pad((2, 3), [1, 0, 0, 2], 0.5)),
        Case("pad_negative", "pad", pad((3, 4), [-1, 1, 0, -2], 0.0)),
        # Several ops, values used more than once.
        Case("composite_reuse", "matmul", composite),
    ]
    return c


def self_test_cases():
    """Mutants: the gradient program is not the loss program's."""
    return [
        Case("mutant_exp_gradient_1e-5", "exp", unary("exp", uniform(-1, 1), (3, 4)),
             r_scale_grad=1.0 + 1e-5),
        Case("mutant_gelu_tanh_gradient_for_exact", "gelu", gelu_with("none"),
             grad_build=gelu_with("tanh")),
        Case("mutant_softmax_gradient_wrong_axis", "softmax", softmax_axis(1),
             grad_build=softmax_axis(2)),
        Case("mutant_matmul_gradient_1e-5", "matmul", matmul((3, 4), (4, 5), (3, 5)),
             r_scale_grad=1.0 + 1e-5),
    ]


# --- coverage ---------------------------------------------------------------


def registered_ops(root):
    """Mnemonics of the ops HPCGradients.cpp attaches a gradient model to."""
    with open(os.path.join(root, "dialects", "HPC", "HPCGradients.cpp")) as f:
        classes = re.findall(r"attach<(\w+)Op,", f.read())
    mnemonics = {}
    for td in ("HPCOps.td", "HPCTrainOps.td"):
        with open(os.path.join(root, "dialects", "HPC", td)) as f:
            for cls, mnemonic in re.findall(r'def HPC_(\w+)Op\s*:\s*HPC_\w+<"(\w+)"', f.read()):
                mnemonics[cls] = mnemonic
    missing = [c for c in classes if c not in mnemonics]
    if missing:
        raise SystemExit("gradcheck: no mnemonic found in the .td files for: "
                         + ", ".join(missing))
    return [mnemonics[c] for c in classes]


# --- running ----------------------------------------------------------------


class CaseError(Exception):
    pass


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def call(cmd, timeout=120):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=timeout)
    if p.returncode != 0:
        raise CaseError("`%s` exited %d:\n%s" % (" ".join(cmd), p.returncode, p.stdout.strip()))
    return p.stdout


# hpc-autodiff's options (--composed-gradients adds fused-gradients=false).
AUTODIFF_OPTIONS = "wrt-inputs=true"


def compile_program(hpc_opt, text, d, stem):
    src, ad, exe = (os.path.join(d, stem + s) for s in (".mlir", ".ad.mlir", ".bin"))
    with open(src, "w") as f:
        f.write(text)
    call([hpc_opt, src, "--hpc-autodiff=" + AUTODIFF_OPTIONS, "-o", ad])
    call([hpc_opt, ad, "--emit=exe", "-o", exe])
    return exe


class Runner:
    """Runs one executable on input arrays, returns its outputs by name."""

    def __init__(self, exe, d):
        self.exe, self.d, self.n = exe, d, 0

    def __call__(self, inputs):
        self.n += 1
        run = os.path.join(self.d, "run%d" % self.n)
        os.makedirs(run)
        cmd = [self.exe, "run", "--output-dir", os.path.join(run, "out")]
        for name, value in inputs.items():
            path = os.path.join(run, sanitize(name) + ".npy")
            np.save(path, value)
            cmd += ["--input", "%s=%s" % (name, path)]
        call(cmd)
        out = {}
        for f in os.listdir(os.path.join(run, "out")):
            if f.endswith(".npy"):
                out[f[:-4]] = np.load(os.path.join(run, "out", f))
        shutil.rmtree(run)
        return out


def check_case(case, hpc_opt, work):
    """(worst error, failures) of one case; raises CaseError."""
    d = os.path.join(work, case.name)
    os.makedirs(d, exist_ok=True)
    text, inputs = case.program(case.build)
    loss_of = Runner(compile_program(hpc_opt, text, d, "case"), d)
    grad_of = loss_of
    if case.mutant():
        grad_text, _ = case.program(case.grad_build or case.build, case.r_scale_grad)
        grad_of = Runner(compile_program(hpc_opt, grad_text, d, "grad"), d)
    outputs = grad_of(inputs)
    rng = np.random.default_rng(zlib.crc32(("directions " + case.name).encode()))
    worst, failures = 0.0, []
    for name, x in inputs.items():
        key = "grad." + sanitize(name)
        if key not in outputs:
            raise CaseError("no output %s (outputs: %s)" % (key, ", ".join(sorted(outputs))))
        g = outputs[key].astype(np.float64)
        if g.shape != x.shape:
            raise CaseError("%s has shape %s, %s has %s" % (key, g.shape, name, x.shape))
        for k in range(DIRECTIONS):
            v = rng.standard_normal(x.shape)
            if case.f32_data:
                v = np.round(v * 8) / 8
            losses = []
            for sign in (1.0, -1.0):
                moved = dict(inputs)
                moved[name] = (x.astype(np.float64) + sign * case.eps * v).astype(x.dtype)
                losses.append(float(loss_of(moved)["loss"]))
            fd = (losses[0] - losses[1]) / (2 * case.eps)
            gv = float(np.sum(g * v))
            err = abs(fd - gv) / max(1.0, abs(gv))
            if not err <= worst and worst == worst:  # a NaN stays the worst
                worst = err
            if not err <= case.tol:
                failures.append("d/d%s along v%d: finite difference %.10g, gradient %.10g, "
                                "error %.3g" % (name, k, fd, gv, err))
    return worst, failures


def run_all(selected, hpc_opt, work, jobs):
    results = {}

    def one(case):
        start = time.time()
        try:
            worst, failures = check_case(case, hpc_opt, work)
            return case, worst, failures, None, time.time() - start
        except (CaseError, subprocess.TimeoutExpired, OSError, ValueError) as e:
            return case, None, [], str(e), time.time() - start

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for r in pool.map(one, selected):
            results[r[0].name] = r
            case, worst, failures, error, seconds = r
            status = "ok" if error is None and not failures else "FAIL"
            detail = ("worst %.2e" % worst) if error is None else "error"
            print("%-4s %-18s %-40s %s (tol %.0e)" % (status, case.op, case.name, detail,
                                                      case.tol), flush=True)
            for f in failures:
                print("     " + f)
            if error:
                print("     " + error.replace("\n", "\n     "))
    return [results[c.name] for c in selected]


def main():
    ap = argparse.ArgumentParser(
        description="Checks the gradients of hpc-autodiff against finite differences "
                    "(see the comment at the top of this script).")
    ap.add_argument("--hpc-opt", default=None,
                    help="hpc-opt to use (default: on PATH, else build/bin/hpc-opt)")
    ap.add_argument("--work", default=None, help="directory for the cases (default: a temp)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="cases run at once (2)")
    ap.add_argument("--only", default=None, help="regex: run only the cases it matches")
    ap.add_argument("--self-test", action="store_true",
                    help="run the mutants, which must all fail; exit 0 when they do")
    ap.add_argument("--composed-gradients", action="store_true",
                    help="differentiate with hpc-autodiff's fused-gradients=false (GELU and "
                         "layer norm from their elementwise formulas)")
    args = ap.parse_args()
    global AUTODIFF_OPTIONS
    if args.composed_gradients:
        AUTODIFF_OPTIONS += " fused-gradients=false"

    hpc_opt = args.hpc_opt or shutil.which("hpc-opt") or os.path.join(ROOT, "build", "bin",
                                                                       "hpc-opt")
    all_cases = self_test_cases() if args.self_test else cases()
    if not args.self_test and not args.only:
        covered = {c.op for c in all_cases}
        uncovered = [op for op in registered_ops(ROOT) if op not in covered]
        if uncovered:
            print("gradcheck: ops with a gradient model but no case: " + ", ".join(uncovered))
            return 1
    selected = [c for c in all_cases if not args.only or re.search(args.only, c.name)]
    if not selected:
        print("gradcheck: no case matches --only %s" % args.only)
        return 1

    work = args.work or tempfile.mkdtemp(prefix="gradcheck.")
    if args.work:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
    start = time.time()
    try:
        results = run_all(selected, hpc_opt, work, args.jobs)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    failing = [case.name for case, worst, failures, error, _ in results if error or failures]
    elapsed = time.time() - start
    if args.self_test:
        passed = [c.name for c in selected if c.name not in failing]
        if passed:
            print("self-test: FAILED: the check accepted the wrong gradients of: "
                  + ", ".join(passed))
            return 1
        print("self-test: all %d mutants failed the check, as they must (%.1f s)"
              % (len(selected), elapsed))
        return 0
    if failing:
        print("gradcheck: %d of %d cases FAILED: %s" % (len(failing), len(selected),
                                                        ", ".join(failing)))
        return 1
    print("gradcheck: all %d cases passed (eps %g, tol %g, %.1f s)"
          % (len(selected), EPS, TOL, elapsed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
