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
 *           An absent optional operand (gemm c, conv bias and residual,
 *           layer_norm bias) is -1 at its position, so n_operands is fixed
 *           per op (conv: input, weight, bias, residual).
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
 *           Example: hpc.conv {activation="relu", dilations=[1,1], group=1,
 *           pads=[1,1,1,1], strides=[2,2]} -> iattrs = {2,1,1, 1, 4,1,1,1,1,
 *           2,2,2}, sattrs = {"relu"}.
 *           hpc.gemm and hpc.conv carry `activation` ("none", "relu",
 *           "gelu", "gelu_tanh", "sigmoid", "tanh", "silu"; set by the
 *           compiler's hpc-fuse-epilogues): the result is act(product +
 *           bias), one kernel call; a conv's residual (the result's shape,
 *           dtype and layout) is added before the activation:
 *           act(conv + bias + residual). operandSegmentSizes (which optional
 *           operands an op has) is not encoded: the ids say it.
 *
 * Manifest (JSON in hpc_manifest)
 * -------------------------------
 *   {
 *     "version": 1,
 *     "model": "gpt2.onnx",
 *     "model_path": "/abs/path/gpt2.onnx",  the source model at compile time
 *                                        (optional; `train --save-onnx`)
 *     "precision": "bf16",               --precision=bf16 (optional; absent:
 *                                        fp32); `info` prints it
 *     "recompute": "full",               --recompute=full|selective (optional;
 *                                        absent: none); `info` prints it
 *     "arena_bytes": 123456,             planned peak of the arena
 *     "weights": {"file": "gpt2.bin.safetensors", "bytes": N,
 *                 "hash": "16 hex digits",
 *                 "entries": [{"name": "wte", "offset": 0}, ...]},
 *          entries (optional): each header entry of the weights file by
 *          name and data offset; an entry at a listed offset must carry
 *          one of the names listed there (a renamed entry is refused).
 *     "inputs":  [{"name": "input_ids", "tensor": 0}, ...],
 *     "outputs": [{"name": "logits", "tensor": 57}, ...],
 *     "tensors": [{"dtype": 1, "shape": [1,16], "region": "input",
 *                  "index": 0, "offset": 0}, ...],
 *          region: "input" (index = input number), "arena" (offset in the
 *          arena), "weights" (offset in the weights data section).
 *          A weights tensor may be a rank's piece of a weight split along
 *          its outermost dimension (a dist.all_slice planned as a view):
 *          "rank_axes": [mesh axis indices], "rank_stride": bytes; its
 *          data starts at offset + i * rank_stride, i = this rank's group
 *          index over rank_axes (every rank's piece inside the weights).
 *     "ops": [{"name": "hpc.matmul", "loc": "node name"}, ...],
 *          a pipeline stage's op also has "block": "F3" (micro-batch 3's
 *          forward; "B3" its input gradients, "W3" its weight gradients,
 *          "F3.1" on model chunk 1, "pre", "step"), and a dist.wait on a
 *          receive from another stage "recv": true; the trace shows both.
 *     "mesh": {"axes": [{"name": "dp", "size": 2, "level": "inter_node"},
 *                       {"name": "tp", "size": 2, "level": "intra_node"}]},
 *     "bytes_per_rank": 1144             bytes each rank sends per run
 *   }                                    (the compiler's count; optional)
 *   "mesh" is present only in a partitioned program (see "Distributed
 *   programs"); without it the program runs on one rank, with no MPI.
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
 *     multiples of 64 (at least of the element size). The manifest is the
 *     truth: every per-tensor entry of the header must start where a
 *     tensor of the plan does, with its dtype and shape (a state tensor's
 *     initial value under the state's name), every planned offset has an
 *     entry, and no entry overlaps another (docs/compiling.md, "Runtime
 *     input files").
 *   - --weights FILE whose __metadata__ has no hpc_hash is a by-name file
 *     (`train --save`, or any safetensors of whole tensors named by the
 *     model's initializers), for any plan of the same model: the runtime
 *     reads the header of the binary's own weights file (hash-checked as
 *     above; here its per-tensor entries are read) and builds the data
 *     section from FILE: entry <name> is FILE's <name>; a slice entry
 *     <name>[a:b,c:d] (a:b:s with a step) is that box of FILE's <name>; an
 *     entry with metadata pieces_of.<entry> = {"dim": D, "shape": S} is
 *     stored [G, piece...] and piece g is the g-th of G blocks along D of
 *     FILE's tensor of shape S (or of its slice); const.N entries, and
 *     integer or bool entries FILE lacks, are the own file's bytes. Dtypes
 *     and shapes must match (a slice must lie inside the tensor); a missing
 *     floating-point tensor, a mismatch, or a FILE with none of the plan's
 *     names is one error naming the tensor and FILE; tensors FILE has that
 *     no entry reads: one warning with their count. The result is a heap
 *     copy of "bytes" bytes (no hash: its bytes are not the compiled ones).
 *   - The arena is 64-byte aligned and exactly arena_bytes long; offsets
 *     should be multiples of 64 (at least of the element size). Results are
 *     always arena tensors. The high-water mark is the largest
 *     offset + bytes of any result a kernel writes.
 *   - "inputs"[i].tensor is the tensor of region "input" with index i.
 *   - "ops" is optional; when present, ops[op].name must be "hpc." +
 *     mnemonic of the kernel called with that op index, or "dist." +
 *     mnemonic for the dist kernels below (checked).
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
 *     float, except where oneDNN has bf16 kernels on this CPU (products in
 *     bf16 with f32 accumulation, rounded once).
 *   - Kernel states. matmul, gemm, conv, conv_transpose and
 *     conv_weight_grad run on oneDNN primitives made once per op for its
 *     fixed shapes. The driver calls hpc_program_run once after prepare in
 *     a setup run, in which only these kernels run and only make their
 *     primitive (and reorder constant filters into the layout it picked);
 *     then the one scratchpad they share is allocated. Their bytes
 *     (scratchpad, reordered weights) are part of the context's resident
 *     bytes and printed by `run --verbose` and `info`. A kernel called
 *     without a setup run makes its primitive on the first call.
 *   - Threads. oneDNN runs on OpenMP, the other kernels on the runtime's
 *     pool, one kernel at a time. Model executables run with
 *     GOMP_SPINCOUNT=30000 unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set
 *     (main() sets it and runs itself again, as libgomp reads it only when
 *     it is loaded), so idle OpenMP threads sleep after ~1 ms instead of
 *     libgomp's default ~7 ms of spinning against the pool; a program that
 *     embeds libhpcrt sets its own. Products below ~5 MFLOP run on the
 *     calling thread alone.
 *
 *
 * Training programs (hpc-opt --train; docs/training.md)
 * -----------------------------------------------------
 *   A train-step program is one compiled step: forward, loss, backward and
 *   optimizer updates. Its mutable state (fp32 master weights, optimizer
 *   moments) lives in a third buffer, the state region, that the runtime
 *   allocates once (64-byte aligned, exactly "state_bytes" long),
 *   initializes, keeps across steps and checkpoints. The manifest adds:
 *
 *     "state_bytes": N,
 *     "state": [{"name": "fc0.weight", "tensor": 3, "role": "param",
 *                "init": "weights", "weights_offset": 1024},
 *               {"name": "fc0.weight.exp_avg", "tensor": 9,
 *                "role": "optimizer", "init": "zeros"}, ...],
 *          every state tensor (region "state", offset = byte offset in
 *          the state buffer) is listed once; other tensors of region
 *          "state" are views of listed ones (same offset and bytes, another
 *          shape: a reshaped parameter). role "param" is a model weight
 *          (saved under its initializer name by `train --save`),
 *          "buffer" model state that is not trained (batch-norm running
 *          statistics in train mode; saved like a param), "optimizer" is
 *          optimizer state, "error_feedback" a compressed reduction's
 *          residual (this rank's; the reduction writes it in place),
 *          "rng" the seed of train-mode dropout (a 0-d
 *          i64 "hpc.rng_seed", checkpointed with the rest). init "weights": copy the
 *          tensor's bytes from the weights data section at weights_offset;
 *          "zeros": fill with zeros.
 *     "train": {"loss": "cross-entropy" | "mse" | "output",
 *               "labels": "labels",       the input the loss added (labels
 *                                          or target; absent for "output")
 *               "batch": 8,               the global batch B (first dim of
 *                                          every data input)
 *               "lr_input": "hpc.lr",      0-d f32 input: this step's lr
 *               "step_input": "hpc.step",  0-d i64 input: the step, from 1
 *               "loss_output": "loss",     0-d f32 output
 *               "grad_norm_output": "grad_norm",  0-d f32 output: the global
 *                                          L2 norm of the gradients (before
 *                                          clipping)
 *               "optimizer": {"name": "sgd" | "adamw", "lr": 0.01,
 *                             "momentum": 0.9, ...},  the compiled values
 *               "lr_schedule": {"kind": "constant" | "cosine" | "linear",
 *                               "warmup": W, "total": T}}
 *   Every other input is a data input, read from --data/--tokens. Outputs
 *   named "grad.<name>" (compiled with --keep-gradients) are the gradients
 *   of the state tensor <name> at this step, before clipping.
 *
 *   Learning rate of step s (from 1), k = s - 1, base lr from the manifest
 *   or `train --lr`: constant: lr; linear:W,T: k < W ? lr*k/max(1,W) :
 *   lr*max(0, (T-k)/max(1,T-W)); cosine:W,T: k < W ? lr*k/max(1,W) :
 *   lr*max(0, 0.5*(1+cos(pi*(k-W)/max(1,T-W)))) (the schedules of
 *   transformers' get_linear/cosine_schedule_with_warmup).
 *
 *   Kernels of the train ops (ids, then attributes as above):
 *   sgd_update      [0, 4, param, grad, lr, momentum_buffer | -1]
 *                   fattrs {momentum, weight_decay}, iattrs {nesterov}
 *   adamw_update    [0, 6, param, grad, exp_avg, exp_avg_sq, lr, step]
 *                   fattrs {beta1, beta2, eps, weight_decay}
 *                   Both write param (and their buffers) in place: those
 *                   operands are state tensors, and no later kernel of the
 *                   step reads them.
 *   dropout_mask    [1, mask, 2, seed, step]  fattrs {ratio}, iattrs
 *                   {stream}: element i is 0 when u < ratio, else
 *                   1/(1-ratio); u = the top 24 bits of splitmix64(key ^ i)
 *                   / 2^24, key = mix(mix(mix(seed) ^ step) ^ stream),
 *                   mix = splitmix64's finalizer (KernelsTrain.cpp).
 *   assign          [0, 2, target, value]: target (state) takes value's
 *                   bytes in place; no later kernel of the step reads it.
 *   conv_weight_grad [1, dw, 2, x, dy]  iattrs {dilations, group,
 *                   kernel_shape, pads, strides}
 *   max_pool_grad   [1, dx, 2, x, dy]   iattrs {ceil_mode, dilations,
 *                   kernel_shape, pads, strides}
 *   avg_pool_grad   [1, dx, 2, x, dy]   iattrs {ceil_mode,
 *                   count_include_pad, dilations, kernel_shape, pads, strides}
 *   gelu_grad       [1, dx, 2, x, dy]   sattrs {approximate}: dx = dy *
 *                   gelu'(x), "none" (erf) or "tanh" as hpc.gelu's.
 *   layer_norm_grad [1, dx, 3, x, scale, dy]  iattrs {axis} fattrs
 *                   {epsilon}: the input gradient of layer_norm, scale of
 *                   the normalized dims' shape.
 *
 *
 * The train command (runtime/driver; docs/training.md, "The train command")
 * -------------------------------------------------------------------------
 *   `./model train --data NAME=FILE.npy ... | --tokens FILE --steps N ...`
 *   runs a program whose manifest has "train" (`run` refuses it; `train`
 *   refuses a program without). How libhpcrt reads the section above:
 *   - "loss" absent reads as "output"; "grad_norm_output" is optional;
 *     optimizer.lr is the base lr unless --lr is given (one is required);
 *     lr_schedule absent is constant (--lr-schedule overrides it). Roles
 *     other than param/optimizer and inits other than weights/zeros are
 *     errors; state tensors must not overlap.
 *   - Data: step s (from 1) takes global samples (s-1)*B .. s*B-1 modulo
 *     the sample count (after a resume: from the checkpoint's data
 *     position). A data input whose first dimension is B holds the whole
 *     batch; one whose first dimension is B/dp (dp = the size of the mesh
 *     axis named "dp") holds rows d*B/dp .. of it, d = the rank's dp
 *     coordinate. --tokens: raw little-endian uint16 or a .npy of
 *     integers; sample k = t[k*T, k*T+T) for the token input (the integer
 *     [b, T] data input that is not the labels; "input_ids" when several),
 *     t[k*T+1, k*T+T+1) for the labels, (len-1)/T samples; inputs named
 *     attention_mask get ones, position_ids 0..T-1 (last dimension).
 *   - Each step: the batch, lr_input = the schedule's lr (as f32),
 *     step_input = s; the program runs once and updates the state in
 *     place; loss_output and grad_norm_output are read after it.
 *   - Checkpoints (--ckpt-dir DIR --ckpt-every K, and after the last step):
 *     DIR/step-N/rank-R.safetensors (one record per state tensor named by
 *     its state name; __metadata__: hpc_plan_hash, hpc_step, hpc_rank,
 *     hpc_format_version, hpc_slice.<name> = {"global_shape": [...],
 *     "slice": [[start, end], ...]}: the part of the whole tensor the rank
 *     holds) and DIR/step-N/manifest.json
 *     {format_version: 2, plan_hash, model, step, data_position:
 *     {next_sample, step}, rng: {seed_counter: 0}, world_size, layout,
 *     state_bytes, shards: [{file, bytes, hash}]}; hash = hpcrt_hash64 of
 *     the shard file, plan_hash = hpcrt_hash64 of hpc_manifest's text
 *     (without "model_path", re-serialized, when it has one: where the
 *     model was compiled from is not the plan) (16 hex digits each). Written to DIR/.tmp-step-N-XXXXXX, fsync-ed,
 *     renamed to DIR/step-N, then DIR/latest ("step-N") replaced
 *     atomically; the newest --ckpt-keep (3) step directories up to N stay.
 *     --resume takes the newest that verifies (skipping corrupt ones with a
 *     warning), --resume-from DIR/step-N that one. Another plan hash of
 *     the same manifest "model" is resharded (each rank assembles its
 *     slices from the shards' hpc_slice pieces; names, dtypes and whole
 *     shapes must match both ways; error feedback restarts at zero);
 *     another model is refused. A resumed run continues at N+1 and is
 *     bitwise the same run (on its own plan).
 *   - --save FILE: the param (and buffer) state tensors, whole, by state
 *     name (no hpc_hash: `run --weights FILE` lays it out for any plan,
 *     above). --save-onnx FILE.onnx: the model at manifest "model_path" (or
 *     --onnx MODEL.onnx) with the initializer of every param and buffer
 *     (same name, dtype and dims, else an error) replaced by TensorProto
 *     raw_data of the trained bytes (float_data etc., external_data and
 *     data_location dropped); every other protobuf field is copied as it
 *     was, external initializers are inlined; checked before step 1,
 *     written atomically after the last step by rank 0.
 *   - HPC_FAULT (environment, for tests; runtime/driver/Faults.h): faults
 *     at given steps, comma-separated (nan-grad, loss-spike, kill,
 *     kill-rank, kill-node, hang-rank, crash-in-checkpoint), armed only
 *     when HPC_ATTEMPT is unset or 0. Unset or empty: inert; a malformed
 *     value: error.
 *   - HPC_HEARTBEAT, HPC_ATTEMPT, HPC_RESTART_REASON: set by hpc-launch
 *     (runtime/driver/Launch.h).
 *   - train.loss_scale_input (optional): a 0-d f32 input the backward
 *     starts from; the runtime feeds 1 (NaN for the fault nan-grad).
 *   - hpcrt_tensor_data (below) is for hand-written stand-in programs.
 *
 *
 * Distributed programs (dist ops)
 * -------------------------------
 *   A partitioned program is the per-rank (SPMD) program of a mesh: every
 *   rank runs the same executable and the same op sequence on its local
 *   shapes. Every dist op lowers to a kernel call like an hpc op,
 *   hpcrt_<mnemonic>(ctx, op, ids, iattrs, fattrs, sattrs), listed in "ops"
 *   as "dist.<mnemonic>" (dist.all_reduce -> hpcrt_all_reduce).
 *
 *   Mesh and ranks. The manifest's mesh.axes are numbered 0, 1, ... in the
 *   listed order; the MPI world has exactly prod(size) ranks and rank r has
 *   the row-major coordinates of r over the axes (last axis fastest:
 *   dp=2, tp=2 -> rank = 2 * dp + tp). "level" is informative.
 *
 *   Groups. A collective over a list of axes A runs among the ranks whose
 *   coordinates on the axes not in A equal this rank's; g = the product of
 *   the sizes of A. A member's group index is the row-major index of its
 *   coordinates over A IN THE LISTED ORDER (over ["tp", "dp"] on dp=2, tp=2
 *   the group index is 2 * tp + dp).
 *
 *   Attribute encoding (alphabetical attribute order as for hpc ops):
 *     axes       (list of mesh axis names) -> count, then the mesh axis
 *                INDICES (positions in mesh.axes), in the listed order;
 *     axis       (send/recv) -> its mesh axis index;
 *     reduction  -> sum=0, max=1, min=2, prod=3, avg=4;
 *     dim, split_dim, concat_dim, root, offset -> one value each;
 *     ranks_per_node (all_reduce, reduce_scatter) -> one value, 0 when
 *                absent (the flat ring; P: in two levels, below);
 *     compression (all_reduce, reduce_scatter) -> one string in sattrs,
 *                "int8_block:B" (#dist.int8_block<block = B>),
 *                "topk:RATIO" (#dist.topk<ratio = RATIO>, 17 significant
 *                digits) or "powersgd:R" / "powersgd:R:no_feedback"
 *                (#dist.powersgd, all_reduce only); none when absent.
 *                PowerSGD adds two integer vectors after the axes: its
 *                pieces [2P, rows, cols, ...] (cols 0: a run of rows values
 *                reduced exactly) and its chunk bounds [K, b...] (piece
 *                indices; K = P' + 1 for the P' members of a node in two
 *                levels, hpc::dist::powerSgdChunks; [2, 0, P] flat). The op
 *                takes a second operand, its state, when it keeps one
 *                (always for PowerSGD): ids [1, y, 2, x, feedback] (below).
 *
 *   op              ids                 iattrs
 *   all_reduce      [1, y, 1, x]        [n, axes..., (PowerSGD's pieces,
 *                                       bounds), ranks_per_node, reduction]
 *   reduce_scatter  [1, y, 1, x]        [n, axes..., dim, ranks_per_node, reduction]
 *   all_gather      [1, y, 1, x]        [n, axes..., dim]
 *   all_to_all      [1, y, 1, x]        [n, axes..., concat_dim, split_dim]
 *   broadcast       [1, y, 1, x]        [n, axes..., root]
 *   all_slice       [1, y, 1, x]        [n, axes..., dim]
 *   send            [0, 1, x]           [axis, offset]
 *   recv            [1, y, 0]           [axis, offset]
 *   <op>_start      as <op>, with the token t in y's place (send_start:
 *                   [1, t, 1, x]); t is the buffer the op fills (a send's
 *                   token is an empty tensor)
 *   wait            [1, y, 1, t] or [0, 1, t]; y is planned as a view of t
 *
 *   Asynchronous forms. hpcrt_<op>_start checks its call at once, then
 *   queues the data movement on the runtime's communication thread, which
 *   runs queued operations in start order; hpcrt_wait blocks until the job
 *   of its token has run (and reports its error, if any); recv_start only
 *   posts its receive, which its wait completes, so a rank can start
 *   receives and then send (a halo exchange). A synchronous op
 *   first waits for everything started before it, so every rank issues its
 *   collectives in program order. The compiler keeps a start's operands
 *   and its token's buffer alive until the wait (to the end of the run
 *   when nothing waits); a run ends after every started op has finished.
 *
 *   Semantics (the compiler's, exactly; g = group size, i = group index):
 *     all_reduce      y = the elementwise reduction of every member's x;
 *                     avg = sum / g (integer division for integer types).
 *     reduce_scatter  y = piece i of the reduced tensor, `dim` split into g
 *                     equal pieces.
 *     compressed      (all_reduce, reduce_scatter with a compression; f32,
 *                     sum or avg) the hop across nodes (the whole group
 *                     when flat) is compressed; every member ends with
 *                     bitwise the same result (comm/Codec.h, MpiComm.h):
 *                     int8_block:B sends int8 blocks of B values with one
 *                     f32 scale each, as an all-to-all of the pieces, each
 *                     member summing its part in group order, then
 *                     (all_reduce) an all-gather of the quantized sums;
 *                     topk:RATIO sends each member's ceil(RATIO m) values
 *                     of largest magnitude as (u32 index, f32 value) pairs,
 *                     all-gathered and summed in group order
 *                     (reduce_scatter: each block's pairs to its member);
 *                     powersgd:R runs, for each matrix piece M, P = M Q
 *                     and Q' = M^T orth(P) as two f32 ring all-reduces
 *                     over the hop (the exact pieces travel with the P's)
 *                     and gives orth(P) Q'^T; in two levels the node's
 *                     ring splits at the chunk bounds. `feedback` (f32,
 *                     hpc::dist::codecStateElements values) holds the
 *                     compression error of what this rank sent, added to
 *                     what it sends in the next call, and PowerSGD's Q's
 *                     (first; a zero Q starts from a fixed pseudo-random
 *                     one, the same on every rank).
 *     all_gather      y = the members' x concatenated along `dim` in group
 *                     index order.
 *     all_to_all      x's `split_dim` is split into g pieces; piece j goes to
 *                     member j; y = the pieces received, concatenated along
 *                     `concat_dim` in group index order (the shape: x's with
 *                     split_dim / g and concat_dim * g).
 *     broadcast       y = x of the member with group index `root`.
 *     all_slice       y = piece i of x's `dim` split into g equal pieces
 *                     (every rank holds the whole x; no communication).
 *     send / recv     point-to-point along one axis: the peer is the rank
 *                     whose coordinate on `axis` is this rank's + offset
 *                     (other coordinates equal); recv offset -1 receives
 *                     what the previous rank sent with offset +1. Where
 *                     that coordinate is outside [0, size) there is no
 *                     peer: send does nothing, recv fills y with zeros.
 *                     Sends are buffered (they never wait for the
 *                     receiver); a run ends after every send completed.
 *   Reductions accumulate in the element type (f16/bf16 through float,
 *   rounded after each step; integers wrap); max/min propagate NaN; bool:
 *   sum and max are "or", min and prod are "and", avg is an error. Each
 *   chunk is reduced in one fixed order by one rank and copied to the
 *   others, so every member gets bitwise-identical results. all_reduce and
 *   broadcast may give y the storage of x; the others need them disjoint.
 *
 *   Collectives and the bytes each rank sends. The CPU communicator
 *   (runtime/comm/MpiComm) implements every collective over MPI point-to-
 *   point (Isend/Irecv pairs) with these algorithms, and counts the bytes
 *   it hands to sends; the compiler's bytes_per_rank must equal them
 *   (e = element size, B = bytes of x; g = 1 sends nothing):
 *     all_reduce      ring reduce-scatter then ring all-gather over g chunks
 *                     of the flattened tensor of n elements, chunk c has
 *                     n/g elements, one more when c < n%g. At step s
 *                     (0..g-2) member i sends chunk (i-s) mod g to member
 *                     i+1 in the reduce-scatter phase and chunk (i-s+1)
 *                     mod g in the all-gather phase:
 *                       sum_s [chunk((i-s) mod g) + chunk((i-s+1) mod g)] * e
 *                     (n divisible by g: 2 (g-1) n/g * e on every member).
 *     reduce_scatter  ring: g-1 steps of one result-sized block: (g-1) * B/g.
 *     all_gather      ring: g-1 steps of one piece: (g-1) * B.
 *     all_to_all      pairwise: g-1 exchanges of one piece: (g-1) * B/g.
 *     broadcast       pipelined chain root, root+1, ... (mod g): every member
 *                     but the last of the chain (group index root-1 mod g)
 *                     sends B; that one sends 0.
 *     all_slice       0.
 *     send            B when there is a peer, else 0; recv 0.
 *   A reduction with ranks_per_node = P runs in two levels over nodes of P
 *   consecutive world ranks: the group's members on one node (L of them,
 *   in group-index order, place l) and the members at place l on each of
 *   the N nodes (nodes in the order of their first member's group index,
 *   place k) form two rings (every node holds L members, else an error):
 *     all_reduce      the node's ring reduce-scatter pass over L chunks,
 *                     the ring all_reduce of this member's chunk ((l+1) mod
 *                     L) among the N members at place l, the node's ring
 *                     all-gather pass: the flat formula for (n, L, l) to
 *                     the node's next member, and for (chunk, N, k) to the
 *                     next node's member at place l.
 *     reduce_scatter  the blocks are packed by place (the N blocks of the
 *                     members at place p together), the node's ring
 *                     reduce-scatter of N-block pieces, then the ring
 *                     reduce-scatter among the N members at place l:
 *                     (L-1) * N * B/g, then (N-1) * B/g.
 *   avg divides once, by the whole group. `./model run --verbose` prints,
 *   on rank 0, one line per rank
 *   `comm: rank R sent B bytes in K collectives per run (C across nodes)`,
 *   K counting the collectives (all_slice excluded) and the sends and
 *   receives that had a peer, C the bytes to a rank on another node (the
 *   nodes MPI_COMM_TYPE_SHARED finds), then the compiler's bytes_per_rank,
 *   when the manifest has it, and its bytes_across_nodes (all ranks
 *   together) next to the ranks' sum of C, when the manifest has it.
 *
 *   Process model. With a mesh, `run` calls MPI_Init (thread level
 *   SERIALIZED: the main thread and the communication thread call MPI, one
 *   at a time; where MPI offers less, started ops run at their start),
 *   checks that the world size
 *   is prod(size) (else rank 0 prints `<prog>: error: compiled for N ranks
 *   (mesh dp=2, tp=2) but started with M; run it with mpirun -n N` and
 *   every rank exits 1), builds one communicator per subset of the mesh
 *   axes (MPI_Comm_split, at start, in the same order on every rank, so
 *   that a later collective involves only its group), runs, and calls
 *   MPI_Finalize. Every rank reads the whole inputs and maps the weights;
 *   rank 0 alone writes the outputs (whole tensors: the program gathers
 *   them) and prints the summary and timing. After the setup, after every
 *   run and after the outputs, the ranks agree (MPI_Allreduce) on whether
 *   any failed: the lowest failing rank prints its one line (`rank R: `
 *   before the message unless R is 0) and every rank exits 1 (mpirun then
 *   adds its own notice). After a kernel error a rank still takes part in
 *   the collectives that follow (with meaningless data), so that no rank
 *   waits forever. Each rank uses cores / (ranks on its node) OpenMP
 *   threads unless --threads or OMP_NUM_THREADS says otherwise. --trace
 *   writes one file (rank 0) with every rank's events, pid = rank, times
 *   relative to the barrier before the first run. `info` prints the mesh
 *   (no MPI). Without a mesh no MPI function is called, and a dist kernel
 *   fails ("a dist op in a program without a mesh").
 *
 *   The dist kernels call the collectives through one interface,
 *   runtime/comm/Communicator.h (a group's calls, counts in elements of a
 *   dtype); the CPU's is MPI's (MpiGroupComm, the ring algorithms above).
 *   GPU tensors: runtime/comm/NcclComm (library hpcrt_nccl, built where
 *   NCCL and CUDA's runtime exist) implements it over NCCL, one
 *   communicator per group (NCCL rank = group index, the ncclUniqueId made
 *   on group index 0 and broadcast through MPI); NCCL chooses its own
 *   algorithms, so its wire bytes are not the counts above.
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

/* Pipeline programs (hpc-opt --train --mesh=pp=P): the object file defines
 * instead one program per pipeline stage and a table of them,
 *   const int32_t hpc_stage_count;                  P
 *   const char *const hpc_stage_manifests[P];       stage K's manifest
 *   void (*const hpc_stage_programs[P])(hpcrt_ctx *);  stage K's run
 * (hpc_manifest_stageK and hpc_program_run_stageK). Stage K runs on the
 * ranks whose pp coordinate is K: pp is the mesh's first axis, so the world
 * ranks [K*N/P, (K+1)*N/P) of N. Each stage's manifest has the whole mesh
 * (pp first) and "pipeline": {"stage": K, "stages": P, "schedule": ...,
 * "micro_batches": M}; its program sends and receives along "pp" what
 * crosses stages, and every stage returns the step's outputs. */
extern const int32_t hpc_stage_count;
extern const char *const hpc_stage_manifests[];
extern void (*const hpc_stage_programs[])(hpcrt_ctx *ctx);

/* The stability guard's conservative plan (hpc-opt --train, unless
 * --no-conservative-plan; not with pipeline stages): the same step compiled
 * with conservative settings, its inputs, state and weights laid out as
 * the program's, and "conservative": {"lr_scale": F, ...} in its manifest.
 * The train command switches to it after --max-rollbacks rollbacks. */
extern const char hpc_conservative_manifest[];
void hpc_conservative_run(hpcrt_ctx *ctx);

/* 64-bit hash of the weights data section: FNV-1a over little-endian 64-bit
 * words (the tail, fewer than 8 bytes, zero-padded into one last word),
 * starting from the FNV offset basis 0xcbf29ce484222325 with the prime
 * 0x100000001b3, then xor-ed with the byte length. */
uint64_t hpcrt_hash64(const void *data, size_t bytes);

/* The data of tensor `id` of a prepared context (NULL for an id outside the
 * manifest's table or before the context is prepared). For hand-written
 * stand-in programs of the tests (test/runtime/FakeTrainProgram.c), which
 * compute in C what a compiled program would call kernels for; compiled
 * code never calls it. */
void *hpcrt_tensor_data(hpcrt_ctx *ctx, int32_t id);

/* Non-zero during the setup run (hpcrt.h, "Kernel states"): the driver calls
 * hpc_program_run once after prepare so that the kernels make their
 * primitives; a hand-written stand-in program that computes outside kernels
 * returns at once then. Compiled code never calls it (its kernels know). */
int hpcrt_in_setup_run(const hpcrt_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* HPCRT_H */
