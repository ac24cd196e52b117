/*===- FakeProgram.c - a hand-written stand-in for a compiled model -------===*
 *
 * What the compiler's object file provides (hpc_manifest, hpc_program_run),
 * written in C so the model executable is linked exactly as a compiled one:
 * program.o + libhpcrt.a + the libraries of hpcrt-link.txt.
 *
 *   x f32[2,3], y f32[3], idx i64[2]   inputs
 *   w f32[3,4]                         weights (arange(12) * 0.5 - 2)
 *   s = x + y; z = s @ w; probs = softmax(z, -1)
 *   rows = gather(w, idx, 0)           (reuses s's arena bytes)
 *   best = argmax(z, 1, keepdims=0)
 *
 *===----------------------------------------------------------------------===*/

#include "hpcrt.h"

#define KERNEL(name)                                                           \
  void hpcrt_##name(hpcrt_ctx *, int32_t, const int32_t *, const int64_t *,    \
                    const double *, const char *const *);
KERNEL(add)
KERNEL(matmul)
KERNEL(softmax)
KERNEL(gather)
KERNEL(argmax)

const char hpc_manifest[] =
    "{\"version\": 1, \"model\": \"fake.onnx\", \"arena_bytes\": 160,"
    " \"weights\": {\"file\": \"model.safetensors\", \"bytes\": 48,"
    "  \"hash\": \"87024be38e5d710d\"},"
    " \"inputs\": [{\"name\": \"x\", \"tensor\": 0}, {\"name\": \"y\", \"tensor\": 1},"
    "  {\"name\": \"idx\", \"tensor\": 2}],"
    " \"outputs\": [{\"name\": \"probs\", \"tensor\": 6},"
    "  {\"name\": \"rows/gathered\", \"tensor\": 7}, {\"name\": \"best\", \"tensor\": 8}],"
    " \"tensors\": ["
    "  {\"dtype\": 1, \"shape\": [2, 3], \"region\": \"input\", \"index\": 0},"
    "  {\"dtype\": 1, \"shape\": [3], \"region\": \"input\", \"index\": 1},"
    "  {\"dtype\": 7, \"shape\": [2], \"region\": \"input\", \"index\": 2},"
    "  {\"dtype\": 1, \"shape\": [3, 4], \"region\": \"weights\", \"offset\": 0},"
    "  {\"dtype\": 1, \"shape\": [2, 3], \"region\": \"arena\", \"offset\": 0},"
    "  {\"dtype\": 1, \"shape\": [2, 4], \"region\": \"arena\", \"offset\": 64},"
    "  {\"dtype\": 1, \"shape\": [2, 4], \"region\": \"arena\", \"offset\": 128},"
    "  {\"dtype\": 1, \"shape\": [2, 4], \"region\": \"arena\", \"offset\": 0},"
    "  {\"dtype\": 7, \"shape\": [2], \"region\": \"arena\", \"offset\": 32}],"
    " \"ops\": [{\"name\": \"hpc.add\", \"loc\": \"Add_0\"},"
    "  {\"name\": \"hpc.matmul\", \"loc\": \"MatMul_1\"},"
    "  {\"name\": \"hpc.softmax\", \"loc\": \"Softmax_2\"},"
    "  {\"name\": \"hpc.gather\", \"loc\": \"Gather_3\"},"
    "  {\"name\": \"hpc.argmax\", \"loc\": \"ArgMax_4\"}]}";

void hpc_program_run(hpcrt_ctx *ctx) {
  static const int32_t addIds[] = {1, 4, 2, 0, 1};
  static const int32_t matmulIds[] = {1, 5, 2, 4, 3};
  static const int32_t softmaxIds[] = {1, 6, 1, 5};
  static const int64_t softmaxI[] = {-1};
  static const int32_t gatherIds[] = {1, 7, 2, 3, 2};
  static const int64_t gatherI[] = {0};
  static const int32_t argmaxIds[] = {1, 8, 1, 5};
  static const int64_t argmaxI[] = {1, 0, 0};
  hpcrt_add(ctx, 0, addIds, 0, 0, 0);
  hpcrt_matmul(ctx, 1, matmulIds, 0, 0, 0);
  hpcrt_softmax(ctx, 2, softmaxIds, softmaxI, 0, 0);
  hpcrt_gather(ctx, 3, gatherIds, gatherI, 0, 0);
  hpcrt_argmax(ctx, 4, argmaxIds, argmaxI, 0, 0);
}
