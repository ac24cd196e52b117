#!/usr/bin/env python3
# Exports tiny, randomly initialised Hugging Face transformer models to ONNX
# for the importer tests: test/models/{gpt2,bert,llama,t5,vit,mixtral}.onnx,
# plus test/models/ops.txt (op types per model) and reference inputs/outputs
# as .npy files under test/models/ref/<name>/ (file names = graph input/output
# names). Models are built from Config objects with torch.manual_seed(0);
# nothing is downloaded. Static shapes (batch 1, seq 16), opset 17, TorchScript
# exporter (dynamo=False). Needs torch + transformers + onnx (see
# scripts/requirements-models.txt). Rerun from the repo root with:
#   .venv/bin/python scripts/export_transformers.py            # all models
#   .venv/bin/python scripts/export_transformers.py llama vit  # a subset
import argparse
import os
import sys
import warnings

# Never reach out for anything: everything here is built locally.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "test", "models")
OPSET = 17
SEQ = 16
BATCH = 1

# Shared tiny sizes.
HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, INTER, MAX_POS = 64, 2, 4, 2, 512, 128, 128


class Wrapper(torch.nn.Module):
    """Calls a HF model with keyword inputs in a fixed order and returns one tensor."""

    def __init__(self, model, input_names, output_attr):
        super().__init__()
        self.model = model
        self.input_names = input_names
        self.output_attr = output_attr

    def forward(self, *args):
        kwargs = dict(zip(self.input_names, args))
        out = self.model(**kwargs, use_cache=False, return_dict=True)
        return getattr(out, self.output_attr)


# --------------------------------------------------------------------------
# Mixtral: dense dispatch replacement for the sparse MoE block.
#
# The reference MixtralSparseMoeBlock routes tokens with data-dependent shapes
# (one_hot -> nonzero -> per-expert gather -> index_add_), which a static-shape
# compiler cannot represent. For the export we monkeypatch the class forward
# with a mathematically identical dense version: router logits -> softmax ->
# topk(k) -> renormalise the k weights to sum 1 (as Mixtral does) -> dense
# [tokens, experts] gate matrix built with an Equal against arange(experts)
# (no Scatter/OneHot ops) -> every expert evaluated on all tokens -> sum of the
# expert outputs weighted by the gates (zero for unselected experts).
# main() checks that it matches the original forward before exporting.
# --------------------------------------------------------------------------
def dense_moe_forward(self, hidden_states):
    batch, seq, hidden = hidden_states.shape
    x = hidden_states.reshape(-1, hidden)                              # [T, H]
    router_logits = F.linear(x, self.gate.weight)                      # [T, E]
    probs = torch.softmax(router_logits.float(), dim=-1)
    top_w, top_i = torch.topk(probs, self.gate.top_k, dim=-1)          # [T, k]
    top_w = top_w / top_w.sum(dim=-1, keepdim=True)
    experts = self.experts
    n_exp = experts.gate_up_proj.shape[0]
    expert_ids = torch.arange(n_exp, device=x.device)                  # [E]
    hit = (top_i.unsqueeze(-1) == expert_ids).to(top_w.dtype)         # [T, k, E]
    gates = (hit * top_w.unsqueeze(-1)).sum(dim=1).to(x.dtype)         # [T, E]
    # All experts on all tokens: [E, T, 2I] -> [E, T, I] -> [E, T, H].
    gate_up = torch.matmul(x.unsqueeze(0), experts.gate_up_proj.transpose(1, 2))
    g, u = gate_up.chunk(2, dim=-1)
    y = torch.matmul(experts.act_fn(g) * u, experts.down_proj.transpose(1, 2))
    out = (y * gates.t().unsqueeze(-1)).sum(dim=0)                     # [T, H]
    return out.reshape(batch, seq, hidden)


# --------------------------------------------------------------------------
# Model definitions: (model, inputs {name: tensor}, output name, HF output attr)
# --------------------------------------------------------------------------
def ids(vocab, seq=SEQ, offset=0):
    g = torch.Generator().manual_seed(1234 + offset)
    return torch.randint(0, vocab, (BATCH, seq), generator=g, dtype=torch.long)


def causal_lm_inputs(vocab):
    return {
        "input_ids": ids(vocab),
        "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
        "position_ids": torch.arange(SEQ, dtype=torch.long).unsqueeze(0).expand(BATCH, SEQ).contiguous(),
    }


def make_gpt2():
    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=MAX_POS, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
        n_inner=INTER, activation_function="gelu_new", bos_token_id=0, eos_token_id=0, use_cache=False,
        attn_implementation="eager")
    return transformers.GPT2LMHeadModel(cfg), causal_lm_inputs(VOCAB), "logits", "logits"


def make_bert():
    cfg = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=INTER, max_position_embeddings=MAX_POS, type_vocab_size=2,
        use_cache=False, attn_implementation="eager")
    inputs = {
        "input_ids": ids(VOCAB),
        "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
        "token_type_ids": torch.zeros(BATCH, SEQ, dtype=torch.long),
    }
    return transformers.BertForMaskedLM(cfg), inputs, "logits", "logits"


def make_llama():
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=MAX_POS,
        use_cache=False, attn_implementation="eager")
    return transformers.LlamaForCausalLM(cfg), causal_lm_inputs(VOCAB), "logits", "logits"


def make_t5():
    cfg = transformers.T5Config(
        vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=INTER, num_layers=LAYERS,
        num_decoder_layers=LAYERS, num_heads=HEADS, relative_attention_num_buckets=32,
        relative_attention_max_distance=MAX_POS, feed_forward_proj="relu",
        decoder_start_token_id=0, pad_token_id=0, use_cache=False, attn_implementation="eager")
    inputs = {
        "input_ids": ids(VOCAB),
        "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
        "decoder_input_ids": ids(VOCAB, offset=1),
        "decoder_attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long),
    }
    return transformers.T5ForConditionalGeneration(cfg), inputs, "logits", "logits"


def make_vit():
    cfg = transformers.ViTConfig(
        image_size=32, patch_size=8, num_channels=3, hidden_size=HIDDEN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=INTER,
        num_labels=10, attn_implementation="eager")
    g = torch.Generator().manual_seed(99)
    inputs = {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g)}
    return transformers.ViTForImageClassification(cfg), inputs, "logits", "logits"


def make_mixtral():
    cfg = transformers.MixtralConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=MAX_POS,
        num_local_experts=4, num_experts_per_tok=2, sliding_window=None, use_cache=False,
        output_router_logits=False, attn_implementation="eager", experts_implementation="eager")
    return transformers.MixtralForCausalLM(cfg), causal_lm_inputs(VOCAB), "logits", "logits"


MODELS = {
    "gpt2": make_gpt2, "bert": make_bert, "llama": make_llama,
    "t5": make_t5, "vit": make_vit, "mixtral": make_mixtral,
}


def init_random(model):
    """Give every parameter non-trivial random values (some HF inits are zeros/ones)."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ("norm" in name.lower() or "ln" in name.lower()):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=g))


def patch_mixtral_and_verify(model):
    cls = transformers.models.mixtral.modeling_mixtral.MixtralSparseMoeBlock
    block = model.model.layers[0].mlp
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, SEQ, HIDDEN, generator=g)
    with torch.no_grad():
        ref_block = block(x)
        ref_model = model(input_ids=ids(VOCAB), use_cache=False).logits
        original = cls.forward
        cls.forward = dense_moe_forward
        new_block = block(x)
        new_model = model(input_ids=ids(VOCAB), use_cache=False).logits
    d1 = (ref_block - new_block).abs().max().item()
    d2 = (ref_model - new_model).abs().max().item()
    print(f"mixtral: dense MoE dispatch vs original: block max|diff|={d1:.2e}, "
          f"model max|diff|={d2:.2e}")
    if d1 >= 1e-5 or d2 >= 1e-5:
        cls.forward = original
        raise SystemExit("dense MoE forward does not match the original")


def export_one(name, out_dir, check_numerics):
    torch.manual_seed(0)
    model, inputs, out_name, out_attr = MODELS[name]()
    model.eval()
    init_random(model)
    if name == "mixtral":
        patch_mixtral_and_verify(model)
    input_names = list(inputs)
    wrapper = Wrapper(model, input_names, out_attr).eval()
    args = tuple(inputs[n] for n in input_names)
    with torch.no_grad():
        ref_out = wrapper(*args)

    path = os.path.join(out_dir, f"{name}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapper, args, path, input_names=input_names,
                          output_names=[out_name], opset_version=OPSET, dynamo=False,
                          do_constant_folding=True, export_params=True)

    m = onnx.load(path)
    # Drop the exporter's doc_strings (Python stack traces with local paths).
    for node in m.graph.node:
        node.doc_string = ""
    m.producer_name = "hpc-opt-export-transformers"
    onnx.save(m, path)
    onnx.checker.check_model(path, full_check=True)
    m = onnx.shape_inference.infer_shapes(onnx.load(path), check_type=True)
    ops = sorted({(n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
                  for n in m.graph.node})
    graph_inputs = [i.name for i in m.graph.input]
    opset = {o.domain or "ai.onnx": o.version for o in m.opset_import}

    ref_dir = os.path.join(out_dir, "ref", name)
    os.makedirs(ref_dir, exist_ok=True)
    for f in os.listdir(ref_dir):
        if f.endswith(".npy"):
            os.remove(os.path.join(ref_dir, f))
    for n in graph_inputs:  # the exporter may drop inputs that were folded away
        np.save(os.path.join(ref_dir, f"{n}.npy"), inputs[n].numpy())
    np.save(os.path.join(ref_dir, f"{out_name}.npy"), ref_out.numpy())

    line = (f"{name}: {os.path.getsize(path)} bytes, opset {opset}, {len(m.graph.node)} nodes, "
            f"inputs {graph_inputs}, output {out_name}{list(ref_out.shape)}")
    if check_numerics:
        from onnx.reference import ReferenceEvaluator
        feed = {n: inputs[n].numpy() for n in graph_inputs}
        with np.errstate(all="ignore"):  # T5's bucket math takes log(0) on a masked-out branch
            got = ReferenceEvaluator(m).run(None, feed)[0]
        line += f", max|onnx-torch|={float(np.abs(got - ref_out.numpy()).max()):.2e}"
    print(line)
    print(f"  ops: {' '.join(ops)}")
    return ops


def main():
    ap = argparse.ArgumentParser(description="export tiny transformer models to ONNX")
    ap.add_argument("models", nargs="*", default=list(MODELS), help=f"subset of {list(MODELS)}")
    ap.add_argument("--out-dir", default=OUT_DIR)
    ap.add_argument("--no-eval", action="store_true",
                    help="skip the onnx reference-evaluator comparison")
    args = ap.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    os.makedirs(args.out_dir, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, onnx {onnx.__version__}")

    ops_path = os.path.join(args.out_dir, "ops.txt")
    ops_lines = {}
    if os.path.exists(ops_path):
        for line in open(ops_path):
            if ":" in line and not line.startswith("#"):
                ops_lines[line.split(":", 1)[0]] = line.rstrip("\n")
    for name in args.models:
        if name not in MODELS:
            raise SystemExit(f"unknown model {name}; choose from {list(MODELS)}")
        ops = export_one(name, args.out_dir, not args.no_eval)
        ops_lines[name] = f"{name}: {' '.join(ops)}"
    with open(ops_path, "w") as f:
        f.write("# ONNX op types per model (written by scripts/export_transformers.py)\n")
        for name in MODELS:
            if name in ops_lines:
                f.write(ops_lines[name] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
