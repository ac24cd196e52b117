//===- Data.h - the batches of a train run ----------------------*- C++ -*-===//
//
// Feeds the data inputs of a train-step program (every input but the lr and
// step inputs) for each step. Sources:
//   --data NAME=FILE.npy   the file's first dimension is the sample; the rest
//                          must be the input's per-sample shape and dtype;
//   --tokens FILE          raw little-endian uint16 (nanoGPT's train.bin) or a
//                          .npy of integers, flattened: sample k is the window
//                          t[k*T, k*T+T) for the token input and t[k*T+1,
//                          k*T+T+1) for the labels input, T = dim 1 of the
//                          token input, (len-1)/T samples; inputs named
//                          attention_mask get ones, position_ids 0..T-1.
//                          A negative id, or one the inputs' dtype cannot
//                          hold, is refused when the file is mapped.
// Step s takes the global samples first .. first+B-1 modulo the sample count
// (first = (s-1)*B for a run from step 1). A data input whose first dimension
// is B holds the whole batch; one whose first dimension is B/dp (a data-
// parallel program) holds the rows d*B/dp .. of it, d = this rank's dp
// coordinate. Files are mapped, not copied. Every problem is one
// hpcrt::Error naming the flag, the file and the input.
//
//===----------------------------------------------------------------------===//

#ifndef HPCRT_DRIVER_DATA_H
#define HPCRT_DRIVER_DATA_H

#include "Files.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hpcrt::driver {

/// Where the batches come from (one of --data / --eval-data's NAME=FILE
/// lists, with --tokens / --eval-tokens).
struct DataArgs {
  std::vector<std::pair<std::string, std::string>> files;
  std::string tokens;
  std::string filesFlag = "--data";    ///< for messages
  std::string tokensFlag = "--tokens"; ///< for messages
  bool checkInputs = false; ///< --check-inputs: refuse NaN and Inf in float files
  bool empty() const { return files.empty() && tokens.empty(); }
};

/// This rank's place in the data-parallel split of the batch.
struct DataRank {
  int64_t index = 0; ///< the data-parallel coordinate (dp, then ep)
  int64_t size = 1;  ///< the ranks of the axes "dp" and "ep" (1 without them)
};

class BatchLoader {
public:
  /// Maps and checks the sources against the program's data inputs.
  BatchLoader(const Context &ctx, const DataArgs &args, DataRank rank);
  ~BatchLoader();
  BatchLoader(const BatchLoader &) = delete;
  BatchLoader &operator=(const BatchLoader &) = delete;

  /// Writes this rank's rows of global samples first .. first+B-1 (modulo
  /// samples()) into the context's input buffers.
  void fill(Context &ctx, int64_t first) const;
  /// The number of samples of the sources (the same for every file).
  int64_t samples() const { return samples_; }
  /// Tokens per sample: T for --tokens, 0 otherwise.
  int64_t tokensPerSample() const { return seqLen_; }
  /// Bytes of the mapped files.
  uint64_t heldBytes() const;
  /// One line: what feeds each input ("x <- x.npy (20 samples)").
  std::string describe() const;

private:
  enum class Kind { Rows, Tokens, Ones, Positions };
  struct Source;
  struct Feed {
    int input = 0;
    Kind kind = Kind::Rows;
    int source = -1;     ///< index into sources_ (Rows, Tokens)
    int64_t offset = 0;  ///< Tokens: 0 for the window, 1 for the labels
    int64_t rows = 0;    ///< local rows (the first dimension)
    int64_t firstRow = 0; ///< the local rows' first row in the global batch
    int64_t rowElems = 0; ///< elements per row
    int dtype = 0;
  };
  std::vector<std::unique_ptr<Source>> sources_;
  std::vector<Feed> feeds_;
  std::vector<std::string> names_;
  int64_t samples_ = -1;
  std::string samplesFrom_; ///< the source that set samples_ (for messages)
  int64_t seqLen_ = 0;
  int64_t batch_ = 0;

  void addFile(const Context &ctx, const DataArgs &args, const std::string &name,
               const std::string &file, DataRank rank, std::vector<bool> &fed);
  void addTokens(const Context &ctx, const DataArgs &args, DataRank rank,
                 std::vector<bool> &fed);
  /// The rows of the global batch input `k` holds (checks its first dim).
  Feed rowsOf(const Context &ctx, int k, DataRank rank) const;
  void setSamples(int64_t n, const std::string &what, const std::string &flag);
  /// Fails on a token id below 0 or past the token and labels inputs'
  /// dtypes; `what` is "--tokens FILE".
  void checkTokenIds(const Source &src, const Context &ctx, int tok,
                     const std::string &what) const;
};

} // namespace hpcrt::driver

#endif // HPCRT_DRIVER_DATA_H
