//===- KernelsShape.cpp - transpose, slice, concat, split, expand, pad, tile ===//
//
// Data movement by element size only (any dtype). transpose, slice and
// expand are strided copies; pad and tile map each output coordinate to a
// source coordinate per dimension (-1: the pad value).
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"

using namespace hpcrt;

namespace {

/// out[o...] = in[map_0[o_0], ..., map_r[o_r]], or `fill` where any map is -1.
void mappedCopy(const Tensor &x, Tensor &y, const std::vector<std::vector<int64_t>> &maps,
                const void *fill) {
  if (y.numel == 0)
    return;
  int r = y.rank();
  std::vector<int64_t> xs = stridesOf(x.shape);
  if (r == 0) {
    memcpy(y.data, x.data, y.bytes);
    return;
  }
  int64_t inner = y.shape[r - 1], rows = y.numel / inner;
  dispatchSize(dtypeSize(y.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U *p = x.as<U>();
    U *q = y.as<U>();
    U fv;
    memcpy(&fv, fill, sizeof(U));
    const std::vector<int64_t> &last = maps[r - 1];
    parallelFor(rows, static_cast<double>(inner), [&](int64_t row0, int64_t row1) {
    for (int64_t row = row0; row < row1; ++row) {
      int64_t rem = row, off = 0;
      bool valid = true;
      for (int d = r - 2; d >= 0; --d) {
        int64_t o = rem % y.shape[d];
        rem /= y.shape[d];
        int64_t s = maps[d][o];
        if (s < 0)
          valid = false;
        off += s * xs[d];
      }
      U *dst = q + row * inner;
      if (!valid) {
        std::fill(dst, dst + inner, fv);
        continue;
      }
      const U *src = p + off;
      for (int64_t j = 0; j < inner; ++j) {
        int64_t s = last[j];
        dst[j] = s < 0 ? fv : src[s];
      }
    }
    });
  });
}

/// A permuting copy: when the input's contiguous dimension is not the
/// output's innermost one, copy 32x32 tiles of those two dimensions so both
/// sides stay in cache; otherwise a plain strided copy.
void permuteCopy(size_t esize, void *dst, const void *src, const Walk<1> &walk) {
  const std::vector<int64_t> &shape = walk.shape, &st = walk.strides[0];
  int r = static_cast<int>(shape.size());
  int p = -1;
  for (int d = 0; d < r - 1; ++d)
    if (st[d] == 1)
      p = d;
  if (p < 0 || st[r - 1] == 1 || shape[p] < 8 || shape[r - 1] < 8) {
    stridedCopy(esize, dst, src, walk);
    return;
  }
  std::vector<int64_t> os = stridesOf(shape);
  std::vector<int> others;
  for (int d = 0; d < r - 1; ++d)
    if (d != p)
      others.push_back(d);
  int64_t nOuter = 1;
  for (int d : others)
    nOuter *= shape[d];
  const int64_t T = 32;
  int64_t tp = (shape[p] + T - 1) / T, tl = (shape[r - 1] + T - 1) / T;
  int64_t np = shape[p], nl = shape[r - 1], sl = st[r - 1], osp = os[p];
  dispatchSize(esize, [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U *in = static_cast<const U *>(src);
    U *out = static_cast<U *>(dst);
    parallelFor(nOuter * tp * tl, static_cast<double>(T * T), [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      int64_t outer = w / (tp * tl), t = w % (tp * tl);
      int64_t p0 = (t / tl) * T, l0 = (t % tl) * T;
      int64_t inBase = walk.base[0], outBase = 0, rem = outer;
      for (size_t k = others.size(); k-- > 0;) {
        int d = others[k];
        int64_t c = rem % shape[d];
        rem /= shape[d];
        inBase += c * st[d];
        outBase += c * os[d];
      }
      int64_t p1 = std::min(np, p0 + T), l1 = std::min(nl, l0 + T);
      for (int64_t i = p0; i < p1; ++i) {
        U *q = out + outBase + i * osp;
        const U *s0 = in + inBase + i;
        for (int64_t j = l0; j < l1; ++j)
          q[j] = s0[j * sl];
      }
    }
    });
  });
}

} // namespace

HPCRT_KERNEL(transpose) {
  c.expect(1, 1);
  std::vector<int64_t> perm = c.ivec();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "transpose");
  if (static_cast<int>(perm.size()) != x.rank())
    fail("transpose: perm has " + std::to_string(perm.size()) + " entries for rank " +
         std::to_string(x.rank()));
  std::vector<int64_t> xs = stridesOf(x.shape), expect(perm.size());
  std::vector<int64_t> strides[1];
  std::vector<bool> seen(perm.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= x.rank() || seen[perm[i]])
      fail("transpose: perm is not a permutation");
    seen[perm[i]] = true;
    expect[i] = x.shape[perm[i]];
    strides[0].push_back(xs[perm[i]]);
  }
  checkShape(y, expect, "result");
  permuteCopy(dtypeSize(x.dtype), y.data, x.data, Walk<1>(y.shape, strides));
}

HPCRT_KERNEL(slice) {
  c.expect(1, 1);
  std::vector<int64_t> ends = c.ivec(), starts = c.ivec(), steps = c.ivec();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "slice");
  int r = x.rank();
  if (static_cast<int>(starts.size()) != r || static_cast<int>(ends.size()) != r ||
      static_cast<int>(steps.size()) != r)
    fail("slice: starts, ends and steps need one entry per dimension (" + std::to_string(r) +
         ")");
  std::vector<int64_t> xs = stridesOf(x.shape), expect(r);
  std::vector<int64_t> strides[1];
  int64_t base = 0;
  for (int d = 0; d < r; ++d) {
    int64_t s = starts[d], e = ends[d], st = steps[d], n = x.shape[d];
    if (st == 0)
      fail("slice: step 0 in dimension " + std::to_string(d));
    int64_t count = st > 0 ? (e > s ? (e - s + st - 1) / st : 0)
                           : (s > e ? (s - e + (-st) - 1) / (-st) : 0);
    if (count > 0) {
      int64_t lastIndex = s + (count - 1) * st;
      if (s < 0 || s >= n || lastIndex < 0 || lastIndex >= n)
        fail("slice: start " + std::to_string(s) + ", end " + std::to_string(e) +
             ", step " + std::to_string(st) + " leave dimension " + std::to_string(d) +
             " of size " + std::to_string(n) + " (starts/ends must be clamped)");
      base += s * xs[d];
    }
    expect[d] = count;
    strides[0].push_back(st * xs[d]);
  }
  checkShape(y, expect, "result");
  if (y.numel == 0)
    return;
  Walk<1> walk(y.shape, strides);
  walk.base[0] = base;
  stridedCopy(dtypeSize(x.dtype), y.data, x.data, walk);
}

HPCRT_KERNEL(expand) {
  c.expect(1, 1);
  std::vector<int64_t> shape = c.ivec();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "expand");
  checkShape(y, broadcastShape(x.shape, shape), "result");
  std::vector<int64_t> strides[1] = {broadcastStrides(x.shape, y.shape)};
  stridedCopy(dtypeSize(x.dtype), y.data, x.data, Walk<1>(y.shape, strides));
}

HPCRT_KERNEL(concat) {
  int64_t nin = static_cast<int64_t>(c.operands.size());
  if (c.results.size() != 1 || nin < 1)
    fail("concat needs 1 result and at least 1 operand");
  Tensor &y = c.out();
  int64_t axis = normalizeAxis(c.i(), y.rank());
  int64_t total = 0;
  for (int64_t k = 0; k < nin; ++k) {
    Tensor &t = c.in(k);
    checkSameDtype(t, y, "concat");
    if (t.rank() != y.rank())
      fail("concat: operand " + std::to_string(k) + " has rank " + std::to_string(t.rank()));
    for (int d = 0; d < y.rank(); ++d)
      if (d != axis && t.shape[d] != y.shape[d])
        fail("concat: operand " + std::to_string(k) + " shape " + shapeString(t.shape) +
             " does not fit the result " + shapeString(y.shape));
    total += t.shape[axis];
  }
  if (total != y.shape[axis])
    fail("concat: operand sizes along axis sum to " + std::to_string(total) +
         ", the result has " + std::to_string(y.shape[axis]));
  int64_t outer = 1, inner = dtypeSize(y.dtype);
  for (int64_t d = 0; d < axis; ++d)
    outer *= y.shape[d];
  for (int64_t d = axis + 1; d < y.rank(); ++d)
    inner *= y.shape[d];
  std::vector<int64_t> rowBytes(nin), dstOff(nin);
  int64_t outRow = 0;
  for (int64_t k = 0; k < nin; ++k) {
    rowBytes[k] = c.in(k).shape[axis] * inner;
    dstOff[k] = outRow;
    outRow += rowBytes[k];
  }
  uint8_t *q = y.as<uint8_t>();
  parallelFor(outer * nin, static_cast<double>(outRow) / 4 / nin, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t o = r / nin, k = r % nin;
      if (rowBytes[k])
        memcpy(q + o * outRow + dstOff[k], c.in(k).as<uint8_t>() + o * rowBytes[k],
               static_cast<size_t>(rowBytes[k]));
    }
  });
}

HPCRT_KERNEL(split) {
  if (c.operands.size() != 1 || c.results.empty())
    fail("split needs 1 operand and at least 1 result");
  Tensor &x = c.in(0);
  int64_t axis = normalizeAxis(c.i(), x.rank());
  std::vector<int64_t> sizes = c.ivec();
  int64_t nres = static_cast<int64_t>(c.results.size());
  if (static_cast<int64_t>(sizes.size()) != nres)
    fail("split: " + std::to_string(sizes.size()) + " sizes for " + std::to_string(nres) +
         " results");
  int64_t total = 0;
  for (int64_t k = 0; k < nres; ++k) {
    std::vector<int64_t> expect = x.shape;
    expect[axis] = sizes[k];
    checkSameDtype(x, c.out(k), "split");
    checkShape(c.out(k), expect, "result");
    total += sizes[k];
  }
  if (total != x.shape[axis])
    fail("split: sizes sum to " + std::to_string(total) + ", the axis has " +
         std::to_string(x.shape[axis]));
  int64_t outer = 1, inner = dtypeSize(x.dtype);
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.shape[d];
  std::vector<int64_t> srcOff(nres);
  int64_t inRow = 0;
  for (int64_t k = 0; k < nres; ++k) {
    srcOff[k] = inRow;
    inRow += sizes[k] * inner;
  }
  const uint8_t *p = x.as<uint8_t>();
  parallelFor(outer * nres, static_cast<double>(inRow) / 4 / nres, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t o = r / nres, k = r % nres, bytes = sizes[k] * inner;
      if (bytes)
        memcpy(c.out(k).as<uint8_t>() + o * bytes, p + o * inRow + srcOff[k],
               static_cast<size_t>(bytes));
    }
  });
}

HPCRT_KERNEL(pad) {
  c.expect(1, 1);
  std::string mode = c.s();
  std::vector<int64_t> pads = c.ivec();
  double value = c.f();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "pad");
  int r = x.rank();
  if (static_cast<int>(pads.size()) != 2 * r)
    fail("pad: pads needs " + std::to_string(2 * r) + " entries, has " +
         std::to_string(pads.size()));
  int m = mode == "constant" ? 0 : mode == "reflect" ? 1 : mode == "edge" ? 2 : -1;
  if (m < 0)
    fail("pad: unknown mode '" + mode + "'");
  std::vector<int64_t> expect(r);
  std::vector<std::vector<int64_t>> maps(r);
  for (int d = 0; d < r; ++d) {
    int64_t n = x.shape[d], pb = pads[d], pe = pads[d + r];
    expect[d] = n + pb + pe;
    if (expect[d] < 0)
      fail("pad: pads crop dimension " + std::to_string(d) + " below zero");
    if (m != 0 && n == 0 && expect[d] > 0)
      fail("pad: mode '" + mode + "' cannot pad an empty dimension");
    maps[d].resize(static_cast<size_t>(expect[d]));
    for (int64_t o = 0; o < expect[d]; ++o) {
      int64_t i = o - pb;
      if (i < 0 || i >= n) {
        if (m == 0) {
          i = -1;
        } else if (m == 2) {
          i = i < 0 ? 0 : n - 1;
        } else if (n == 1) {
          i = 0;
        } else {
          while (i < 0 || i >= n) {
            if (i < 0)
              i = -i;
            if (i >= n)
              i = 2 * (n - 1) - i;
          }
        }
      }
      maps[d][o] = i;
    }
  }
  checkShape(y, expect, "result");
  uint64_t fill = 0;
  encodeScalar(value, y.dtype, &fill);
  mappedCopy(x, y, maps, &fill);
}

HPCRT_KERNEL(tile) {
  c.expect(1, 1);
  std::vector<int64_t> repeats = c.ivec();
  Tensor &x = c.in(0), &y = c.out();
  checkSameDtype(x, y, "tile");
  int r = x.rank();
  if (static_cast<int>(repeats.size()) != r)
    fail("tile: repeats needs " + std::to_string(r) + " entries");
  std::vector<int64_t> expect(r);
  std::vector<std::vector<int64_t>> maps(r);
  for (int d = 0; d < r; ++d) {
    if (repeats[d] < 0)
      fail("tile: negative repeat");
    expect[d] = x.shape[d] * repeats[d];
    for (int64_t o = 0; o < expect[d]; ++o)
      maps[d].push_back(o % x.shape[d]);
  }
  checkShape(y, expect, "result");
  uint64_t fill = 0;
  mappedCopy(x, y, maps, &fill);
}
