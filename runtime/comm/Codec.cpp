//===- Codec.cpp - int8 blocks, top-k and PowerSGD's products -------------===//
//
// Written here rather than taken from a library: oneDNN's int8 reorders
// scale per tensor or per channel with a scale the caller supplies, not per
// block of a flat buffer with the block's own maximum; top-k selection is
// no library primitive; and PowerSGD's products (M Q, M^T P, P Q^T with
// R <= a few columns) run on the communication thread, where a oneDNN call
// would start an OpenMP team against the compute thread's, and are single
// memory-bound passes over M that plain loops stream at the bandwidth.
// Every codec must round exactly the same on every rank. The loops are
// plain so that the compiler vectorizes them.
//
//===----------------------------------------------------------------------===//

#include "Codec.h"

#include "../core/Context.h"
#include "common/Codecs.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace hpcrt {
namespace comm {

std::string parseCompression(const std::string &text, Compression &c) {
  auto number = [&](const std::string &digits, auto &out) {
    char *end = nullptr;
    if constexpr (std::is_same_v<std::decay_t<decltype(out)>, double>)
      out = std::strtod(digits.c_str(), &end);
    else
      out = std::strtoll(digits.c_str(), &end, 10);
    return !digits.empty() && end && *end == 0;
  };
  auto after = [&](const char *prefix, std::string &rest) {
    size_t n = strlen(prefix);
    if (text.compare(0, n, prefix) != 0)
      return false;
    rest = text.substr(n);
    return true;
  };
  std::string rest;
  if (after("int8_block:", rest)) {
    c.codec = Codec::Int8Block;
    if (number(rest, c.block) && c.block >= 1)
      return "";
  } else if (after("topk:", rest)) {
    c.codec = Codec::TopK;
    if (number(rest, c.ratio) && c.ratio > 0 && c.ratio <= 1)
      return "";
  } else if (after("powersgd:", rest)) {
    c.codec = Codec::PowerSgd;
    const std::string off = ":no_feedback";
    c.powerSgdFeedback = !(rest.size() > off.size() &&
                           rest.compare(rest.size() - off.size(), off.size(), off) == 0);
    if (!c.powerSgdFeedback)
      rest.resize(rest.size() - off.size());
    if (number(rest, c.rank) && c.rank >= 1)
      return "";
  }
  c.codec = Codec::None;
  return "unknown compression '" + text +
         "' (int8_block:B, topk:RATIO, powersgd:R[:no_feedback])";
}

void int8BlockEncode(const float *v, size_t n, int64_t block, char *out, float *error) {
  const size_t b = static_cast<size_t>(block), blocks = (n + b - 1) / b;
  char *scales = out;
  auto *q = reinterpret_cast<int8_t *>(out + 4 * blocks);
  for (size_t k = 0; k < blocks; ++k) {
    const size_t begin = k * b, end = std::min(n, begin + b);
    // The largest magnitude as bits: without the sign an f32's bits order
    // as its magnitude, an infinity above every finite value and a NaN
    // above both, so one integer maximum (which vectorizes; a float one
    // may not reorder past a NaN) finds the scale and any non-finite value.
    uint32_t top = 0;
    for (size_t i = begin; i < end; ++i) {
      uint32_t bits;
      memcpy(&bits, v + i, 4);
      top = std::max(top, bits & 0x7fffffffu);
    }
    const bool finite = top < 0x7f800000u;
    float largest;
    memcpy(&largest, &top, 4);
    // A block with a NaN or an infinity decodes as NaN, so the loss
    // monitor sees the overflow (a clamp would hide it), and leaves no
    // error behind to poison the next steps. An all-zero block sends zeros.
    const float scale = finite ? largest / 127.0f : std::nanf("");
    memcpy(scales + 4 * k, &scale, 4);
    if (!finite || scale == 0) {
      for (size_t i = begin; i < end; ++i)
        q[i] = 0;
      if (error)
        for (size_t i = begin; i < end; ++i)
          error[i] = finite ? v[i] : 0.0f; // all zero when finite
      continue;
    }
    // Rounded to nearest (ties to even) as nearbyint rounds, by adding and
    // taking away 1.5 * 2^23, which leaves an f32 in [-127, 127] no
    // fraction; nearbyint itself does not vectorize on baseline x86-64.
    const float magic = 12582912.0f;
    for (size_t i = begin; i < end; ++i) {
      float x = std::min(127.0f, std::max(-127.0f, v[i] / scale));
      q[i] = static_cast<int8_t>((x + magic) - magic);
    }
    // The error against exactly what decodes (q * scale, Decode's product).
    if (error)
      for (size_t i = begin; i < end; ++i)
        error[i] = v[i] - static_cast<float>(q[i]) * scale;
  }
}

void topkEncode(const float *v, size_t n, size_t k, char *out, float *error) {
  // Magnitudes as integer keys (the sign bit dropped: a NaN above an
  // infinity above every finite value, see int8BlockEncode), a threshold
  // from one selection over the keys, then one pass in index order that
  // takes every key above it and the first ones equal to it: the (key
  // descending, index ascending) order, deterministically.
  thread_local std::vector<uint32_t> keys, select;
  keys.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, v + i, 4);
    keys[i] = bits & 0x7fffffffu;
  }
  k = std::min(k, n);
  if (error)
    memcpy(error, v, n * sizeof(float));
  if (k == 0)
    return;
  select.assign(keys.begin(), keys.end());
  std::nth_element(select.begin(), select.begin() + (k - 1), select.end(),
                   std::greater<uint32_t>());
  const uint32_t threshold = select[k - 1];
  size_t above = 0;
  for (size_t i = 0; i < n; ++i)
    above += keys[i] > threshold;
  size_t ties = k - above, taken = 0;
  char *pair = out;
  for (size_t i = 0; i < n && taken < k; ++i) {
    bool take = keys[i] > threshold || (keys[i] == threshold && ties > 0);
    if (!take)
      continue;
    if (keys[i] == threshold)
      --ties;
    uint32_t index = static_cast<uint32_t>(i);
    memcpy(pair, &index, 4);
    memcpy(pair + 4, v + i, 4);
    pair += 8;
    ++taken;
    if (error)
      error[i] = 0.0f;
  }
  // A value that is not finite leaves no residual to poison the next
  // steps (it was sent, so the loss monitor sees it, unless more than k).
  if (error)
    for (size_t i = 0; i < n; ++i)
      if (keys[i] >= 0x7f800000u)
        error[i] = 0.0f;
}

void topkDecodeAdd(const char *in, size_t k, size_t n, float *acc) {
  for (size_t p = 0; p < k; ++p) {
    uint32_t index;
    float value;
    memcpy(&index, in + 8 * p, 4);
    memcpy(&value, in + 8 * p + 4, 4);
    if (index >= n)
      fail("a top-k piece names value " + std::to_string(index) + " of " + std::to_string(n));
    acc[index] += value;
  }
}

size_t pieceBytes(const Compression &c, size_t n) {
  auto m = static_cast<int64_t>(n);
  if (c.codec == Codec::Int8Block)
    return static_cast<size_t>(hpc::codecs::int8BlockBytes(m, c.block));
  if (c.codec == Codec::TopK)
    return static_cast<size_t>(hpc::codecs::topkCount(m, c.ratio) * hpc::codecs::kTopkPairBytes);
  fail("no piece codec for this compression");
}

void encodePiece(const Compression &c, const float *v, size_t n, char *out, float *error) {
  if (c.codec == Codec::Int8Block)
    return int8BlockEncode(v, n, c.block, out, error);
  topkEncode(v, n, static_cast<size_t>(hpc::codecs::topkCount(static_cast<int64_t>(n), c.ratio)),
             out, error);
}

void decodeAddPiece(const Compression &c, const char *in, size_t n, float *acc) {
  if (c.codec == Codec::Int8Block)
    return int8BlockDecodeAdd(in, n, c.block, acc);
  topkDecodeAdd(in, static_cast<size_t>(hpc::codecs::topkCount(static_cast<int64_t>(n), c.ratio)),
                n, acc);
}

namespace {
/// sum_j a[j] * b[j] in eight interleaved partial sums (which the
/// compiler keeps in vector registers; one fixed order on every rank).
float dot(const float *a, const float *b, int64_t n) {
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l)
      part[l] += a[j + l] * b[j + l];
  for (; j < n; ++j)
    part[j % 8] += a[j] * b[j];
  return ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
}
} // namespace

void powerSgdProject(const float *M, int64_t rows, int64_t cols, const float *Qt, int64_t R,
                     float *Pt) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t r = 0; r < R; ++r)
      Pt[r * rows + i] = dot(M + i * cols, Qt + r * cols, cols);
}

void powerSgdBack(const float *M, int64_t rows, int64_t cols, const float *Pt, int64_t R,
                  float *Qt) {
  std::fill(Qt, Qt + R * cols, 0.0f);
  for (int64_t i = 0; i < rows; ++i) {
    const float *m = M + i * cols;
    for (int64_t r = 0; r < R; ++r) {
      const float p = Pt[r * rows + i];
      float *q = Qt + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        q[j] += p * m[j];
    }
  }
}

void orthonormalize(float *Pt, int64_t R, int64_t rows) {
  for (int64_t r = 0; r < R; ++r) {
    float *p = Pt + r * rows;
    for (int64_t s = 0; s < r; ++s) {
      const float *q = Pt + s * rows;
      double d = 0;
      for (int64_t i = 0; i < rows; ++i)
        d += double(p[i]) * double(q[i]);
      const auto f = static_cast<float>(d);
      for (int64_t i = 0; i < rows; ++i)
        p[i] -= f * q[i];
    }
    double norm = 0;
    for (int64_t i = 0; i < rows; ++i)
      norm += double(p[i]) * double(p[i]);
    norm = std::sqrt(norm);
    // Nothing left (a zero or dependent column): zero, not a division by
    // a rounding error.
    const float scale = norm > 1e-30 ? static_cast<float>(1.0 / norm) : 0.0f;
    for (int64_t i = 0; i < rows; ++i)
      p[i] *= scale;
  }
}

void powerSgdExpand(const float *Pt, const float *Qt, int64_t rows, int64_t cols, int64_t R,
                    float *M, float *residual, float share) {
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(cols));
  for (int64_t i = 0; i < rows; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    for (int64_t r = 0; r < R; ++r) {
      const float p = Pt[r * rows + i];
      const float *q = Qt + r * cols;
      for (int64_t j = 0; j < cols; ++j)
        row[j] += p * q[j];
    }
    float *m = M + i * cols;
    if (residual) {
      float *e = residual + i * cols;
      for (int64_t j = 0; j < cols; ++j)
        e[j] = m[j] - row[j] * share;
    }
    memcpy(m, row.data(), static_cast<size_t>(cols) * sizeof(float));
  }
}

bool isZero(const float *v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (v[i] != 0.0f)
      return false;
  return true;
}

void powerSgdStartQ(float *Qt, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; ++i) {
    // splitmix64 of (seed, i): 24 bits of it as a value in [-1, 1).
    uint64_t z = seed * 0x9e3779b97f4a7c15ULL + (i + 1) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    Qt[i] = static_cast<float>(z >> 40) / float(1 << 23) - 1.0f;
  }
}

template <bool Add>
static void decode(const char *in, size_t n, int64_t block, float *out) {
  const size_t b = static_cast<size_t>(block), blocks = (n + b - 1) / b;
  const auto *q = reinterpret_cast<const int8_t *>(in + 4 * blocks);
  for (size_t k = 0; k < blocks; ++k) {
    float scale;
    memcpy(&scale, in + 4 * k, 4);
    const size_t begin = k * b, end = std::min(n, begin + b);
    for (size_t i = begin; i < end; ++i) {
      float x = static_cast<float>(q[i]) * scale;
      out[i] = Add ? out[i] + x : x;
    }
  }
}

void int8BlockDecode(const char *in, size_t n, int64_t block, float *out) {
  decode<false>(in, n, block, out);
}

void int8BlockDecodeAdd(const char *in, size_t n, int64_t block, float *acc) {
  decode<true>(in, n, block, acc);
}

} // namespace comm
} // namespace hpcrt
