#===- seeds.py - the models the importer fuzzer mutates --------------------===#
#
# A seed is a valid model the importer accepts, with the hpc-opt arguments it
# needs (--input-shape for dynamic dimensions) and, for external data, the
# files next to it. The seeds are small on purpose: the bundled CNN, the
# textual models of test/Import, a few synthetic models that exercise the
# attributes and initializers the importer reads (window ops, Gather, Split,
# Cast, Constant, Reshape, external data), and, with --big-seeds, the bundled
# transformer models.
#
#===-----------------------------------------------------------------------===#

import glob
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


class Seed:
    """A model to mutate: `model` (a ModelProto), the hpc-opt arguments it
    needs, `files` (name -> bytes) to write next to it, and for a textual
    model its source `text` (the byte mutator also mutates that)."""

    def __init__(self, name, model, args=(), files=None, text=None):
        self.name = name
        self.text = text
        self.model = model
        self.args = list(args)
        self.files = dict(files or {})
        self.bytes = model.SerializeToString()


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "seed", inputs, outputs,
                              initializer=list(inits))
    m = helper.make_model(graph, producer_name="fuzz-seed",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def _t(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def synthetic():
    """Small models over the ops whose attributes the importer reads."""
    rng = np.random.RandomState(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
    out = []
    out.append(Seed("conv", _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2],
                          pads=[1, 1, 1, 1], dilations=[1, 1], group=1,
                          kernel_shape=[3, 3]),
         helper.make_node("Relu", ["c"], ["y"])],
        [_vi("x", [1, 2, 8, 8])], [_vi("y", [1, 4, 4, 4])],
        [_t("w", f32(4, 2, 3, 3)), _t("b", f32(4))])))
    out.append(Seed("maxpool", _model(
        [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                          strides=[2, 2], pads=[0, 0, 0, 0])],
        [_vi("x", [1, 3, 32, 32])], [_vi("y", [1, 3, 16, 16])])))
    out.append(Seed("avgpool", _model(
        [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3],
                          strides=[1, 1], pads=[1, 1, 1, 1],
                          count_include_pad=1)],
        [_vi("x", [1, 2, 6, 6])], [_vi("y", [1, 2, 6, 6])])))
    out.append(Seed("gather", _model(
        [helper.make_node("Gather", ["table", "idx"], ["y"], axis=0)],
        [_vi("idx", [2, 3], TensorProto.INT64)], [_vi("y", [2, 3, 4])],
        [_t("table", f32(10, 4))])))
    out.append(Seed("gather-const", _model(
        [helper.make_node("Gather", ["x", "idx"], ["y"], axis=1)],
        [_vi("x", [3, 5])], [_vi("y", [3, 2])],
        [_t("idx", np.array([0, 4], dtype=np.int64))])))
    out.append(Seed("split", _model(
        [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)],
        [_vi("x", [2, 6])], [_vi("a", [2, 2]), _vi("b", [2, 4])],
        [_t("sizes", np.array([2, 4], dtype=np.int64))], opset=13)))
    out.append(Seed("split-attr", _model(
        [helper.make_node("Split", ["x"], ["a", "b"], axis=0, split=[1, 3])],
        [_vi("x", [4, 2])], [_vi("a", [1, 2]), _vi("b", [3, 2])], opset=11)))
    out.append(Seed("cast", _model(
        [helper.make_node("Cast", ["x"], ["c"], to=TensorProto.INT32),
         helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT)],
        [_vi("x", [3, 4])], [_vi("y", [3, 4])])))
    out.append(Seed("constant-reshape", _model(
        [helper.make_node("Constant", [], ["shape"],
                          value=_t("v", np.array([4, 3], dtype=np.int64))),
         helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("Shape", ["r"], ["s"]),
         helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])],
        [_vi("x", [2, 6])], [_vi("y", [3, 4]), _vi("s", [2], TensorProto.INT64)])))
    out.append(Seed("matmul-int-init", _model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Slice", ["a", "starts", "ends", "axes"], ["y"])],
        [_vi("x", [2, 4])], [_vi("y", [2, 2])],
        [_t("w", f32(4, 3)), _t("b", f32(3)),
         _t("starts", np.array([0], dtype=np.int64)),
         _t("ends", np.array([2], dtype=np.int64)),
         _t("axes", np.array([1], dtype=np.int64))])))
    out.append(Seed("softmax-concat-pad", _model(
        [helper.make_node("Softmax", ["x"], ["s"], axis=-1),
         helper.make_node("Concat", ["s", "x"], ["c"], axis=0),
         helper.make_node("Pad", ["c", "pads"], ["y"], mode="constant")],
        [_vi("x", [2, 3])], [_vi("y", [4, 5])],
        [_t("pads", np.array([0, 1, 0, 1], dtype=np.int64))])))
    # External data: w [4,3] at offset 0, b [3] at offset 48 of weights.bin.
    w = f32(4, 3)
    b = f32(3)
    inits = []
    for name, arr, off in (("w", w, 0), ("b", b, 48)):
        t = TensorProto(name=name, data_type=TensorProto.FLOAT,
                        dims=list(arr.shape))
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "weights.bin"), ("offset", str(off)),
                     ("length", str(arr.nbytes))):
            e = t.external_data.add()
            e.key, e.value = k, v
        inits.append(t)
    out.append(Seed("external", _model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]),
         helper.make_node("Add", ["m", "b"], ["y"])],
        [_vi("x", [2, 4])], [_vi("y", [2, 3])], inits),
        files={"weights.bin": w.tobytes() + b.tobytes()}))
    return out


def textual():
    """The textual models of test/Import that import without arguments."""
    import onnx.parser
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "Import", "*.onnxtxt"))):
        base = os.path.basename(path)
        if base.startswith("error-") or base in ("input-shape.onnxtxt",
                                                 "shapes-only.onnxtxt"):
            continue
        try:
            with open(path) as f:
                text = f.read()
            model = onnx.parser.parse_model(text)
        except Exception:
            continue
        out.append(Seed("text:" + base, model, text=text))
    return out


def bundled(big):
    out = [Seed("examples/cnn.onnx", onnx.load(os.path.join(ROOT, "examples", "cnn.onnx")))]
    if big:
        out.append(Seed("examples/mlp.onnx",
                        onnx.load(os.path.join(ROOT, "examples", "mlp.onnx")),
                        ["--input-shape", "x=4,784"]))
        out.append(Seed("examples/gpt2.onnx",
                        onnx.load(os.path.join(ROOT, "examples", "gpt2.onnx")),
                        ["--input-shape", "input_ids=1,16"]))
        for path in sorted(glob.glob(os.path.join(ROOT, "test", "models", "*.onnx"))):
            out.append(Seed("test/models/" + os.path.basename(path), onnx.load(path)))
    return out


def all_seeds(big=False):
    return synthetic() + textual() + bundled(big)
