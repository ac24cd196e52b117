//===- Codec.h - compressed reductions: int8 blocks, top-k, PowerSGD -*- C++ -*-===//
//
// The codecs of a compressed reduction (the compiler's #dist.int8_block,
// #dist.topk and #dist.powersgd), the arithmetic only; MpiComm moves the
// bytes.
//
// - int8 blocks of B values: each block travels as one f32 scale (the
//   block's largest magnitude / 127) and one int8 per value, rounded to
//   nearest: an encoded piece of n values is ceil(n / B) scales, then the n
//   int8 values, hpc::codecs::int8BlockBytes(n, B) bytes.
// - top-k: the k = hpc::codecs::topkCount(n, ratio) values of largest
//   magnitude (ties to the lower index), as k (u32 index, f32 value) pairs
//   in index order.
// - PowerSGD: the rank-R products of a matrix M (rows x cols, row-major)
//   with its factors P (rows x R) and Q (cols x R), both stored transposed
//   (R rows of `rows` / `cols` values, so that every product streams whole
//   rows).
//
// Deterministic: the same values give bitwise the same bytes and results.
// The loops are plain and built for the baseline ISA on purpose: a rank
// on a CPU with FMA must round exactly as one without (the members at one
// place on different nodes compute the same result independently).
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_COMM_CODEC_H
#define HPCRT_COMM_CODEC_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hpcrt {
namespace comm {

/// The codec of a compressed reduction.
enum class Codec { None, Int8Block, TopK, PowerSgd };

/// A reduction's compression, as the compiler encoded it (hpcrt.h).
struct Compression {
  Codec codec = Codec::None;
  int64_t block = 0;  ///< Int8Block: values per f32 scale
  double ratio = 0;   ///< TopK: the share of values kept
  int64_t rank = 0;   ///< PowerSgd: R
  /// PowerSgd: the pieces of the values, matrices rows x cols (cols 0: a
  /// run of rows values reduced exactly).
  std::vector<int64_t> rows, cols;
  /// PowerSgd: the piece bounds of each node member's chunk (L + 1 of them
  /// in two levels of L members a node, else [0, pieces]).
  std::vector<int64_t> chunks;
  /// PowerSgd: keep residuals after the Q's (else the state is the Q's).
  bool powerSgdFeedback = true;
  /// The state, read and written in place (null: none): the error
  /// feedback of int8 blocks and top-k; PowerSGD's Q's, then residuals.
  float *feedback = nullptr;
  size_t feedbackCount = 0; ///< its values
  /// The same state kept in bf16 (the compiler's state-bf16) instead of
  /// `feedback`: the communicator widens it for the call and rounds it back
  /// to nearest even after.
  uint16_t *feedbackBf16 = nullptr;

  bool compressed() const { return codec != Codec::None; }
};

/// The text of the compiler's encoding (hpcrt.h: "int8_block:B",
/// "topk:RATIO", "powersgd:R" or "powersgd:R:no_feedback") into `c`; the
/// error line ("" when well formed).
std::string parseCompression(const std::string &text, Compression &c);

// int8 blocks.
/// Encodes v[0, n) into `out`; `error` (may be null) receives v - decoded.
void int8BlockEncode(const float *v, size_t n, int64_t block, char *out, float *error);
/// out[i] = q[i] * scale.
void int8BlockDecode(const char *in, size_t n, int64_t block, float *out);
/// acc[i] += q[i] * scale.
void int8BlockDecodeAdd(const char *in, size_t n, int64_t block, float *acc);

// Top-k.
/// Encodes the k values of v[0, n) of largest magnitude (a NaN above an
/// infinity above every finite value; ties to the lower index) as k pairs;
/// `error` (may be null) receives what was left out (0 where a value was
/// sent or is not finite).
void topkEncode(const float *v, size_t n, size_t k, char *out, float *error);
/// acc[index] += value for the k pairs of `in`; fails on an index >= n.
void topkDecodeAdd(const char *in, size_t k, size_t n, float *acc);

// The elementwise codecs (int8 blocks, top-k) of a piece of n values.
/// Its bytes on the wire.
size_t pieceBytes(const Compression &c, size_t n);
/// Encodes v[0, n) into `out`, the error into `error` (may be null).
void encodePiece(const Compression &c, const float *v, size_t n, char *out, float *error);
/// Adds the decoded piece to acc[0, n).
void decodeAddPiece(const Compression &c, const char *in, size_t n, float *acc);

// PowerSGD.
/// Pt[r][i] = sum_j M[i][j] * Qt[r][j].
void powerSgdProject(const float *M, int64_t rows, int64_t cols, const float *Qt, int64_t R,
                     float *Pt);
/// Qt[r][j] = sum_i Pt[r][i] * M[i][j].
void powerSgdBack(const float *M, int64_t rows, int64_t cols, const float *Pt, int64_t R,
                  float *Qt);
/// The R vectors Pt[r] (of `rows` values) made orthonormal in order
/// (modified Gram-Schmidt, sums in double); a vector with nothing left
/// after the projections becomes zero.
void orthonormalize(float *Pt, int64_t R, int64_t rows);
/// The result and the residual: with A = Pt^T Qt (rows x cols),
/// residual[i][j] = M[i][j] - A[i][j] * share (when `residual` is not
/// null), then M[i][j] = A[i][j].
void powerSgdExpand(const float *Pt, const float *Qt, int64_t rows, int64_t cols, int64_t R,
                    float *M, float *residual, float share);
/// Whether Qt (R x cols) is all zero: a Q never started (or a matrix
/// whose gradient was zero), which powerSgdStartQ then fills.
bool isZero(const float *v, size_t n);
/// A Q to start from: values in [-1, 1) from a hash of (seed, index), the
/// same on every rank.
void powerSgdStartQ(float *Qt, size_t n, uint64_t seed);

} // namespace comm
} // namespace hpcrt

#endif // HPCRT_COMM_CODEC_H
