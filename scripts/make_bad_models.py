#!/usr/bin/env python3
#===- make_bad_models.py - binary ONNX inputs of the importer tests -------===#
#
# Writes the small binary models under test/Import/Inputs/ that the ONNX text
# format of onnx 1.12 cannot express (external data, node names, other
# domains). The files are committed; rerun this after changing it:
#
#   /usr/bin/python3 scripts/make_bad_models.py [-o test/Import/Inputs]
#
# Needs the onnx Python package (Debian's python3-onnx is enough). The output
# is deterministic: no random data, fixed producer fields.
#
#   ext_data.onnx + ext_data.bin   y = MatMul(x, w) + b; w [4,3] at offset 0
#                                  and b [3] at offset 48 of ext_data.bin
#   ext_missing.onnx               the same graph; w and b point to
#                                  missing_weights.bin, which does not exist
#   ext_mask_missing.onnx          y = Where(mask, x, 0) with a small bool
#                                  mask [4, 4] in missing_weights.bin (absent)
#   unknown_ops.onnx               four named nodes, three of them of two op
#                                  types the importer does not know (FooBar,
#                                  com.example.Frobnicate)
#
#===-----------------------------------------------------------------------===#

import argparse
import os
import struct

import onnx
from onnx import TensorProto, helper


def external_tensor(name, dims, location, offset, length):
    t = TensorProto()
    t.name = name
    t.data_type = TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(offset)),
                       ("length", str(length))):
        entry = t.external_data.add()
        entry.key = key
        entry.value = value
    return t


def matmul_add_model(location):
    w = external_tensor("w", [4, 3], location, 0, 48)
    b = external_tensor("b", [3], location, 48, 12)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
         helper.make_node("Add", ["xw", "b"], ["y"], name="add")],
        "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[w, b])
    return finish(graph)


def mask_model(location):
    mask = external_tensor("mask", [4, 4], location, 0, 16)
    mask.data_type = TensorProto.BOOL
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
    graph = helper.make_graph(
        [helper.make_node("Where", ["mask", "x", "zero"], ["y"], name="masked")],
        "mask",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
        initializer=[mask, zero])
    return finish(graph)


def unknown_ops_model():
    graph = helper.make_graph(
        [helper.make_node("FooBar", ["x"], ["a"], name="enc/foo_1"),
         helper.make_node("Relu", ["a"], ["b"], name="enc/relu"),
         helper.make_node("FooBar", ["b"], ["c"], name="enc/foo_2"),
         helper.make_node("Frobnicate", ["c"], ["y"], name="dec/frob",
                          domain="com.example")],
        "unknown",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return finish(graph, [helper.make_opsetid("com.example", 1)])


def finish(graph, extra_opsets=()):
    model = helper.make_model(
        graph, producer_name="make_bad_models.py",
        opset_imports=[helper.make_opsetid("", 17)] + list(extra_opsets))
    model.ir_version = 8
    return model


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(
        description="Write the binary ONNX inputs of the importer tests.")
    parser.add_argument("-o", "--out",
                        default=os.path.join(here, "..", "test", "Import",
                                             "Inputs"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    # w = [[1..3], [4..6], [7..9], [10..12]], b = [0.5, -0.5, 0.25].
    weights = [float(i) for i in range(1, 13)] + [0.5, -0.5, 0.25]
    with open(os.path.join(args.out, "ext_data.bin"), "wb") as f:
        f.write(struct.pack("<15f", *weights))
    onnx.save(matmul_add_model("ext_data.bin"),
              os.path.join(args.out, "ext_data.onnx"))
    onnx.save(matmul_add_model("missing_weights.bin"),
              os.path.join(args.out, "ext_missing.onnx"))
    onnx.save(mask_model("missing_weights.bin"),
              os.path.join(args.out, "ext_mask_missing.onnx"))
    onnx.save(unknown_ops_model(), os.path.join(args.out, "unknown_ops.onnx"))


if __name__ == "__main__":
    main()
