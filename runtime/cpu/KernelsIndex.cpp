//===- KernelsIndex.cpp - gather, gather/scatter_elements, one_hot, top_k --===//
//
// Indices may be any integer dtype and may be negative (counting from the
// end); an index out of range is a kernel error (one line, exit 1), never an
// out-of-bounds access.
//
//===----------------------------------------------------------------------===//

#include "Kernel.h"

using namespace hpcrt;

namespace {

int64_t checkIndex(int64_t idx, int64_t n, int64_t axis, const char *what) {
  if (idx < -n || idx >= n)
    fail(std::string(what) + ": index " + std::to_string(idx) + " is out of range for axis " +
         std::to_string(axis) + " of size " + std::to_string(n));
  return idx < 0 ? idx + n : idx;
}

/// Coordinates of `linear` in `shape`.
void coordsOf(int64_t linear, const std::vector<int64_t> &shape, int64_t *co) {
  for (size_t d = shape.size(); d-- > 0;) {
    co[d] = linear % shape[d];
    linear /= shape[d];
  }
}

} // namespace

HPCRT_KERNEL(gather) {
  c.expect(1, 2);
  Tensor &x = c.in(0), &ind = c.in(1), &y = c.out();
  int64_t axis = normalizeAxis(c.i(), x.rank());
  checkSameDtype(x, y, "gather");
  std::vector<int64_t> expect(x.shape.begin(), x.shape.begin() + axis);
  expect.insert(expect.end(), ind.shape.begin(), ind.shape.end());
  expect.insert(expect.end(), x.shape.begin() + axis + 1, x.shape.end());
  checkShape(y, expect, "result");
  std::vector<int64_t> idx = readIndices(ind);
  int64_t n = x.shape[axis];
  for (int64_t &i : idx)
    i = checkIndex(i, n, axis, "gather");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.shape[d];
  size_t rowBytes = static_cast<size_t>(inner) * dtypeSize(x.dtype);
  int64_t ni = static_cast<int64_t>(idx.size());
  const uint8_t *src = x.as<uint8_t>();
  uint8_t *dst = y.as<uint8_t>();
  parallelFor(outer * ni, static_cast<double>(rowBytes) / 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t o = r / ni, j = r % ni;
      memcpy(dst + r * rowBytes, src + (o * n + idx[j]) * rowBytes, rowBytes);
    }
  });
}

HPCRT_KERNEL(gather_elements) {
  c.expect(1, 2);
  Tensor &x = c.in(0), &ind = c.in(1), &y = c.out();
  int64_t axis = normalizeAxis(c.i(), x.rank());
  checkSameDtype(x, y, "gather_elements");
  checkShape(y, ind.shape, "result");
  if (ind.rank() != x.rank())
    fail("gather_elements: indices rank " + std::to_string(ind.rank()) +
         " differs from the input's " + std::to_string(x.rank()));
  for (int d = 0; d < x.rank(); ++d)
    if (d != axis && ind.shape[d] > x.shape[d])
      fail("gather_elements: indices shape " + shapeString(ind.shape) +
           " exceeds the input shape " + shapeString(x.shape));
  std::vector<int64_t> idx = readIndices(ind);
  int64_t n = x.shape[axis];
  for (int64_t &i : idx)
    i = checkIndex(i, n, axis, "gather_elements");
  std::vector<int64_t> xs = stridesOf(x.shape);
  int r = x.rank();
  dispatchSize(dtypeSize(x.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U *p = x.as<U>();
    U *q = y.as<U>();
    parallelFor(ind.numel, 4.0, [&](int64_t i0, int64_t i1) {
      std::vector<int64_t> co(r);
      for (int64_t i = i0; i < i1; ++i) {
        coordsOf(i, ind.shape, co.data());
        co[axis] = idx[i];
        int64_t off = 0;
        for (int d = 0; d < r; ++d)
          off += co[d] * xs[d];
        q[i] = p[off];
      }
    });
  });
}

HPCRT_KERNEL(scatter_elements) {
  c.expect(1, 3);
  Tensor &x = c.in(0), &ind = c.in(1), &upd = c.in(2), &y = c.out();
  int64_t axis = normalizeAxis(c.i(), x.rank());
  std::string reduction = c.s();
  checkSameDtype(x, y, "scatter_elements");
  checkSameDtype(x, upd, "scatter_elements");
  checkShape(y, x.shape, "result");
  checkShape(upd, ind.shape, "updates");
  if (ind.rank() != x.rank())
    fail("scatter_elements: indices rank differs from the input's");
  for (int d = 0; d < x.rank(); ++d)
    if (d != axis && ind.shape[d] > x.shape[d])
      fail("scatter_elements: indices shape " + shapeString(ind.shape) +
           " exceeds the input shape " + shapeString(x.shape));
  int mode;
  if (reduction == "none") mode = 0;
  else if (reduction == "add") mode = 1;
  else if (reduction == "mul") mode = 2;
  else if (reduction == "max") mode = 3;
  else if (reduction == "min") mode = 4;
  else fail("scatter_elements: unknown reduction '" + reduction + "'");
  std::vector<int64_t> idx = readIndices(ind);
  int64_t n = x.shape[axis];
  for (int64_t &i : idx)
    i = checkIndex(i, n, axis, "scatter_elements");
  if (y.data != x.data)
    memcpy(y.data, x.data, x.bytes);
  if (ind.numel == 0)
    return;
  // Row by row over the indices' last dimension: a row's offsets differ
  // only in that dimension (and in the indexed one), so the coordinates are
  // worked out once a row, not per element (the embedding gradient's
  // [tokens, d] scatter-add took 16 ns per element that way). Two elements
  // in different columns of the last dimension never write the same place
  // unless the last dimension is the indexed one: then the columns run in
  // parallel, each over the rows in order (the same sums as one thread).
  const int r = x.rank(), last = r - 1;
  const int64_t cols = ind.shape[last], rows = ind.numel / cols;
  std::vector<int64_t> ys = stridesOf(y.shape), rowBase(static_cast<size_t>(rows));
  {
    std::vector<int64_t> co(static_cast<size_t>(r));
    for (int64_t row = 0; row < rows; ++row) {
      coordsOf(row * cols, ind.shape, co.data());
      int64_t off = 0;
      for (int d = 0; d < last; ++d)
        if (d != axis)
          off += co[d] * ys[d];
      rowBase[row] = off;
    }
  }
  const int64_t colStride = axis == last ? 0 : ys[last], axisStride = ys[axis];
  dispatch<kAll>(x.dtype, "scatter_elements", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *u = upd.as<T>();
    T *q = y.as<T>();
    auto apply = [&](int64_t j0, int64_t j1, int64_t row) {
      for (int64_t j = j0; j < j1; ++j) {
        int64_t i = row * cols + j;
        int64_t off = rowBase[row] + j * colStride + idx[i] * axisStride;
        if (mode == 0) {
          q[off] = u[i];
          continue;
        }
        auto a = ld(q, off), b = ld(u, i);
        using C = decltype(a);
        if constexpr (isBoolT<T>) {
          if (mode == 1 || mode == 3) st(q, off, a || b);
          else st(q, off, a && b);
        } else if constexpr (std::is_integral_v<C>) {
          if (mode == 1) st(q, off, static_cast<C>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)));
          else if (mode == 2) st(q, off, static_cast<C>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)));
          else if (mode == 3) st(q, off, std::max(a, b));
          else st(q, off, std::min(a, b));
        } else {
          if (mode == 1) st(q, off, a + b);
          else if (mode == 2) st(q, off, a * b);
          else if (mode == 3) st(q, off, (a != a || a > b) ? a : b);
          else st(q, off, (a != a || a < b) ? a : b);
        }
      }
    };
    if (axis == last) {
      for (int64_t row = 0; row < rows; ++row)
        apply(0, cols, row);
      return;
    }
    // Column blocks of 64 elements, so that threads write different lines.
    constexpr int64_t kBlock = 64;
    int64_t blocks = (cols + kBlock - 1) / kBlock;
    parallelFor(blocks, 2.0 * static_cast<double>(rows * std::min(cols, kBlock)),
                [&](int64_t b0, int64_t b1) {
                  int64_t j0 = b0 * kBlock, j1 = std::min(cols, b1 * kBlock);
                  for (int64_t row = 0; row < rows; ++row)
                    apply(j0, j1, row);
                });
  });
}

HPCRT_KERNEL(one_hot) {
  c.expect(1, 2);
  Tensor &ind = c.in(0), &values = c.in(1), &y = c.out();
  int64_t axis = normalizeAxis(c.i(), ind.rank() + 1);
  int64_t depth = c.i();
  checkSameDtype(values, y, "one_hot");
  if (values.numel != 2)
    fail("one_hot: values needs 2 elements [off, on], has " + std::to_string(values.numel));
  std::vector<int64_t> expect = ind.shape;
  expect.insert(expect.begin() + axis, depth);
  checkShape(y, expect, "result");
  std::vector<int64_t> idx = readIndices(ind);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= ind.shape[d];
  for (int64_t d = axis; d < ind.rank(); ++d)
    inner *= ind.shape[d];
  dispatchSize(dtypeSize(y.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    U off = values.as<U>()[0], on = values.as<U>()[1];
    U *q = y.as<U>();
    parallelFor(outer * depth, static_cast<double>(inner), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t o = r / depth, dv = r % depth;
        for (int64_t i = 0; i < inner; ++i) {
          int64_t v = idx[o * inner + i];
          if (v < 0)
            v += depth;
          q[r * inner + i] = v == dv ? on : off;
        }
      }
    });
  });
}

HPCRT_KERNEL(top_k) {
  c.expect(2, 1);
  Tensor &x = c.in(0), &vals = c.out(0), &inds = c.out(1);
  int64_t axis = normalizeAxis(c.i(), x.rank());
  int64_t k = c.i();
  bool largest = c.b();
  (void)c.b(); // sorted: the result is always sorted (a valid order for sorted = 0)
  checkSameDtype(x, vals, "top_k");
  checkDtype(inds, HPCRT_I64, "indices result");
  int64_t n = x.shape[axis];
  if (k < 0 || k > n)
    fail("top_k: k = " + std::to_string(k) + " is out of range for axis size " +
         std::to_string(n));
  std::vector<int64_t> expect = x.shape;
  expect[axis] = k;
  checkShape(vals, expect, "values result");
  checkShape(inds, expect, "indices result");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.shape[d];
  dispatch<kAll>(x.dtype, "top_k", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = C_t<T>;
    const T *p = x.as<T>();
    T *qv = vals.as<T>();
    int64_t *qi = inds.as<int64_t>();
    parallelFor(outer * inner, 4.0 * static_cast<double>(n), [&](int64_t r0, int64_t r1) {
      std::vector<std::pair<C, int64_t>> row(static_cast<size_t>(n));
      for (int64_t r = r0; r < r1; ++r) {
        int64_t o = r / inner, i = r % inner;
        for (int64_t j = 0; j < n; ++j)
          row[j] = {ld(p, (o * n + j) * inner + i), j};
        // NaN orders above every number; ties keep the lower index first.
        auto cmp = [largest](const std::pair<C, int64_t> &a, const std::pair<C, int64_t> &b) {
          bool an = a.first != a.first, bn = b.first != b.first;
          if (an || bn) {
            if (an && bn)
              return a.second < b.second;
            return largest ? an : bn;
          }
          if (a.first != b.first)
            return largest ? a.first > b.first : a.first < b.first;
          return a.second < b.second;
        };
        std::partial_sort(row.begin(), row.begin() + k, row.end(), cmp);
        for (int64_t j = 0; j < k; ++j) {
          int64_t off = (o * k + j) * inner + i;
          st(qv, off, row[j].first);
          qi[off] = row[j].second;
        }
      }
    });
  });
}

//===----------------------------------------------------------------------===//
// Mixture of experts (hpc.moe_route, moe_dispatch, moe_gather, moe_exchange_slots)
//===----------------------------------------------------------------------===//

namespace {

/// The slots of a `[batch..., tokens, k]` routing against buffers of `rows`
/// rows a group, each -1 (dropped) or in range.
void checkSlots(const Tensor &slots, int64_t rows, const char *what, bool batched = false) {
  checkDtype(slots, HPCRT_I64, "slots");
  if (batched ? slots.rank() < 2 : slots.rank() != 2)
    fail(std::string(what) + ": slots must be [" + (batched ? "batch..., " : "") +
         "tokens, k], got " + shapeString(slots.shape));
  const int64_t *s = slots.as<int64_t>();
  for (int64_t i = 0; i < slots.numel; ++i)
    if (s[i] < -1 || s[i] >= rows)
      fail(std::string(what) + ": slot " + std::to_string(s[i]) + " is out of range for " +
           std::to_string(rows) + " buffer rows");
}

/// The product of the leading `n` dimensions.
int64_t leading(const Tensor &t, size_t n) {
  int64_t p = 1;
  for (size_t d = 0; d < n; ++d)
    p *= t.shape[d];
  return p;
}

} // namespace

HPCRT_KERNEL(moe_route) {
  c.expect(2, 1);
  Tensor &experts = c.in(0), &slots = c.out(0), &load = c.out(1);
  int64_t capacity = c.i(), numExperts = c.i();
  checkDtype(slots, HPCRT_I64, "slots result");
  checkDtype(load, HPCRT_I64, "load result");
  checkShape(slots, experts.shape, "slots result");
  checkShape(load, {numExperts}, "load result");
  if (experts.rank() != 2)
    fail("moe_route: experts must be [tokens, k], got " + shapeString(experts.shape));
  std::vector<int64_t> chosen = readIndices(experts);
  int64_t tokens = experts.shape[0], k = experts.shape[1];
  int64_t *s = slots.as<int64_t>(), *n = load.as<int64_t>();
  std::fill(n, n + numExperts, 0);
  // Sequential by design: a choice's row depends on every choice before it
  // in priority order (all first choices, then all second choices, ...).
  for (int64_t j = 0; j < k; ++j)
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t e = chosen[t * k + j];
      if (e < 0 || e >= numExperts)
        fail("moe_route: expert " + std::to_string(e) + " is out of range for " +
             std::to_string(numExperts) + " experts");
      int64_t row = n[e]++;
      s[t * k + j] = row < capacity ? e * capacity + row : -1;
    }
}

HPCRT_KERNEL(moe_dispatch) {
  c.expect(1, 2);
  Tensor &x = c.in(0), &slots = c.in(1), &y = c.out();
  int64_t capacity = c.i(), numExperts = c.i();
  checkSameDtype(x, y, "moe_dispatch");
  int64_t rows = numExperts * capacity;
  checkSlots(slots, rows, "moe_dispatch", /*batched=*/true);
  size_t batch = slots.shape.size() - 2;
  int64_t groups = leading(slots, batch);
  int64_t tokens = slots.shape[batch], k = slots.shape[batch + 1];
  int64_t hidden = x.shape.back();
  std::vector<int64_t> lead(slots.shape.begin(), slots.shape.begin() + batch);
  auto shape = [&](std::initializer_list<int64_t> tail) {
    std::vector<int64_t> s(lead);
    s.insert(s.end(), tail);
    return s;
  };
  checkShape(y, shape({numExperts, capacity, hidden}), "result");
  bool perChoice = x.rank() == slots.rank() + 1;
  checkShape(x, perChoice ? shape({tokens, k, hidden}) : shape({tokens, hidden}), "input");
  size_t rowBytes = static_cast<size_t>(hidden) * dtypeSize(x.dtype);
  const int64_t *s = slots.as<int64_t>();
  const uint8_t *src = x.as<uint8_t>();
  uint8_t *dst = y.as<uint8_t>();
  // Which choice fills each buffer row (-1: none, the row is zero), groups
  // one after another.
  std::vector<int64_t> source(static_cast<size_t>(groups * rows), -1);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = 0; i < tokens * k; ++i)
      if (int64_t slot = s[g * tokens * k + i]; slot >= 0)
        source[g * rows + slot] = g * tokens * k + i;
  double cost = static_cast<double>(rowBytes) / 4;
  parallelFor(groups * rows, cost, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t i = source[r];
      if (i < 0)
        memset(dst + r * rowBytes, 0, rowBytes);
      else
        memcpy(dst + r * rowBytes, src + (perChoice ? i : i / k) * rowBytes, rowBytes);
    }
  });
}

HPCRT_KERNEL(moe_gather) {
  c.expect(1, 2);
  Tensor &buffer = c.in(0), &slots = c.in(1), &y = c.out();
  checkSameDtype(buffer, y, "moe_gather");
  if (slots.rank() < 2 || buffer.rank() != slots.rank() + 1)
    fail("moe_gather: buffer must be [batch..., experts, capacity, hidden] for slots " +
         shapeString(slots.shape) + ", got " + shapeString(buffer.shape));
  size_t batch = slots.shape.size() - 2;
  for (size_t d = 0; d < batch; ++d)
    if (buffer.shape[d] != slots.shape[d])
      fail("moe_gather: buffer " + shapeString(buffer.shape) + " and slots " +
           shapeString(slots.shape) + " have different batch dimensions");
  int64_t rows = buffer.shape[batch] * buffer.shape[batch + 1];
  checkSlots(slots, rows, "moe_gather", /*batched=*/true);
  int64_t hidden = buffer.shape.back();
  std::vector<int64_t> out(slots.shape);
  out.push_back(hidden);
  checkShape(y, out, "result");
  int64_t perGroup = slots.shape[batch] * slots.shape[batch + 1];
  size_t rowBytes = static_cast<size_t>(hidden) * dtypeSize(buffer.dtype);
  const int64_t *s = slots.as<int64_t>();
  const uint8_t *src = buffer.as<uint8_t>();
  uint8_t *dst = y.as<uint8_t>();
  parallelFor(slots.numel, static_cast<double>(rowBytes) / 4, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      if (s[i] < 0)
        memset(dst + i * rowBytes, 0, rowBytes);
      else
        memcpy(dst + i * rowBytes, src + ((i / perGroup) * rows + s[i]) * rowBytes, rowBytes);
    }
  });
}

HPCRT_KERNEL(moe_exchange_slots) {
  c.expect(2, 1);
  Tensor &slots = c.in(0), &local = c.out(0), &rowsOut = c.out(1);
  // Attributes in name order.
  int64_t capacity = c.i(), ep = c.i(), groupCapacity = c.i(), groups = c.i(),
          numExperts = c.i();
  checkSlots(slots, numExperts * capacity, "moe_exchange_slots");
  int64_t tokens = slots.shape[0], k = slots.shape[1];
  if (groups < 1 || ep < 1 || groups % ep || tokens % groups || numExperts % ep)
    fail("moe_exchange_slots: " + std::to_string(tokens) + " tokens and " +
         std::to_string(numExperts) + " experts do not split into " + std::to_string(groups) +
         " groups of ep=" + std::to_string(ep));
  int64_t slices = groups / ep, compact = std::min(capacity, ep * groupCapacity);
  checkShape(local, slots.shape, "local result");
  checkShape(rowsOut, {slices, numExperts, compact}, "rows result");
  checkDtype(local, HPCRT_I64, "local result");
  checkDtype(rowsOut, HPCRT_I64, "rows result");
  const int64_t *s = slots.as<int64_t>();
  int64_t *l = local.as<int64_t>(), *r = rowsOut.as<int64_t>();
  // The choice in each row of the whole batch's buffers; then, rows in
  // order, each choice takes the next row of its group's buffer of that
  // expert and the next compacted row of its slice.
  int64_t perGroup = tokens / groups;
  std::vector<int64_t> choice(static_cast<size_t>(numExperts * capacity), -1);
  for (int64_t i = 0; i < tokens * k; ++i) {
    l[i] = -1;
    if (s[i] >= 0)
      choice[s[i]] = i;
  }
  std::fill(r, r + rowsOut.numel, -1);
  std::vector<int64_t> groupRows(static_cast<size_t>(groups)),
      sliceRows(static_cast<size_t>(slices));
  for (int64_t e = 0; e < numExperts; ++e) {
    std::fill(groupRows.begin(), groupRows.end(), 0);
    std::fill(sliceRows.begin(), sliceRows.end(), 0);
    for (int64_t row = 0; row < capacity; ++row) {
      int64_t i = choice[e * capacity + row];
      if (i < 0)
        continue;
      int64_t g = (i / k) / perGroup, d = g / ep;
      int64_t mine = groupRows[g]++;
      if (mine >= groupCapacity)
        fail("moe_exchange_slots: group " + std::to_string(g) + " has more than " +
             std::to_string(groupCapacity) + " rows of expert " + std::to_string(e));
      l[i] = e * groupCapacity + mine;
      r[(d * numExperts + e) * compact + sliceRows[d]++] = (g % ep) * groupCapacity + mine;
    }
  }
}
