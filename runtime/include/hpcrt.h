/*===- hpcrt.h - the HPC-Opt runtime's C ABI ---------------------*- C -*-===*
 *
 * The contract between a compiled program and libhpcrt. The compiler decides
 * everything (shapes, buffer offsets, the order of kernels); the runtime only
 * obeys: it maps the weights, allocates one arena of the planned size, binds
 * inputs and outputs, and then the compiled code calls one kernel per op.
 *
 * What the compiled object file defines
 * -------------------------------------
 *   const char hpc_manifest[];        NUL-terminated JSON, see "Manifest".
 *   void hpc_program_run(hpcrt_ctx *ctx);
 *                                     the op sequence: one hpcrt_<op> call
 *                                     per hpc op, in program order.
 *
 * Kernel entry points (defined by libhpcrt)
 * -----------------------------------------
 *   void hpcrt_<mnemonic>(hpcrt_ctx *ctx, int32_t op, const int32_t *ids,
 *                         const int64_t *iattrs, const double *fattrs,
 *                         const char *const *sattrs);
 *
 *   <mnemonic> is the hpc op name without the dialect prefix (hpc.matmul ->
 *   hpcrt_matmul, hpc.layer_norm -> hpcrt_layer_norm). Ops that only
 *   reinterpret a buffer (reshape, squeeze, unsqueeze) have no kernel: the
 *   compiler gives their result the operand's storage with another shape.
 *   hpc.constant and hpc.weight have no kernel either: their data is in the
 *   weights file.
 *
 *   op      index of this op in the manifest's "ops" list (trace, errors).
 *   ids     [n_results, result ids..., n_operands, operand ids...]: tensor
 *           ids in the manifest's "tensors" table, in the op's ODS order.
 *           An absent optional operand (gemm c, conv bias, layer_norm bias)
 *           is -1 at its position, so n_operands is fixed per op.
 *   iattrs, fattrs, sattrs
 *           the op's attributes, defaults filled in, in ALPHABETICAL order of
 *           attribute name, each appended to the array of its kind:
 *             I64Attr, BoolAttr            -> 1 value in iattrs (bool 0/1)
 *             DenseI64ArrayAttr            -> count, then values, in iattrs
 *             F64Attr                      -> 1 value in fattrs
 *             DenseF64ArrayAttr            -> count in iattrs, values in fattrs
 *             StrAttr                      -> 1 string in sattrs
 *             TypeAttr (hpc.cast "to")     -> dtype code in iattrs
 *           Absent optional attributes (hpc.clip min/max) are encoded as a
 *           presence flag in iattrs (0/1) followed, when present, by the
 *           value in its array.
 *           Example: hpc.conv {dilations=[1,1], group=1, pads=[1,1,1,1],
 *           strides=[2,2]} -> iattrs = {2,1,1, 1, 4,1,1,1,1, 2,2,2}.
 *
 * Manifest (JSON in hpc_manifest)
 * -------------------------------
 *   {
 *     "version": 1,
 *     "model": "gpt2.onnx",
 *     "arena_bytes": 123456,             planned peak of the arena
 *     "weights": {"file": "gpt2.bin.safetensors", "bytes": N,
 *                 "hash": "16 hex digits"},
 *     "inputs":  [{"name": "input_ids", "tensor": 0}, ...],
 *     "outputs": [{"name": "logits", "tensor": 57}, ...],
 *     "tensors": [{"dtype": 1, "shape": [1,16], "region": "input",
 *                  "index": 0, "offset": 0}, ...],
 *          region: "input" (index = input number), "arena" (offset in the
 *          arena), "weights" (offset in the weights data section).
 *     "ops": [{"name": "hpc.matmul", "loc": "node name"}, ...]
 *   }
 *
 * Weights file
 * ------------
 *   safetensors: 8-byte little-endian header size, JSON header (one entry
 *   per tensor with dtype, shape and data_offsets, and "__metadata__" with
 *   "hpc_hash"), then the data section. Tensor offsets in the manifest are
 *   relative to the data section. hpc_hash is hpcrt_hash64 of the data
 *   section, as 16 lowercase hex digits; the runtime checks both the
 *   metadata and the data against the manifest.
 *
 * How libhpcrt reads the points above (where this header left a choice)
 * ---------------------------------------------------------------------
 *   - Optional attributes: each takes its alphabetical place like any other;
 *     the flag goes to iattrs, the value (when present) to its own array.
 *     hpc.clip: iattrs = {has_max, has_min}, fattrs = {max?, min?}.
 *   - Variadic ops: hpc.concat has as many operands, hpc.split as many
 *     results, as the op has; n_operands/n_results give the count.
 *   - "weights" absent or null: the model has no weights file. "bytes" is
 *     the size of the data section (file size - 8 - header size) and must
 *     match exactly. "file" is resolved against the directory of the
 *     executable unless it is absolute (or --weights FILE is given). The
 *     data section is used in place (mmap) when 8 + header size is a
 *     multiple of 64 (pad the JSON header with spaces, as safetensors
 *     allows), otherwise it is copied once. Tensor offsets should be
 *     multiples of 64 (at least of the element size). Per-tensor entries
 *     of the safetensors header are not read; the manifest is the truth.
 *   - The arena is 64-byte aligned and exactly arena_bytes long; offsets
 *     should be multiples of 64 (at least of the element size). Results are
 *     always arena tensors. The high-water mark is the largest
 *     offset + bytes of any result a kernel writes.
 *   - "inputs"[i].tensor is the tensor of region "input" with index i.
 *   - "ops" is optional; when present, ops[op].name must be "hpc." +
 *     mnemonic of the kernel called with that op index (checked).
 *   - A result may share storage with an operand (same offset, same size)
 *     only for the elementwise kernels (unary ops, clip, binary ops, where,
 *     cast between equal-size types) and scatter_elements; every other
 *     kernel needs results disjoint from its operands.
 *   - Errors inside a kernel (an index out of range, shapes that do not
 *     match the attributes) do not unwind into the compiled code: the
 *     kernel records the first error in the context and returns, later
 *     kernels do nothing, and the driver reports the error after
 *     hpc_program_run returns. Compiled code never checks anything.
 *   - Semantics the .td leaves open: integer division and remainder by
 *     zero give 0 (INT_MIN / -1 wraps to INT_MIN); integer arithmetic
 *     wraps; float -> integer cast truncates, NaN and out-of-range values
 *     give what x86 code gives (the low bits of INT32_MIN/INT64_MIN);
 *     f32 -> f16/bf16 rounds to nearest even; max/min/reduce_max/min
 *     propagate NaN; top_k returns sorted results even with sorted = 0
 *     (ties: lower index first, NaN above every number); one_hot gives an
 *     all-off row for an index outside [-depth, depth); resize
 *     align_corners uses scale * input length for the resized length, as
 *     the ONNX reference does; conv_transpose accepts negative pads (an
 *     output_shape larger than the natural size). f16 and bf16 compute in
 *     float.
 *
 *===----------------------------------------------------------------------===*/

#ifndef HPCRT_H
#define HPCRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types: the ONNX TensorProto.DataType codes. */
enum hpcrt_dtype {
  HPCRT_F32 = 1,
  HPCRT_U8 = 2,
  HPCRT_I8 = 3,
  HPCRT_U16 = 4,
  HPCRT_I16 = 5,
  HPCRT_I32 = 6,
  HPCRT_I64 = 7,
  HPCRT_BOOL = 9,
  HPCRT_F16 = 10,
  HPCRT_F64 = 11,
  HPCRT_U32 = 12,
  HPCRT_U64 = 13,
  HPCRT_BF16 = 16
};

/* Opaque execution context: tensor table, arena, weights, trace. */
typedef struct hpcrt_ctx hpcrt_ctx;

/* The compiled program (defined in the compiler's object file). */
extern const char hpc_manifest[];
void hpc_program_run(hpcrt_ctx *ctx);

/* 64-bit hash of the weights data section: FNV-1a over little-endian 64-bit
 * words (the tail, fewer than 8 bytes, zero-padded into one last word),
 * starting from the FNV offset basis 0xcbf29ce484222325 with the prime
 * 0x100000001b3, then xor-ed with the byte length. */
uint64_t hpcrt_hash64(const void *data, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* HPCRT_H */
