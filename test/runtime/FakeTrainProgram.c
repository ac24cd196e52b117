/*===- FakeTrainProgram.c - a hand-written stand-in for a train step ------===*
 *
 * What the compiler emits for `hpc-opt --train`, written in C so that the
 * model executable is linked as a compiled one and `./model train` can be
 * tested before the compiler emits train steps: a linear least-squares model
 * trained by SGD with momentum, computed in C on the tensors' memory
 * (hpcrt_tensor_data), in one fixed order, so every run is bitwise
 * reproducible.
 *
 *   x f32[b,4], y f32[b]          data inputs (y: the labels), b = B = 8
 *   hpc.lr f32[], hpc.step i64[]  step inputs
 *   fc.weight f32[4], fc.bias f32[1]        state, params (init: weights)
 *   fc.weight.momentum_buffer f32[4],
 *   fc.bias.momentum_buffer f32[1]          state, optimizer (init: zeros)
 *   r = x @ w + b - y; loss = sum(r^2) / B
 *   grad.fc.weight = 2 x^T r / B, grad.fc.bias = 2 sum(r) / B
 *   grad_norm = |(grad.fc.weight, grad.fc.bias)|
 *   buf = 0.9 buf + g; p -= lr * buf     (torch.optim.SGD, momentum 0.9)
 *   outputs loss, grad_norm, grad.fc.weight, grad.fc.bias, and the step's
 *   inputs as the program saw them: seen.x, seen.y, seen.step, seen.lr.
 *
 * Variants (-D): FAKE_TRAIN_MODEL="\"name.onnx\"" another model name (so
 * another plan hash, the same layout); FAKE_TRAIN_DP a data-parallel program
 * on the mesh dp=2: each rank holds b = B/2 rows and the partial sums are
 * all-reduced (hpcrt_all_reduce, sum) before the update.
 *
 *===----------------------------------------------------------------------===*/

#include "hpcrt.h"

#include <math.h>
#include <string.h>

void hpcrt_all_reduce(hpcrt_ctx *, int32_t, const int32_t *, const int64_t *,
                      const double *, const char *const *);

#ifndef FAKE_TRAIN_MODEL
#define FAKE_TRAIN_MODEL "\"fake_train.onnx\""
#endif

#define GLOBAL_B 8
#ifdef FAKE_TRAIN_DP
#define LOCAL_B 4
#define LOCAL_B_TEXT "4"
#define MESH_TEXT                                                              \
  ", \"mesh\": {\"axes\": [{\"name\": \"dp\", \"size\": 2,"                    \
  " \"level\": \"intra_node\"}]}"
#else
#define LOCAL_B 8
#define LOCAL_B_TEXT "8"
#define MESH_TEXT ""
#endif

const char hpc_manifest[] =
    "{\"version\": 1, \"model\": " FAKE_TRAIN_MODEL ", \"arena_bytes\": 704,"
    " \"state_bytes\": 256,"
    " \"weights\": {\"file\": \"fake_train.safetensors\", \"bytes\": 128,"
    "  \"hash\": \"3ab223ff6781e688\"},"
    " \"inputs\": [{\"name\": \"x\", \"tensor\": 0}, {\"name\": \"y\", \"tensor\": 1},"
    "  {\"name\": \"hpc.lr\", \"tensor\": 2}, {\"name\": \"hpc.step\", \"tensor\": 3}],"
    " \"outputs\": [{\"name\": \"loss\", \"tensor\": 8},"
    "  {\"name\": \"grad_norm\", \"tensor\": 9},"
    "  {\"name\": \"grad.fc.weight\", \"tensor\": 10},"
    "  {\"name\": \"grad.fc.bias\", \"tensor\": 11},"
    "  {\"name\": \"seen.x\", \"tensor\": 12}, {\"name\": \"seen.y\", \"tensor\": 13},"
    "  {\"name\": \"seen.step\", \"tensor\": 14}, {\"name\": \"seen.lr\", \"tensor\": 15}],"
    " \"tensors\": ["
    "  {\"dtype\": 1, \"shape\": [" LOCAL_B_TEXT ", 4], \"region\": \"input\", \"index\": 0},"
    "  {\"dtype\": 1, \"shape\": [" LOCAL_B_TEXT "], \"region\": \"input\", \"index\": 1},"
    "  {\"dtype\": 1, \"shape\": [], \"region\": \"input\", \"index\": 2},"
    "  {\"dtype\": 7, \"shape\": [], \"region\": \"input\", \"index\": 3},"
    "  {\"dtype\": 1, \"shape\": [4], \"region\": \"state\", \"offset\": 0},"
    "  {\"dtype\": 1, \"shape\": [1], \"region\": \"state\", \"offset\": 64},"
    "  {\"dtype\": 1, \"shape\": [4], \"region\": \"state\", \"offset\": 128},"
    "  {\"dtype\": 1, \"shape\": [1], \"region\": \"state\", \"offset\": 192},"
    "  {\"dtype\": 1, \"shape\": [], \"region\": \"arena\", \"offset\": 0},"
    "  {\"dtype\": 1, \"shape\": [], \"region\": \"arena\", \"offset\": 64},"
    "  {\"dtype\": 1, \"shape\": [4], \"region\": \"arena\", \"offset\": 128},"
    "  {\"dtype\": 1, \"shape\": [1], \"region\": \"arena\", \"offset\": 192},"
    "  {\"dtype\": 1, \"shape\": [" LOCAL_B_TEXT ", 4], \"region\": \"arena\", \"offset\": 256},"
    "  {\"dtype\": 1, \"shape\": [" LOCAL_B_TEXT "], \"region\": \"arena\", \"offset\": 384},"
    "  {\"dtype\": 7, \"shape\": [], \"region\": \"arena\", \"offset\": 448},"
    "  {\"dtype\": 1, \"shape\": [], \"region\": \"arena\", \"offset\": 512},"
    "  {\"dtype\": 1, \"shape\": [6], \"region\": \"arena\", \"offset\": 576},"
    "  {\"dtype\": 1, \"shape\": [6], \"region\": \"arena\", \"offset\": 640}],"
    " \"state\": ["
    "  {\"name\": \"fc.weight\", \"tensor\": 4, \"role\": \"param\", \"init\": \"weights\","
    "   \"weights_offset\": 0},"
    "  {\"name\": \"fc.bias\", \"tensor\": 5, \"role\": \"param\", \"init\": \"weights\","
    "   \"weights_offset\": 64},"
    "  {\"name\": \"fc.weight.momentum_buffer\", \"tensor\": 6, \"role\": \"optimizer\","
    "   \"init\": \"zeros\"},"
    "  {\"name\": \"fc.bias.momentum_buffer\", \"tensor\": 7, \"role\": \"optimizer\","
    "   \"init\": \"zeros\"}],"
    " \"train\": {\"loss\": \"mse\", \"labels\": \"y\", \"batch\": 8,"
    "  \"lr_input\": \"hpc.lr\", \"step_input\": \"hpc.step\", \"loss_output\": \"loss\","
    "  \"grad_norm_output\": \"grad_norm\","
    "  \"optimizer\": {\"name\": \"sgd\", \"lr\": 0.05, \"momentum\": 0.9},"
    "  \"lr_schedule\": {\"kind\": \"constant\"}}" MESH_TEXT "}";

#define T(id) ((float *)hpcrt_tensor_data(ctx, id))

void hpc_program_run(hpcrt_ctx *ctx) {
  if (hpcrt_in_setup_run(ctx))
    return; /* computes in C, not in kernels */
  const float *x = T(0), *y = T(1), *lr = T(2);
  const int64_t *step = (const int64_t *)hpcrt_tensor_data(ctx, 3);
  float *w = T(4), *b = T(5), *wbuf = T(6), *bbuf = T(7);
  float *partial = T(16), *sums = T(17);
  int i, j;

  memset(partial, 0, 6 * sizeof(float));
  for (i = 0; i < LOCAL_B; ++i) {
    float r = b[0] - y[i];
    for (j = 0; j < 4; ++j)
      r += x[4 * i + j] * w[j];
    partial[0] += r * r;
    for (j = 0; j < 4; ++j)
      partial[1 + j] += 2.0f * r * x[4 * i + j];
    partial[5] += 2.0f * r;
  }
#ifdef FAKE_TRAIN_DP
  {
    static const int32_t ids[] = {1, 17, 1, 16};
    static const int64_t iattrs[] = {1, 0, 0, 0}; /* dp, flat, sum */
    hpcrt_all_reduce(ctx, 0, ids, iattrs, 0, 0);
  }
#else
  memcpy(sums, partial, 6 * sizeof(float));
#endif

  float *loss = T(8), *gnorm = T(9), *gw = T(10), *gb = T(11);
  float sq = 0;
  loss[0] = sums[0] / GLOBAL_B;
  for (j = 0; j < 4; ++j) {
    gw[j] = sums[1 + j] / GLOBAL_B;
    sq += gw[j] * gw[j];
  }
  gb[0] = sums[5] / GLOBAL_B;
  sq += gb[0] * gb[0];
  gnorm[0] = sqrtf(sq);

  for (j = 0; j < 4; ++j) {
    wbuf[j] = 0.9f * wbuf[j] + gw[j];
    w[j] -= lr[0] * wbuf[j];
  }
  bbuf[0] = 0.9f * bbuf[0] + gb[0];
  b[0] -= lr[0] * bbuf[0];

  memcpy(T(12), x, LOCAL_B * 4 * sizeof(float));
  memcpy(T(13), y, LOCAL_B * sizeof(float));
  *(int64_t *)hpcrt_tensor_data(ctx, 14) = step[0];
  T(15)[0] = lr[0];
}
