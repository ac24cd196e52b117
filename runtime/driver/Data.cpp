//===- Data.cpp - the batches of a train run ------------------------------===//
//
// BatchLoader (see Data.h): matches --data/--tokens sources to the data
// inputs of the manifest, maps the files (.npy through io/TensorIO's header
// parser, raw uint16 tokens as they are), checks dtypes, per-sample shapes,
// sample counts and the batch dimension, and copies each step's rows into
// the context's input buffers.
//
//===----------------------------------------------------------------------===//

#include "Data.h"

#include "../io/TensorIO.h"

#include <algorithm>
#include <cstring>

namespace hpcrt::driver {

struct BatchLoader::Source {
  std::unique_ptr<MappedFile> file;
  const uint8_t *data = nullptr;
  int dtype = 0;
  int64_t count = 0;  ///< samples (Rows) or tokens (Tokens)
  size_t rowBytes = 0; ///< Rows: bytes per sample
};

namespace {

bool isInteger(int dtype) {
  switch (dtype) {
  case HPCRT_U8:
  case HPCRT_I8:
  case HPCRT_U16:
  case HPCRT_I16:
  case HPCRT_I32:
  case HPCRT_I64:
  case HPCRT_U32:
  case HPCRT_U64:
    return true;
  default:
    return false;
  }
}

template <typename T> int64_t load(const uint8_t *p) {
  T v;
  memcpy(&v, p, sizeof(T));
  return static_cast<int64_t>(v);
}

template <typename T> void store(uint8_t *p, T v) { memcpy(p, &v, sizeof(T)); }

/// An integer element of `dtype` (one of isInteger's).
int64_t loadInt(const uint8_t *p, int dtype) {
  switch (dtype) {
  case HPCRT_U8: return load<uint8_t>(p);
  case HPCRT_I8: return load<int8_t>(p);
  case HPCRT_U16: return load<uint16_t>(p);
  case HPCRT_I16: return load<int16_t>(p);
  case HPCRT_I32: return load<int32_t>(p);
  case HPCRT_U32: return load<uint32_t>(p);
  case HPCRT_I64: return load<int64_t>(p);
  case HPCRT_U64: return load<uint64_t>(p);
  default: return 0;
  }
}

/// Stores `v` as one element of `dtype` (integers wrap; f16/bf16 only
/// store 0 and 1, which is all the loader writes to them).
void storeInt(uint8_t *p, int dtype, int64_t v) {
  switch (dtype) {
  case HPCRT_U8:
  case HPCRT_I8: store(p, static_cast<uint8_t>(v)); break;
  case HPCRT_BOOL: store(p, static_cast<uint8_t>(v != 0)); break;
  case HPCRT_U16:
  case HPCRT_I16: store(p, static_cast<uint16_t>(v)); break;
  case HPCRT_I32:
  case HPCRT_U32: store(p, static_cast<uint32_t>(v)); break;
  case HPCRT_I64:
  case HPCRT_U64: store(p, v); break;
  case HPCRT_F32: store(p, static_cast<float>(v)); break;
  case HPCRT_F64: store(p, static_cast<double>(v)); break;
  case HPCRT_F16: store(p, static_cast<uint16_t>(v ? 0x3c00 : 0)); break;
  case HPCRT_BF16: store(p, static_cast<uint16_t>(v ? 0x3f80 : 0)); break;
  default: break;
  }
}

/// The largest value of an integer dtype (one of isInteger's).
int64_t maxOf(int dtype) {
  switch (dtype) {
  case HPCRT_U8: return UINT8_MAX;
  case HPCRT_I8: return INT8_MAX;
  case HPCRT_U16: return UINT16_MAX;
  case HPCRT_I16: return INT16_MAX;
  case HPCRT_I32: return INT32_MAX;
  case HPCRT_U32: return UINT32_MAX;
  default: return INT64_MAX;
  }
}

/// The element of `dtype` at `p` as text (u64 past int64 included).
std::string intText(const uint8_t *p, int dtype) {
  if (dtype == HPCRT_U64) {
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return std::to_string(v);
  }
  return std::to_string(loadInt(p, dtype));
}

bool endsWith(const std::string &s, const char *tail) {
  size_t n = strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

std::string dataInputList(const Context &ctx) {
  std::string s;
  for (size_t i = 0; i < ctx.inputList().size(); ++i)
    if (ctx.train().isDataInput(static_cast<int>(i)))
      s += (s.empty() ? "'" : ", '") + ctx.inputList()[i].name + "'";
  return s.empty() ? "none" : s;
}

std::string describeInput(const Context &ctx, int k) {
  const Tensor &t = ctx.tensor(ctx.inputList()[k].tensor);
  return dtypeName(t.dtype) + " " + shapeString(t.shape);
}

} // namespace

BatchLoader::~BatchLoader() = default;

BatchLoader::BatchLoader(const Context &ctx, const DataArgs &args, DataRank rank)
    : batch_(ctx.train().batch) {
  const auto &inputs = ctx.inputList();
  std::vector<bool> fed(inputs.size(), false);
  for (const auto &[name, file] : args.files)
    addFile(ctx, args, name, file, rank, fed);
  if (!args.tokens.empty())
    addTokens(ctx, args, rank, fed);
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (fed[k] || !ctx.train().isDataInput(static_cast<int>(k)))
      continue;
    if (!args.tokens.empty() &&
        (inputs[k].name == "attention_mask" || inputs[k].name == "position_ids")) {
      Feed f;
      f.input = static_cast<int>(k);
      f.kind = inputs[k].name == "attention_mask" ? Kind::Ones : Kind::Positions;
      f.dtype = ctx.tensor(inputs[k].tensor).dtype;
      if (f.kind == Kind::Positions && !isInteger(f.dtype) && f.dtype != HPCRT_F32 &&
          f.dtype != HPCRT_F64)
        fail("input 'position_ids' is " + dtypeName(f.dtype) +
             "; the loader writes positions to integer, f32 or f64 inputs");
      feeds_.push_back(f);
      names_.push_back(inputs[k].name + " <- " + (f.kind == Kind::Ones ? "ones" : "0..T-1"));
      continue;
    }
    fail("missing " + args.filesFlag + " for input '" + inputs[k].name + "' (" +
         describeInput(ctx, static_cast<int>(k)) + "): pass " + args.filesFlag + " " +
         inputs[k].name + "=FILE.npy" +
         (args.tokens.empty() ? "" : " (" + args.tokensFlag + " does not feed it)"));
  }
}

BatchLoader::Feed BatchLoader::rowsOf(const Context &ctx, int k, DataRank rank) const {
  const Tensor &t = ctx.tensor(ctx.inputList()[k].tensor);
  Feed f;
  f.input = k;
  f.dtype = t.dtype;
  f.rows = t.shape[0];
  f.rowElems = f.rows ? t.numel / f.rows : 0;
  if (f.rows == batch_)
    return f;
  if (rank.size > 1 && batch_ % rank.size == 0 && f.rows == batch_ / rank.size) {
    f.firstRow = rank.index * f.rows;
    return f;
  }
  fail("manifest: data input '" + ctx.inputList()[k].name + "' (" + describeInput(ctx, k) +
       ") has first dimension " + std::to_string(f.rows) + ", not the batch " +
       std::to_string(batch_) +
       (rank.size > 1 ? " or the batch / dp = " + std::to_string(batch_ / rank.size) : ""));
}

void BatchLoader::setSamples(int64_t n, const std::string &what, const std::string &flag) {
  if (n < batch_)
    fail(flag + " " + what + ": " + std::to_string(n) + " sample" + (n == 1 ? "" : "s") +
         ", fewer than the batch of " + std::to_string(batch_));
  if (samples_ >= 0 && n != samples_)
    fail(flag + " " + what + ": " + std::to_string(n) + " samples, but " + samplesFrom_ +
         " has " + std::to_string(samples_) + " (every data source needs the same number)");
  if (samples_ < 0)
    samplesFrom_ = what;
  samples_ = n;
}

void BatchLoader::addFile(const Context &ctx, const DataArgs &args, const std::string &name,
                          const std::string &file, DataRank rank, std::vector<bool> &fed) {
  const auto &inputs = ctx.inputList();
  std::string what = name + "=" + file;
  size_t k = 0;
  while (k < inputs.size() && inputs[k].name != name)
    ++k;
  if (k == inputs.size())
    fail(args.filesFlag + " " + what + ": the program has no data input '" + name +
         "' (its data inputs: " + dataInputList(ctx) + ")");
  if (!ctx.train().isDataInput(static_cast<int>(k)))
    fail(args.filesFlag + " " + what + ": '" + name +
         "' is the step's " + (static_cast<int>(k) == ctx.train().lrInput ? "lr" : "number") +
         ", which the driver feeds");
  if (fed[k])
    fail(args.filesFlag + " " + name + " given twice");
  Feed f = rowsOf(ctx, static_cast<int>(k), rank);
  auto src = std::make_unique<Source>();
  src->file = std::make_unique<MappedFile>(file);
  NpyLayout npy = parseNpyHeader(src->file->data(), src->file->size(), file);
  const Tensor &t = ctx.tensor(inputs[k].tensor);
  std::vector<int64_t> sample(t.shape.begin() + 1, t.shape.end());
  std::vector<int64_t> got(npy.shape.begin() + (npy.shape.empty() ? 0 : 1), npy.shape.end());
  if (npy.dtype != t.dtype || npy.shape.empty() || got != sample)
    fail(args.filesFlag + " " + what + ": expected " + dtypeName(t.dtype) +
         " samples of shape " + shapeString(sample) + " (input '" + name + "' is " +
         describeInput(ctx, static_cast<int>(k)) + "), got " + dtypeName(npy.dtype) + " " +
         shapeString(npy.shape));
  src->data = src->file->data() + npy.dataOffset;
  if (args.checkInputs)
    checkFinite(npy.dtype, npy.shape, src->data, npy.dataBytes, args.filesFlag + " " + what,
                "--check-inputs");
  src->dtype = npy.dtype;
  src->count = npy.shape[0];
  src->rowBytes = static_cast<size_t>(f.rowElems) * dtypeSize(t.dtype);
  setSamples(src->count, what, args.filesFlag);
  names_.push_back(name + " <- " + file + " (" + std::to_string(src->count) + " samples)");
  f.kind = Kind::Rows;
  f.source = static_cast<int>(sources_.size());
  sources_.push_back(std::move(src));
  feeds_.push_back(f);
  fed[k] = true;
}

void BatchLoader::addTokens(const Context &ctx, const DataArgs &args, DataRank rank,
                            std::vector<bool> &fed) {
  const auto &inputs = ctx.inputList();
  const TrainInfo &train = ctx.train();
  const std::string &file = args.tokens;
  // The token input: the integer [b, T] data input that is not the labels.
  std::vector<int> candidates;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor &t = ctx.tensor(inputs[k].tensor);
    if (!fed[k] && train.isDataInput(static_cast<int>(k)) &&
        static_cast<int>(k) != train.labelsInput && isInteger(t.dtype) && t.rank() == 2 &&
        inputs[k].name != "attention_mask" && inputs[k].name != "position_ids")
      candidates.push_back(static_cast<int>(k));
  }
  if (candidates.size() > 1)
    for (int k : candidates)
      if (inputs[k].name == "input_ids")
        candidates = {k};
  if (candidates.empty())
    fail(args.tokensFlag + " " + file +
         ": the program has no integer [batch, T] input besides the labels to feed tokens to");
  if (candidates.size() > 1)
    fail(args.tokensFlag + " " + file + ": the program has several integer [batch, T] inputs ('" +
         inputs[candidates[0]].name + "', '" + inputs[candidates[1]].name +
         "'); feed the others with " + args.filesFlag);
  int tok = candidates[0];
  Feed window = rowsOf(ctx, tok, rank);
  seqLen_ = window.rowElems;
  int64_t T = seqLen_;

  auto src = std::make_unique<Source>();
  src->file = std::make_unique<MappedFile>(file);
  if (endsWith(file, ".npy")) {
    NpyLayout npy = parseNpyHeader(src->file->data(), src->file->size(), file);
    if (!isInteger(npy.dtype))
      fail(args.tokensFlag + " " + file + ": tokens must be integers, got " +
           dtypeName(npy.dtype));
    src->data = src->file->data() + npy.dataOffset;
    src->dtype = npy.dtype;
    src->count = static_cast<int64_t>(npy.dataBytes / dtypeSize(npy.dtype));
  } else {
    if (src->file->size() % 2)
      fail(args.tokensFlag + " " + file + ": " + std::to_string(src->file->size()) +
           " bytes, not a file of uint16 tokens (an odd size)");
    src->data = src->file->data();
    src->dtype = HPCRT_U16;
    src->count = static_cast<int64_t>(src->file->size() / 2);
  }
  checkTokenIds(*src, ctx, tok, args.tokensFlag + " " + file);
  int64_t samples = src->count > 0 ? (src->count - 1) / T : 0;
  if (samples < batch_)
    fail(args.tokensFlag + " " + file + ": " + std::to_string(src->count) + " tokens make " +
         std::to_string(samples) + " samples of " + std::to_string(T) +
         " tokens (and the next as label), fewer than the batch of " + std::to_string(batch_));
  setSamples(samples, file, args.tokensFlag);
  names_.push_back(inputs[tok].name + " <- " + file + " (" + std::to_string(src->count) +
                   " tokens, " + std::to_string(samples) + " samples of " + std::to_string(T) +
                   ")");
  window.kind = Kind::Tokens;
  window.source = static_cast<int>(sources_.size());
  feeds_.push_back(window);
  fed[tok] = true;

  int lab = train.labelsInput;
  if (lab >= 0 && !fed[lab]) {
    const Tensor &t = ctx.tensor(inputs[lab].tensor);
    const Tensor &w = ctx.tensor(inputs[tok].tensor);
    if (!isInteger(t.dtype) || t.shape != w.shape)
      fail(args.tokensFlag + " " + file + ": the labels input '" + inputs[lab].name + "' is " +
           describeInput(ctx, lab) + ", expected integers of the token input's shape " +
           shapeString(w.shape));
    Feed labels = rowsOf(ctx, lab, rank);
    labels.kind = Kind::Tokens;
    labels.source = window.source;
    labels.offset = 1;
    feeds_.push_back(labels);
    fed[lab] = true;
    names_.push_back(inputs[lab].name + " <- " + file + " (shifted by one)");
  }
  sources_.push_back(std::move(src));
}

void BatchLoader::checkTokenIds(const Source &src, const Context &ctx, int tok,
                                const std::string &what) const {
  // Ids are rows of an embedding: never negative (a Gather would count -1
  // from the end) and within the token input's dtype (no wrapping). Ids
  // past the vocabulary are the embedding Gather's error.
  const Tensor &t = ctx.tensor(ctx.inputList()[tok].tensor);
  int64_t limit = maxOf(t.dtype);
  int lab = ctx.train().labelsInput;
  if (lab >= 0)
    limit = std::min(limit, maxOf(ctx.tensor(ctx.inputList()[lab].tensor).dtype));
  bool isSigned = src.dtype == HPCRT_I8 || src.dtype == HPCRT_I16 || src.dtype == HPCRT_I32 ||
                  src.dtype == HPCRT_I64;
  if (!isSigned && src.dtype != HPCRT_U64 && maxOf(src.dtype) <= limit)
    return;
  size_t esize = dtypeSize(src.dtype);
  for (int64_t i = 0; i < src.count; ++i) {
    const uint8_t *p = src.data + static_cast<size_t>(i) * esize;
    int64_t v = loadInt(p, src.dtype);
    if (src.dtype != HPCRT_U64 && v < 0)
      fail(what + ": element " + std::to_string(i) + " is " + std::to_string(v) +
           ", a negative token id");
    // A u64 past int64 loads as negative: past every limit.
    bool past = src.dtype == HPCRT_U64 ? v < 0 || v > limit : v > limit;
    if (past)
      fail(what + ": element " + std::to_string(i) + " is " + intText(p, src.dtype) +
           ", past the largest token id the inputs take (" + std::to_string(limit) + ")");
  }
}

void BatchLoader::fill(Context &ctx, int64_t first) const {
  for (const Feed &f : feeds_) {
    uint8_t *dst = static_cast<uint8_t *>(ctx.inputData(static_cast<size_t>(f.input)));
    const Tensor &t = ctx.tensor(ctx.inputList()[f.input].tensor);
    size_t esize = dtypeSize(f.dtype);
    switch (f.kind) {
    case Kind::Rows: {
      const Source &s = *sources_[f.source];
      for (int64_t r = 0; r < f.rows; ++r) {
        int64_t sample = (first + f.firstRow + r) % samples_;
        uint8_t *row = dst + static_cast<size_t>(r) * s.rowBytes;
        memcpy(row, s.data + static_cast<size_t>(sample) * s.rowBytes, s.rowBytes);
        if (f.dtype == HPCRT_BOOL)
          for (size_t i = 0; i < s.rowBytes; ++i)
            row[i] = row[i] != 0;
      }
      break;
    }
    case Kind::Tokens: {
      const Source &s = *sources_[f.source];
      size_t tsize = dtypeSize(s.dtype);
      for (int64_t r = 0; r < f.rows; ++r) {
        int64_t sample = (first + f.firstRow + r) % samples_;
        const uint8_t *from = s.data + static_cast<size_t>(sample * seqLen_ + f.offset) * tsize;
        for (int64_t j = 0; j < f.rowElems; ++j)
          storeInt(dst + static_cast<size_t>(r * f.rowElems + j) * esize, f.dtype,
                   loadInt(from + static_cast<size_t>(j) * tsize, s.dtype));
      }
      break;
    }
    case Kind::Ones:
    case Kind::Positions: {
      int64_t last = t.shape.empty() ? 1 : t.shape.back();
      for (int64_t i = 0; i < t.numel; ++i)
        storeInt(dst + static_cast<size_t>(i) * esize, f.dtype,
                 f.kind == Kind::Ones ? 1 : (last ? i % last : 0));
      break;
    }
    }
  }
}

uint64_t BatchLoader::heldBytes() const {
  uint64_t n = 0;
  for (const auto &s : sources_)
    n += s->file->size();
  return n;
}

std::string BatchLoader::describe() const {
  std::string s;
  for (const std::string &n : names_)
    s += (s.empty() ? "" : "; ") + n;
  return s;
}

} // namespace hpcrt::driver
