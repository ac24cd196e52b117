#!/usr/bin/env python3
# Makes the PyTorch reference training trajectories that the training tests
# compare HPC-Opt's trainer with (scripts/compare_train_refs.py). Run once;
# the output is committed under test/models/train/, so the tests never need
# torch:
#
#   scripts/setup-ref-venv.sh                        # build/ref-venv (torch ...)
#   build/ref-venv/bin/python scripts/make_train_refs.py            # all models
#   build/ref-venv/bin/python scripts/make_train_refs.py mlp cnn    # a subset
#
# For every model the script rebuilds the SAME model in PyTorch with the
# weights read from the ONNX file's initializers, checks its forward output
# against onnxruntime on the ONNX model (and the model's committed reference
# output where there is one), then trains it in float32 with torch's own
# optimizers, twice from the same initial weights ("sgd" and "adamw"), for
# STEPS steps, and writes:
#
#   test/models/train/<model>/data/<input>.npy     data inputs (ONNX input
#                                                   names) and labels.npy
#   test/models/train/<model>/<opt>/ref.json       losses per step (before
#                                                   that step's update), the
#                                                   compile flags, optimizer
#                                                   hyperparameters, trained
#                                                   tensor names, versions
#   test/models/train/<model>/<opt>/grads-step1.npz, grads-step20.npz
#                                                   gradients of every trained
#                                                   tensor (keys = ONNX
#                                                   initializer names, ONNX
#                                                   layout, float32) at that
#                                                   step, before its update
#
# Which initializers are trained mirrors hpc-opt --train: every floating-point
# initializer with more than one element, except batch-norm running mean and
# variance; single-element float initializers and non-float initializers are
# constants. Step i (from 1) uses samples (i-1)*B .. i*B-1 (modulo the number
# of samples). Loss: F.cross_entropy (mean over non-ignored targets,
# ignore_index=-100) on the named logits tensor. The transformers models
# (test/models/{gpt2,llama}.onnx from scripts/export_transformers.py) are
# rebuilt as the transformers classes with the export's configs, so the
# reference is PyTorch's/transformers' own implementation of them.
import argparse
import hashlib
import importlib.util
import io
import json
import os
import platform
import sys
import warnings
import zipfile

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import TensorProto, numpy_helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_ROOT = os.path.join(ROOT, "test", "models", "train")
STEPS = 20
GRAD_STEPS = (1, STEPS)
IGNORE = -100
FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16}

OPTIMIZERS = {
    "sgd": {"name": "sgd", "torch": "torch.optim.SGD", "lr": 0.05, "momentum": 0.9,
            "dampening": 0.0, "nesterov": False, "weight_decay": 0.0, "maximize": False,
            "foreach": False,
            "update": "step 1: buf = g; later: buf = momentum*buf + g; p -= lr*buf"},
    "adamw": {"name": "adamw", "torch": "torch.optim.AdamW", "lr": 1e-3, "betas": [0.9, 0.999],
              "eps": 1e-8, "weight_decay": 0.01, "amsgrad": False, "maximize": False,
              "foreach": False,
              "update": "p *= 1 - lr*wd (every trained tensor); m = b1*m + (1-b1)*g; "
                        "v = b2*v + (1-b2)*g^2; p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)"},
}


def make_optimizer(name, params):
    o = OPTIMIZERS[name]
    if name == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"], dampening=o["dampening"],
                               nesterov=o["nesterov"], weight_decay=o["weight_decay"],
                               maximize=o["maximize"], foreach=False)
    return torch.optim.AdamW(params, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"],
                             weight_decay=o["weight_decay"], amsgrad=o["amsgrad"],
                             maximize=o["maximize"], foreach=False)


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --------------------------------------------------------------------------
# ONNX side: initializers, the trained-set rule, onnxruntime forward
# --------------------------------------------------------------------------
class OnnxModel:
    def __init__(self, rel_path):
        self.rel_path = rel_path
        self.path = os.path.join(ROOT, rel_path)
        self.proto = onnx.load(self.path)
        with open(self.path, "rb") as f:
            self.sha256 = hashlib.sha256(f.read()).hexdigest()
        g = self.proto.graph
        self.init_order = [t.name for t in g.initializer]
        self.inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        self.init_type = {t.name: t.data_type for t in g.initializer}
        init_names = set(self.init_order)
        self.inputs = [i.name for i in g.input if i.name not in init_names]
        self.input_dtype = {i.name: onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
                            for i in g.input if i.name not in init_names}
        self.bn_stats = set()
        for n in g.node:
            if n.op_type == "BatchNormalization":
                self.bn_stats.update(n.input[3:5])
        self.trained, self.frozen = [], {}
        for name in self.init_order:
            a = self.inits[name]
            if self.init_type[name] not in FLOAT_TYPES:
                self.frozen[name] = f"non-float ({a.dtype})"
            elif a.size <= 1:
                self.frozen[name] = "single-element float constant"
            elif name in self.bn_stats:
                self.frozen[name] = "batch-norm running statistic"
            else:
                self.trained.append(name)
        self.float_constant_nodes = []  # float Constant nodes with > 1 element (not initializers)
        for n in g.node:
            if n.op_type == "Constant":
                for at in n.attribute:
                    if at.name == "value" and at.t.data_type in FLOAT_TYPES:
                        a = numpy_helper.to_array(at.t)
                        if a.size > 1:
                            self.float_constant_nodes.append((n.output[0], list(a.shape)))

    def constant_node_value(self, output_name):
        for n in self.proto.graph.node:
            if n.op_type == "Constant" and n.output[0] == output_name:
                return numpy_helper.to_array(n.attribute[0].t)
        raise KeyError(output_name)

    def run_ort(self, feed, outputs):
        m = onnx.ModelProto()
        m.CopyFrom(self.proto)
        have = {o.name for o in m.graph.output}
        for name in outputs:
            if name not in have:
                m.graph.output.append(onnx.helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return dict(zip(outputs, sess.run(outputs, feed)))


def trainable_params(om, dtype):
    """Torch tensors for every initializer (float ones in dtype): the trained
    ones as leaf parameters."""
    P = {}
    for name in om.init_order:
        t = torch.from_numpy(np.array(om.inits[name]))
        if t.is_floating_point():
            t = t.to(dtype)
        if name in om.trained:
            t = torch.nn.Parameter(t.clone())
        P[name] = t
    return P


# --------------------------------------------------------------------------
# The example models (examples/gen_examples.py), written out in torch
# --------------------------------------------------------------------------
def setup_mlp(om, dtype):
    P = trainable_params(om, dtype)

    def forward(batch):
        x = batch["x"]
        for i in range(3):
            x = F.linear(x, P[f"fc{i}.weight"], P[f"fc{i}.bias"])  # Gemm transB=1
            if i < 2:
                x = torch.relu(x)
        return {"fc2": x, "probs": torch.softmax(x, dim=-1)}

    params = {n: (P[n], False) for n in om.trained}
    return params, forward, {}


def setup_gpt2_example(om, dtype):
    gen = load_module(os.path.join(ROOT, "examples", "gen_examples.py"), "gen_examples")
    c = gen.GPT2_CFG
    E, H, eps = c["n_embd"], c["heads"], c["eps"]
    D = E // H
    P = trainable_params(om, dtype)

    def ln(x, g, b):
        return F.layer_norm(x, (E,), P[g], P[b], eps=eps)

    def forward(batch):
        ids = batch["input_ids"]
        B, T = ids.shape
        h = P["wte"][ids] + P["wpe"][torch.arange(T)]
        mask = P["causal_mask"][:T, :T]
        for i in range(c["layers"]):
            p = f"h{i}."
            qkv = ln(h, p + "ln_1.g", p + "ln_1.b") @ P[p + "attn.c_attn.w"] + P[p + "attn.c_attn.b"]
            q, k, v = qkv.split(E, dim=-1)
            q = q.reshape(B, T, H, D).permute(0, 2, 1, 3)
            k = k.reshape(B, T, H, D).permute(0, 2, 3, 1)
            v = v.reshape(B, T, H, D).permute(0, 2, 1, 3)
            s = (q @ k) * P["attn_scale"]
            s = torch.where(mask, s, P["neg_big"])
            a = torch.softmax(s, dim=-1)
            o = (a @ v).permute(0, 2, 1, 3).reshape(B, T, E)
            h = h + (o @ P[p + "attn.c_proj.w"] + P[p + "attn.c_proj.b"])
            m = ln(h, p + "ln_2.g", p + "ln_2.b") @ P[p + "mlp.c_fc.w"] + P[p + "mlp.c_fc.b"]
            m = F.gelu(m, approximate="tanh")
            h = h + (m @ P[p + "mlp.c_proj.w"] + P[p + "mlp.c_proj.b"])
        h = ln(h, "ln_f.g", "ln_f.b")
        return {"logits": h @ P["wte"].t()}  # tied lm_head: one tensor, two uses

    params = {n: (P[n], False) for n in om.trained}
    return params, forward, {"config": dict(c)}


def setup_cnn(om, dtype, training=False):
    P = trainable_params(om, dtype)

    def forward(batch):
        x = F.conv2d(batch["image"], P["conv1.w"], P["conv1.b"], stride=1, padding=1)
        # Inference mode: the running stats are constants. Train mode (the
        # cnn-train reference, hpc-opt --train-mode): batch statistics, and
        # the running stats updated in place with momentum 0.1 (ONNX's 0.9).
        x = F.batch_norm(x, P["bn1.mean"], P["bn1.var"], P["bn1.scale"], P["bn1.bias"],
                         training=training, momentum=0.1, eps=1e-5)
        x = torch.relu(x)
        x = F.max_pool2d(x, kernel_size=2, stride=2)
        x = F.conv2d(x, P["conv2.w"], P["conv2.b"], stride=1, padding=1, groups=2)
        x = torch.relu(x)
        x = F.avg_pool2d(x, kernel_size=2, stride=2)
        x = F.conv2d(x, P["conv3.w"], P["conv3.b"])
        x = x.mean(dim=(2, 3), keepdim=True)  # GlobalAveragePool
        x = torch.flatten(x, 1)
        return {"logits": F.linear(x, P["fc.w"], P["fc.b"])}  # Gemm transB=1

    params = {n: (P[n], False) for n in om.trained}
    return params, forward, {"buffers": {n: P[n] for n in ("bn1.mean", "bn1.var")}}


# --------------------------------------------------------------------------
# The transformers exports (scripts/export_transformers.py)
# --------------------------------------------------------------------------
def hf_name_map(om):
    """ONNX initializer -> (HF parameter name, transposed). Named initializers
    are the wrapper's 'model.<param>'; the exporter's constant-folded
    'onnx::MatMul_N' are the transposed Linear weights, named by the MatMul
    node that consumes them (/model/<module path>/MatMul)."""
    consumers = {}
    for n in om.proto.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    out = {}
    for name in om.init_order:
        if name.startswith("model."):
            out[name] = (name[len("model."):], False)
            continue
        users = consumers.get(name, [])
        if (len(users) == 1 and users[0].op_type == "MatMul" and users[0].input[1] == name
                and users[0].name.startswith("/model/") and users[0].name.endswith("/MatMul")):
            module = users[0].name[len("/model/"):-len("/MatMul")].replace("/", ".")
            out[name] = (module + ".weight", True)
        else:
            raise SystemExit(f"cannot map initializer {name} (used by "
                             f"{[(u.op_type, u.name) for u in users]}) back to a HF parameter")
    return out


def setup_hf(om, which, dtype):
    import transformers
    exp = load_module(os.path.join(ROOT, "scripts", "export_transformers.py"), "export_transformers")
    maker = {"gpt2": exp.make_gpt2, "llama": exp.make_llama}[which]
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model0, _, _, _ = maker()
        cfg = model0.config
        notes = {}
        mapping = hf_name_map(om)
        targets = {hf for hf, _ in mapping.values()}
        if which == "gpt2" and "lm_head.weight" in targets and cfg.tie_word_embeddings:
            # The export constant-folded wte^T into its own initializer for
            # lm_head: the ONNX model holds two independent tensors, and the
            # compiler trains them as two. Mirror that with an untied model.
            cfg.tie_word_embeddings = False
            notes["untied_lm_head"] = ("the export folded lm_head = wte^T into its own initializer "
                                       "(initially equal to wte^T); the ONNX model, and so this "
                                       "reference, trains it independently of wte")
        model = type(model0)(cfg)
    del model0
    model.eval()  # no dropout; the export was traced in eval mode
    hf_params = dict(model.named_parameters())
    used = set()
    with torch.no_grad():
        for name, (hf, transposed) in mapping.items():
            if hf not in hf_params:
                raise SystemExit(f"{om.rel_path}: initializer {name} -> {hf}: no such parameter")
            if hf in used:
                raise SystemExit(f"{om.rel_path}: two initializers map to {hf}")
            a = om.inits[name]
            a = a.T if transposed else a
            if tuple(a.shape) != tuple(hf_params[hf].shape):
                raise SystemExit(f"{om.rel_path}: {name} {a.shape} vs {hf} {tuple(hf_params[hf].shape)}")
            hf_params[hf].copy_(torch.from_numpy(np.array(a)))
            used.add(hf)
    missing = sorted(set(hf_params) - used)
    if missing:
        raise SystemExit(f"{om.rel_path}: HF parameters with no initializer: {missing}")
    if notes.get("untied_lm_head"):
        same = np.array_equal(om.inits[[n for n, (h, _) in mapping.items() if h == "lm_head.weight"][0]].T,
                              om.inits["model.transformer.wte.weight"])
        notes["untied_lm_head"] += f"; equal at export: {same}"
    # Buffers are not in the ONNX initializers; check those the graph holds as constants.
    for bname, buf in model.named_buffers():
        if bname.endswith("rotary_emb.inv_freq"):
            cands = [o for o, shape in om.float_constant_nodes
                     if "rotary_emb" in o and shape == list(buf.shape)]
            ok = any(np.allclose(om.constant_node_value(o), buf.numpy(), rtol=1e-6, atol=0) for o in cands)
            if not ok:
                raise SystemExit(f"{om.rel_path}: rotary inv_freq does not match the graph's constant")
            notes["rotary_inv_freq"] = (f"a Constant node in the graph ({cands}), not an initializer: "
                                        "not trained, as in the HF model (buffer)")
    model.to(dtype)
    for p in model.parameters():
        p.requires_grad_(True)

    def forward(batch):
        out = model(**{k: batch[k] for k in om.inputs}, use_cache=False, return_dict=True)
        return {"logits": out.logits}

    params = {n: (hf_params[hf], tr) for n, (hf, tr) in mapping.items()}
    info = {"hf_class": type(model).__name__, "transformers_version": transformers.__version__,
            "hf_names": {n: hf + (" (transposed)" if tr else "") for n, (hf, tr) in mapping.items()},
            "notes": notes}
    if set(params) != set(om.trained):
        raise SystemExit(f"{om.rel_path}: mapped parameters {sorted(params)} differ from the "
                         f"trained set {sorted(om.trained)}")
    return params, forward, info


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
def token_data(seed, n, seq, vocab, ignore_at):
    rng = np.random.default_rng(seed)
    t = rng.integers(0, vocab, n * seq + 1, dtype=np.int64)
    ids = np.stack([t[k * seq:k * seq + seq] for k in range(n)])
    labels = np.stack([t[k * seq + 1:k * seq + seq + 1] for k in range(n)])
    for k, j in ignore_at:
        labels[k, j] = IGNORE
    return ids, labels


def data_mlp(om):
    # MNIST-like: 28x28 "images" whose 4-pixel border is always 0 (as MNIST's
    # is), standard normal inside. The border columns of fc0.weight's gradient
    # are then exact zeros, which keeps the committed gradients small.
    rng = np.random.default_rng(1001)
    img = np.zeros((40, 28, 28), np.float32)
    img[:, 4:24, 4:24] = rng.standard_normal((40, 20, 20)).astype(np.float32)
    x = img.reshape(40, 784)
    labels = rng.integers(0, 10, 40, dtype=np.int64)
    labels[[3, 17, 38]] = IGNORE
    return {"x": x, "labels": labels}


def data_gpt2_example(om):
    ids, labels = token_data(1002, 12, 16, 512, [(0, 5), (3, 15), (6, 0), (11, 9)])
    return {"input_ids": ids, "labels": labels}


def data_cnn(om):
    rng = np.random.default_rng(1003)
    return {"image": rng.standard_normal((6, 3, 32, 32)).astype(np.float32),
            "labels": rng.integers(0, 10, 6, dtype=np.int64)}


def data_hf(seed):
    def make(om):
        ids, labels = token_data(seed, 12, 16, 512, [(0, 3), (4, 15), (9, 0)])
        d = {"input_ids": ids}
        if "attention_mask" in om.inputs:
            d["attention_mask"] = np.ones_like(ids)
        if "position_ids" in om.inputs:
            d["position_ids"] = np.tile(np.arange(16, dtype=np.int64), (12, 1))
        d["labels"] = labels
        return d
    return make


MODELS = {
    "mlp": dict(onnx="examples/mlp.onnx", setup=setup_mlp, data=data_mlp, batch=8, logits="fc2",
                compile=["--input-shape", "x=8,784", "--train", "--loss=cross-entropy:fc2,labels"],
                check_outputs=["fc2", "probs"]),
    "gpt2-example": dict(onnx="examples/gpt2.onnx", setup=setup_gpt2_example, data=data_gpt2_example,
                         batch=2, logits="logits",
                         compile=["--input-shape", "input_ids=2,16", "--train",
                                  "--loss=cross-entropy:logits,labels"],
                         check_outputs=["logits"]),
    "cnn": dict(onnx="examples/cnn.onnx", setup=setup_cnn, data=data_cnn, batch=1, logits="logits",
                compile=["--train", "--loss=cross-entropy:logits,labels"], check_outputs=["logits"]),
    # PyTorch's train mode: batch norm on batch statistics; the running
    # statistics after the last step are in buffers-final.npz.
    "cnn-train": dict(onnx="examples/cnn.onnx", setup=setup_cnn,
                      setup_train=lambda om, dt: setup_cnn(om, dt, training=True),
                      data=data_cnn, batch=1, logits="logits",
                      compile=["--train", "--train-mode", "--loss=cross-entropy:logits,labels"],
                      check_outputs=["logits"]),
    "hf-gpt2": dict(onnx="test/models/gpt2.onnx", setup=lambda om, dt: setup_hf(om, "gpt2", dt),
                    data=data_hf(1004), batch=1, logits="logits", ref_dir="test/models/ref/gpt2",
                    compile=["--train", "--loss=cross-entropy:logits,labels"], check_outputs=["logits"]),
    "hf-llama": dict(onnx="test/models/llama.onnx", setup=lambda om, dt: setup_hf(om, "llama", dt),
                     data=data_hf(1005), batch=1, logits="logits", ref_dir="test/models/ref/llama",
                     compile=["--train", "--loss=cross-entropy:logits,labels"], check_outputs=["logits"]),
}


# --------------------------------------------------------------------------
def to_torch(d, dtype=torch.float32):
    out = {}
    for k, v in d.items():
        t = torch.from_numpy(np.array(v))
        out[k] = t.to(dtype) if t.is_floating_point() else t
    return out


def batch_of(data, step, B):
    n = len(data["labels"])
    idx = np.array([((step - 1) * B + j) % n for j in range(B)])
    return {k: v[idx] for k, v in data.items()}


def max_rel(a, b):
    return float(np.abs(a - b).max() / max(1.0, float(np.abs(b).max())))


def write_npz(path, arrays):
    """A byte-reproducible .npz (fixed zip timestamps): reruns give the same file."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for k in arrays:
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[k]), allow_pickle=False)
            info = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, buf.getvalue())


def grad_of(param, transposed, dtype):
    g = param.grad.detach()
    g = g.t() if transposed else g
    return np.ascontiguousarray(g.numpy().astype(np.float32 if dtype == torch.float32 else np.float64))


def train(key, spec, om, params, forward, data, opt_name, dtype):
    """STEPS steps of opt_name from the ONNX initial weights. Returns the loss
    and global gradient norm of every step (before its update) and the
    gradients at GRAD_STEPS (ONNX layout, float32 for float32 runs)."""
    B = spec["batch"]
    order = list(om.trained)
    with torch.no_grad():
        for n in order:
            p, transposed = params[n]
            a = om.inits[n].T if transposed else om.inits[n]
            p.copy_(torch.from_numpy(np.array(a)).to(dtype))
            p.grad = None
    opt = make_optimizer(opt_name, [params[n][0] for n in order])
    losses, gnorms, grads = [], [], {}
    for step in range(1, STEPS + 1):
        b = to_torch(batch_of(data, step, B), dtype)
        opt.zero_grad(set_to_none=True)
        logits = forward(b)[spec["logits"]]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), b["labels"].reshape(-1),
                               ignore_index=IGNORE, reduction="mean")
        loss.backward()
        for n in order:
            if params[n][0].grad is None:
                raise SystemExit(f"{key}: trained tensor {n} got no gradient (unused?)")
        losses.append(float(loss.item()))
        gnorms.append(float(torch.sqrt(sum((params[n][0].grad.double() ** 2).sum()
                                           for n in order)).item()))
        if not np.isfinite(losses[-1]):
            raise SystemExit(f"{key}/{opt_name}: loss of step {step} is {losses[-1]}")
        if step in GRAD_STEPS:
            grads[step] = {n: grad_of(*params[n], dtype) for n in order}
        opt.step()
    return losses, gnorms, grads


def run_model(key, out_root):
    spec = MODELS[key]
    om = OnnxModel(spec["onnx"])
    data = spec["data"](om)
    for name in om.inputs:
        if name not in data:
            raise SystemExit(f"{key}: no data for ONNX input {name}")
        data[name] = data[name].astype(om.input_dtype[name])
    B = spec["batch"]
    print(f"== {key}: {spec['onnx']} ({len(om.trained)} trained tensors, "
          f"{sum(om.inits[n].size for n in om.trained)} values), B={B}, "
          f"{len(data['labels'])} samples")
    for name, why in om.frozen.items():
        print(f"   frozen {name} {list(om.inits[name].shape)}: {why}")
    if om.float_constant_nodes:
        print(f"   float Constant nodes (not initializers, not trained): {om.float_constant_nodes}")

    # Forward check: torch vs onnxruntime on the first batch (and the committed ref).
    checks = {}
    params, forward, info = spec["setup"](om, torch.float32)
    first = batch_of(data, 1, B)
    feed = {n: first[n] for n in om.inputs}
    ref = om.run_ort(feed, spec["check_outputs"])
    with torch.no_grad():
        got = forward(to_torch(feed))
    for name in spec["check_outputs"]:
        err = max_rel(got[name].numpy(), ref[name])
        checks[f"ort:{name}"] = err
        print(f"   forward vs onnxruntime, {name}{list(ref[name].shape)}: max|diff|/max(1,max|ref|) = {err:.2e}")
        if not err <= 1e-4:
            raise SystemExit(f"{key}: torch forward does not match onnxruntime on {name}")
    if spec.get("ref_dir"):
        rd = os.path.join(ROOT, spec["ref_dir"])
        rfeed = {n: np.load(os.path.join(rd, f"{n}.npy")) for n in om.inputs}
        rout = np.load(os.path.join(rd, "logits.npy"))
        with torch.no_grad():
            got = forward(to_torch(rfeed))["logits"].numpy()
        err = max_rel(got, rout)
        checks["export_ref:logits"] = err
        print(f"   forward vs {spec['ref_dir']}/logits.npy: {err:.2e}")
        if not err <= 1e-4:
            raise SystemExit(f"{key}: torch forward does not match the export's reference logits")

    mdir = os.path.join(out_root, key)
    os.makedirs(os.path.join(mdir, "data"), exist_ok=True)
    for f in os.listdir(os.path.join(mdir, "data")):
        os.remove(os.path.join(mdir, "data", f))
    for name, arr in data.items():
        np.save(os.path.join(mdir, "data", f"{name}.npy"), arr)

    results = {}
    setup_train = spec.get("setup_train", spec["setup"])
    for opt_name in OPTIMIZERS:
        # Fresh modules per run: train mode changes their buffers.
        params, forward, info = setup_train(om, torch.float32)
        f64_params, f64_forward, _ = setup_train(om, torch.float64)
        losses, gnorms, grads = train(key, spec, om, params, forward, data, opt_name, torch.float32)
        # The same run in float64: how far float32 rounding alone moves this
        # trajectory (a floor for the tolerances a float32 trainer can meet).
        l64, _, g64 = train(key, spec, om, f64_params, f64_forward, data, opt_name, torch.float64)
        dev = {"loss_max_rel": max(abs(a - b) / abs(b) for a, b in zip(losses, l64)),
               "loss_rel_per_step": [abs(a - b) / abs(b) for a, b in zip(losses, l64)]}
        for step in GRAD_STEPS:
            dev[f"grad_step{step}_max_rel"] = max(
                float(np.linalg.norm(grads[step][n].astype(np.float64) - g64[step][n]) /
                      max(np.linalg.norm(g64[step][n]), 1e-300)) for n in grads[step])
        odir = os.path.join(mdir, opt_name)
        os.makedirs(odir, exist_ok=True)
        for step, g in grads.items():
            write_npz(os.path.join(odir, f"grads-step{step}.npz"), g)
        if "setup_train" in spec:
            write_npz(os.path.join(odir, "buffers-final.npz"),
                      {n: t.detach().numpy().astype(np.float32)
                       for n, t in info["buffers"].items()})
        meta = {
            "model": key,
            "onnx": spec["onnx"],
            "onnx_sha256": om.sha256,
            "compile": spec["compile"],
            "optimizer": OPTIMIZERS[opt_name],
            "batch": B,
            "steps": STEPS,
            "samples": int(len(data["labels"])),
            "data": {"dir": "../data", "inputs": om.inputs + ["labels"],
                     "step_samples": "step i (from 1) uses samples (i-1)*B .. i*B-1 modulo samples"},
            "loss": {"kind": "cross-entropy", "logits": spec["logits"], "labels": "labels",
                     "reduction": "mean over non-ignored targets", "ignore_index": IGNORE,
                     "before_update": True},
            "losses": losses,
            "grad_norms": gnorms,
            "grad_steps": list(GRAD_STEPS),
            "trained": list(om.trained),
            "frozen": om.frozen,
            "forward_check": checks,
            "fp64_deviation": dev,
            "torch_version": torch.__version__,
            "numpy_version": np.__version__,
            "onnx_version": onnx.__version__,
            "onnxruntime_version": ort.__version__,
            "python_version": platform.python_version(),
            "settings": "float32, torch.set_num_threads(1), torch.use_deterministic_algorithms(True)",
            "made_by": "build/ref-venv/bin/python scripts/make_train_refs.py",
        }
        meta.update({k: v for k, v in info.items() if k not in ("config", "buffers")})
        if "config" in info:
            meta["config"] = info["config"]
        with open(os.path.join(odir, "ref.json"), "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
        results[opt_name] = losses
        print(f"   {opt_name}: loss {losses[0]:.6f} -> {losses[-1]:.6f}  "
              f"(grad norm {gnorms[0]:.4f} -> {gnorms[-1]:.4f}); float32 vs float64: "
              f"loss {dev['loss_max_rel']:.1e}, grads step 1 {dev['grad_step1_max_rel']:.1e}, "
              f"step {STEPS} {dev[f'grad_step{STEPS}_max_rel']:.1e}")
    return results


def main():
    ap = argparse.ArgumentParser(description="make PyTorch reference training trajectories")
    ap.add_argument("models", nargs="*", default=list(MODELS), help=f"subset of {list(MODELS)}")
    ap.add_argument("--out-dir", default=OUT_ROOT)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    print(f"torch {torch.__version__}, numpy {np.__version__}, onnx {onnx.__version__}, "
          f"onnxruntime {ort.__version__}")
    for key in args.models:
        if key not in MODELS:
            raise SystemExit(f"unknown model {key}; choose from {list(MODELS)}")
        run_model(key, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
