#!/usr/bin/env python3
#===- invalid_model.py - one malformed model for the importer's error tests -===#
#
#   invalid_model.py CASE DIR
#
# writes DIR/model.onnx (and, for external data, the files next to it) for
# one CASE of the list below: each a small model with exactly one defect,
# the causes of issue 11 (crashes, silent wrong answers, external data read
# from outside the model's folder). Needs the onnx Python package (Debian's
# python3-onnx is enough); the output is deterministic.
#
#===-----------------------------------------------------------------------===#

import os
import struct
import sys

import onnx
from onnx import AttributeProto, TensorProto, helper


def vi(name, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def model(nodes, inputs, outputs, inits=(), opset=17, value_info=()):
    graph = helper.make_graph(nodes, "bad", inputs, outputs,
                              initializer=list(inits), value_info=list(value_info))
    m = helper.make_model(graph, producer_name="invalid_model.py",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def floats(name, dims, values=None):
    n = 1
    for d in dims:
        n *= d
    return helper.make_tensor(name, TensorProto.FLOAT, dims,
                              values if values is not None else [0.5] * n)


def ints(name, values, dims=None):
    return helper.make_tensor(name, TensorProto.INT64,
                              dims if dims is not None else [len(values)], values)


def relu_of(x="x", shape=(2, 3)):
    return [helper.make_node("Relu", [x], ["y"])], [vi("y", list(shape))]


def matmul_init(w):
    """y = MatMul(x, w) with x [2, 4] and the initializer w."""
    return model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                 [vi("x", [2, 4])], [vi("y", [2, 3])], [w])


def conv(**attrs):
    return model([helper.make_node("Conv", ["x", "w"], ["y"], **attrs)],
                 [vi("x", [1, 2, 8, 8])], [vi("y", [1, 2, 8, 8])],
                 [floats("w", [2, 2, 3, 3])])


def set_attr_type(m, node, name, attr):
    n = m.graph.node[node]
    for i, a in enumerate(n.attribute):
        if a.name == name:
            n.attribute[i].CopyFrom(attr)
    return m


def external(files, location, offset=0, length=None, dims=(4, 3), extra=()):
    """matmul_init with w [4, 3] float in an external file."""
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=list(dims))
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location), ("offset", str(offset))]
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries + list(extra):
        e = t.external_data.add()
        e.key, e.value = k, v
    return matmul_init(t), files


WEIGHTS = struct.pack("<12f", *[float(i) for i in range(12)])


def case(name, out):
    files = {}
    symlinks = {}
    fifos = []
    m = None
    # --- graph structure --------------------------------------------------
    if name == "undefined-input":
        # Shape of a value defined nowhere.
        m = model([helper.make_node("Shape", ["ghost"], ["s"]),
                   helper.make_node("Relu", ["x"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3]), vi("s", [2], TensorProto.INT64)])
    elif name == "self-loop":
        m = model([helper.make_node("Add", ["x", "y"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
    elif name == "cycle":
        m = model([helper.make_node("Relu", ["b"], ["a"]),
                   helper.make_node("Relu", ["a"], ["b"]),
                   helper.make_node("Add", ["x", "b"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
    elif name == "duplicate-output":
        m = model([helper.make_node("Relu", ["x"], ["a"]),
                   helper.make_node("Neg", ["x"], ["a"]),
                   helper.make_node("Relu", ["a"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
    elif name == "output-shadows-input":
        m = model([helper.make_node("Relu", ["x"], ["x"]),
                   helper.make_node("Relu", ["x"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
    elif name == "duplicate-initializer":
        m = matmul_init(floats("w", [4, 3]))
        m.graph.initializer.append(floats("w", [4, 3], [1.0] * 12))
    elif name == "duplicate-input":
        nodes, outs = relu_of()
        m = model(nodes, [vi("x", [2, 3]), vi("x", [2, 3])], outs)
    elif name == "graph-output-missing":
        nodes, _ = relu_of()
        m = model(nodes, [vi("x", [2, 3])], [vi("ghost", [2, 3])])
    # --- attribute types and counts ---------------------------------------
    elif name == "maxpool-strides-int":
        # strides=2 as INT: the default 1 would give 31x31 instead of 16x16.
        m = model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2],
                                    strides=[2, 2])],
                  [vi("x", [1, 1, 32, 32])], [vi("y", [1, 1, 16, 16])])
        set_attr_type(m, 0, "strides", helper.make_attribute("strides", 2))
    elif name == "cast-without-to":
        m = model([helper.make_node("Cast", ["x"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3], TensorProto.INT32)])
    elif name == "attribute-no-value":
        m = model([helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
        a = m.graph.node[0].attribute[0]
        a.ClearField("i")
    elif name == "attribute-no-type":
        m = model([helper.make_node("Softmax", ["x"], ["y"], axis=1)],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
        m.graph.node[0].attribute[0].ClearField("type")
    elif name == "gemm-extra-input":
        m = model([helper.make_node("Gemm", ["x", "w", "b", "b"], ["y"])],
                  [vi("x", [2, 4])], [vi("y", [2, 3])],
                  [floats("w", [4, 3]), floats("b", [3])])
    elif name == "relu-extra-output":
        m = model([helper.make_node("Relu", ["x"], ["y", "z"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3])])
    elif name == "gemm-flag-not-bool":
        m = model([helper.make_node("Gemm", ["x", "w"], ["y"], transB=2)],
                  [vi("x", [2, 4])], [vi("y", [2, 3])], [floats("w", [3, 4])])
    elif name == "split18-num-outputs-ints":
        # onnx 1.12's schemas end at opset 17: the importer's own reading of
        # an attribute checks its type.
        m = model([helper.make_node("Split", ["x"], ["a", "b"], axis=1,
                                    num_outputs=[2])],
                  [vi("x", [2, 6])], [vi("a", [2, 3]), vi("b", [2, 3])], opset=18)
    # --- ops and IR versions against the schemas of the model's opset ----
    elif name == "layernorm-opset13":
        m = model([helper.make_node("LayerNormalization", ["x", "s"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3])], [floats("s", [3])], opset=13)
    elif name == "gelu-opset17":
        m = model([helper.make_node("Gelu", ["x"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3])], opset=17)
    elif name == "gelu-unknown-attribute":
        m = model([helper.make_node("Gelu", ["x"], ["y"], bogus=1)],
                  [vi("x", [2, 3])], [vi("y", [2, 3])], opset=20)
    elif name == "add-unknown-attribute-opset21":
        m = model([helper.make_node("Add", ["x", "x"], ["y"], bogus=1)],
                  [vi("x", [2, 3])], [vi("y", [2, 3])], opset=21)
    elif name == "transpose-extra-input-opset21":
        m = model([helper.make_node("Transpose", ["x", "x"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [3, 2])], opset=21)
    elif name == "split18-unknown-attribute":
        m = model([helper.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2,
                                    bogus=1)],
                  [vi("x", [2, 6])], [vi("a", [2, 3]), vi("b", [2, 3])], opset=18)
    elif name == "reducemean18-axes-attribute":
        # ReduceMean-18 takes its axes as an input; the attribute is gone.
        m = model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[1])],
                  [vi("x", [2, 6])], [vi("y", [2, 1])], opset=18)
    elif name == "ir-version-too-new":
        nodes, outs = relu_of()
        m = model(nodes, [vi("x", [2, 3])], outs)
        m.ir_version = 15
    elif name == "ir-version-2-with-opset":
        nodes, outs = relu_of()
        m = model(nodes, [vi("x", [2, 3])], outs)
        m.ir_version = 2
    elif name == "range-not-scalar":
        m = model([helper.make_node("Range", ["start", "limit", "delta"], ["y"])],
                  [], [vi("y", [4], TensorProto.INT64)],
                  [ints("start", [0]), helper.make_tensor("limit", TensorProto.INT64, [], [4]),
                   helper.make_tensor("delta", TensorProto.INT64, [], [1])])
    # --- attribute values -------------------------------------------------
    elif name == "conv-dilations-zero":
        m = conv(dilations=[0, 1], pads=[1, 1, 1, 1])
    elif name == "conv-negative-pads":
        m = conv(pads=[1, -1, 1, 1])
    elif name == "conv-huge-pads":
        m = conv(pads=[2**40, 2**40, 2**40, 2**40])
    elif name == "conv-overflowing-pads":
        m = conv(pads=[2**62, 1, 2**62, 1])
    elif name == "conv-auto-pad-and-pads":
        m = conv(auto_pad="VALID", pads=[1, 1, 1, 1])
    elif name == "conv-auto-pad-same-zero-pads":
        m = conv(auto_pad="SAME_UPPER", pads=[0, 0, 0, 0])
    elif name == "gather-axis-max":
        m = model([helper.make_node("Gather", ["x", "idx"], ["y"], axis=2**63 - 1)],
                  [vi("x", [3, 5])], [vi("y", [2, 5])], [ints("idx", [0, 2])])
    elif name == "split-negative":
        m = model([helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)],
                  [vi("x", [2, 6])], [vi("a", [2, 7]), vi("b", [2, 1])],
                  [ints("sizes", [-1, 7])], opset=13)
    elif name == "split-overflow":
        m = model([helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1)],
                  [vi("x", [2, 6])], [vi("a", [2, 6]), vi("b", [2, 6])],
                  [ints("sizes", [2**62, 2**62])], opset=13)
    elif name == "pad-pads-2d":
        m = model([helper.make_node("Pad", ["x", "pads"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [4, 5])],
                  [ints("pads", [1, 1, 1, 1], dims=[4, 1])])
    # --- initializers -----------------------------------------------------
    elif name == "negative-dims":
        m = matmul_init(helper.make_tensor("w", TensorProto.FLOAT, [4, 3], [0.5] * 12))
        m.graph.initializer[0].dims[1] = -3
    elif name == "huge-dims":
        # [2^62, 4] with no data: the element count wraps to 0.
        w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2**62, 4])
        m = matmul_init(w)
    elif name == "int64-seven-bytes":
        c = TensorProto(name="c", data_type=TensorProto.INT64, dims=[1])
        c.raw_data = b"\x01\x02\x03\x04\x05\x06\x07"
        m = model([helper.make_node("Reshape", ["x", "c"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [6])], [c])
    elif name == "typed-data-count":
        w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 3])
        w.float_data.extend([0.5] * 11)
        m = matmul_init(w)
    elif name == "two-data-fields":
        w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3], [0.5] * 12)
        w.raw_data = WEIGHTS
        m = matmul_init(w)
    elif name == "constant-value-short":
        # A Constant's value tensor: checked like an initializer, before
        # ONNX's shape inference parses it.
        v = TensorProto(name="v", data_type=TensorProto.INT64, dims=[2])
        v.raw_data = b"\x06" + b"\x00" * 7
        m = model([helper.make_node("Constant", [], ["shape"], value=v),
                   helper.make_node("Reshape", ["x", "shape"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [6])])
    # --- declared types and type constraints ------------------------------
    elif name == "declared-output-type":
        nodes, _ = relu_of()
        m = model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3], TensorProto.INT64)])
    elif name == "declared-output-shape":
        nodes, _ = relu_of()
        m = model(nodes, [vi("x", [2, 3])], [vi("y", [2, 4])])
    elif name == "value-info-conflict":
        m = model([helper.make_node("Relu", ["x"], ["a"]),
                   helper.make_node("Relu", ["a"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3])],
                  value_info=[vi("a", [2, 3]), vi("a", [3, 2])])
    elif name == "value-info-wrong":
        m = model([helper.make_node("Relu", ["x"], ["a"]),
                   helper.make_node("Relu", ["a"], ["y"])],
                  [vi("x", [2, 3])], [vi("y", [2, 3])],
                  value_info=[vi("a", [6])])
    elif name == "gather-uint16-indices":
        m = model([helper.make_node("Gather", ["x", "idx"], ["y"])],
                  [vi("x", [5, 3]), vi("idx", [2], TensorProto.UINT16)],
                  [vi("y", [2, 3])])
    elif name == "conv-int32-bias":
        m = model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])],
                  [vi("x", [1, 2, 8, 8])], [vi("y", [1, 2, 8, 8])],
                  [floats("w", [2, 2, 3, 3]),
                   helper.make_tensor("b", TensorProto.INT32, [2], [1, 2])])
    elif name == "control-characters":
        nodes, outs = relu_of()
        m = model(nodes, [vi("x", [2, 3])], outs)
        m.graph.node[0].op_type = "Re\x0blu\x1b"
    # --- external data ----------------------------------------------------
    elif name == "ext-ok":
        m, files = external({"w.bin": WEIGHTS}, "w.bin", 0, 48)
    elif name == "ext-inner-link":
        m, files = external({"w.bin": WEIGHTS}, "link.bin", 0, 48)
        symlinks["link.bin"] = "w.bin"
    elif name == "ext-passwd-link":
        m, files = external({}, "passwd.bin", 0, 48)
        symlinks["passwd.bin"] = "/etc/passwd"
    elif name == "ext-dotdot":
        m, files = external({}, "sub/../../w.bin", 0, 48)
    elif name == "ext-fifo":
        m, files = external({}, "fifo.bin", 0, 48)
        fifos.append("fifo.bin")
    elif name == "ext-directory":
        m, files = external({"adir/x": b""}, "adir", 0, 48)
    elif name == "ext-short-file":
        m, files = external({"w.bin": WEIGHTS[:40]}, "w.bin", 0, 48)
    elif name == "ext-offset-past-end":
        m, files = external({"w.bin": WEIGHTS}, "w.bin", 48, 48)
    elif name == "ext-length-negative":
        m, files = external({"w.bin": WEIGHTS}, "w.bin", 0, -1)
    elif name == "ext-length-wrong":
        m, files = external({"w.bin": WEIGHTS}, "w.bin", 0, 40)
    elif name == "ext-offset-abc":
        m, files = external({"w.bin": WEIGHTS}, "w.bin", "abc", 48)
    elif name == "ext-offset-overflow":
        m, files = external({"w.bin": WEIGHTS}, "w.bin", 2**63 - 8, 48)
    elif name == "ext-key-twice":
        m, files = external({"w.bin": WEIGHTS}, "w.bin", 0, 48,
                            extra=[("location", "other.bin")])
    elif name == "ext-and-inline":
        m, files = external({"w.bin": WEIGHTS}, "w.bin", 0, 48)
        m.graph.initializer[0].raw_data = WEIGHTS
    else:
        sys.exit("unknown case '%s'" % name)

    os.makedirs(out, exist_ok=True)
    for fname, data in files.items():
        path = os.path.join(out, fname)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    for fname, target in symlinks.items():
        path = os.path.join(out, fname)
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(target, path)
    for fname in fifos:
        path = os.path.join(out, fname)
        if not os.path.exists(path):
            os.mkfifo(path)
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    case(sys.argv[1], sys.argv[2])
