/*===- FakeTrainProgramTokens.c - a stand-in train step of a token model --===*
 *
 * A train-step program with the inputs of a language model, so that `train
 * --tokens` can be tested: input_ids i64[4,8] (B = 4, T = 8), labels
 * i64[4,8], attention_mask f32[4,8], position_ids i64[1,8], and the step
 * inputs hpc.lr / hpc.step. The state is one param emb f32[16] (init: the
 * weights, 0.1 * arange(16)). Computed in C (hpcrt_tensor_data):
 *
 *   e = emb[input_ids]; loss = mean((e - labels / 16)^2)   (over B*T)
 *   grad.emb = scatter-add of 2 (e - labels / 16) / (B*T) by input_ids
 *   grad_norm = |grad.emb|; emb -= lr * grad.emb             (plain SGD)
 *
 * Outputs loss, grad_norm, grad.emb, and the inputs as the program saw them
 * (seen.input_ids, seen.labels, seen.attention_mask, seen.position_ids), so
 * the test reads back exactly which token windows each step got.
 *
 *===----------------------------------------------------------------------===*/

#include "hpcrt.h"

#include <math.h>
#include <string.h>

enum { B = 4, SEQ = 8, VOCAB = 16 };

const char hpc_manifest[] =
    "{\"version\": 1, \"model\": \"fake_tokens.onnx\", \"arena_bytes\": 896,"
    " \"state_bytes\": 64,"
    " \"weights\": {\"file\": \"fake_tokens.safetensors\", \"bytes\": 64,"
    "  \"hash\": \"ce7001ea24edf503\"},"
    " \"inputs\": [{\"name\": \"input_ids\", \"tensor\": 0},"
    "  {\"name\": \"labels\", \"tensor\": 1},"
    "  {\"name\": \"attention_mask\", \"tensor\": 2},"
    "  {\"name\": \"position_ids\", \"tensor\": 3},"
    "  {\"name\": \"hpc.lr\", \"tensor\": 4}, {\"name\": \"hpc.step\", \"tensor\": 5}],"
    " \"outputs\": [{\"name\": \"loss\", \"tensor\": 7},"
    "  {\"name\": \"grad_norm\", \"tensor\": 8},"
    "  {\"name\": \"seen.input_ids\", \"tensor\": 9},"
    "  {\"name\": \"seen.labels\", \"tensor\": 10},"
    "  {\"name\": \"seen.attention_mask\", \"tensor\": 11},"
    "  {\"name\": \"seen.position_ids\", \"tensor\": 12},"
    "  {\"name\": \"grad.emb\", \"tensor\": 13}],"
    " \"tensors\": ["
    "  {\"dtype\": 7, \"shape\": [4, 8], \"region\": \"input\", \"index\": 0},"
    "  {\"dtype\": 7, \"shape\": [4, 8], \"region\": \"input\", \"index\": 1},"
    "  {\"dtype\": 1, \"shape\": [4, 8], \"region\": \"input\", \"index\": 2},"
    "  {\"dtype\": 7, \"shape\": [1, 8], \"region\": \"input\", \"index\": 3},"
    "  {\"dtype\": 1, \"shape\": [], \"region\": \"input\", \"index\": 4},"
    "  {\"dtype\": 7, \"shape\": [], \"region\": \"input\", \"index\": 5},"
    "  {\"dtype\": 1, \"shape\": [16], \"region\": \"state\", \"offset\": 0},"
    "  {\"dtype\": 1, \"shape\": [], \"region\": \"arena\", \"offset\": 0},"
    "  {\"dtype\": 1, \"shape\": [], \"region\": \"arena\", \"offset\": 64},"
    "  {\"dtype\": 7, \"shape\": [4, 8], \"region\": \"arena\", \"offset\": 128},"
    "  {\"dtype\": 7, \"shape\": [4, 8], \"region\": \"arena\", \"offset\": 384},"
    "  {\"dtype\": 1, \"shape\": [4, 8], \"region\": \"arena\", \"offset\": 640},"
    "  {\"dtype\": 7, \"shape\": [1, 8], \"region\": \"arena\", \"offset\": 768},"
    "  {\"dtype\": 1, \"shape\": [16], \"region\": \"arena\", \"offset\": 832}],"
    " \"state\": [{\"name\": \"emb\", \"tensor\": 6, \"role\": \"param\","
    "  \"init\": \"weights\", \"weights_offset\": 0}],"
    " \"train\": {\"loss\": \"cross-entropy\", \"labels\": \"labels\", \"batch\": 4,"
    "  \"lr_input\": \"hpc.lr\", \"step_input\": \"hpc.step\", \"loss_output\": \"loss\","
    "  \"grad_norm_output\": \"grad_norm\","
    "  \"optimizer\": {\"name\": \"sgd\", \"lr\": 0.5},"
    "  \"lr_schedule\": {\"kind\": \"cosine\", \"warmup\": 2, \"total\": 10}}}";

void hpc_program_run(hpcrt_ctx *ctx) {
  if (hpcrt_in_setup_run(ctx))
    return; /* computes in C, not in kernels */
  const int64_t *ids = (const int64_t *)hpcrt_tensor_data(ctx, 0);
  const int64_t *labels = (const int64_t *)hpcrt_tensor_data(ctx, 1);
  const float *lr = (const float *)hpcrt_tensor_data(ctx, 4);
  float *emb = (float *)hpcrt_tensor_data(ctx, 6);
  float *loss = (float *)hpcrt_tensor_data(ctx, 7);
  float *gnorm = (float *)hpcrt_tensor_data(ctx, 8);
  float *grad = (float *)hpcrt_tensor_data(ctx, 13);
  float sum = 0, sq = 0;
  int i;

  memset(grad, 0, VOCAB * sizeof(float));
  for (i = 0; i < B * SEQ; ++i) {
    int64_t id = ids[i] & (VOCAB - 1);
    float d = emb[id] - (float)labels[i] / VOCAB;
    sum += d * d;
    grad[id] += 2.0f * d / (B * SEQ);
  }
  loss[0] = sum / (B * SEQ);
  for (i = 0; i < VOCAB; ++i)
    sq += grad[i] * grad[i];
  gnorm[0] = sqrtf(sq);
  for (i = 0; i < VOCAB; ++i)
    emb[i] -= lr[0] * grad[i];

  memcpy(hpcrt_tensor_data(ctx, 9), ids, B * SEQ * sizeof(int64_t));
  memcpy(hpcrt_tensor_data(ctx, 10), labels, B * SEQ * sizeof(int64_t));
  memcpy(hpcrt_tensor_data(ctx, 11), hpcrt_tensor_data(ctx, 2), B * SEQ * sizeof(float));
  memcpy(hpcrt_tensor_data(ctx, 12), hpcrt_tensor_data(ctx, 3), SEQ * sizeof(int64_t));
}
