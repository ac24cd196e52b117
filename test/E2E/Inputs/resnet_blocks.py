#!/usr/bin/env python3
#===- resnet_blocks.py - a small ResNet and its float64 reference ---------===#
#
#   resnet_blocks.py OUT_DIR [SIZE]
#
# Writes OUT_DIR/resnet.onnx (opset 17), OUT_DIR/image.npy ([1, 3, SIZE,
# SIZE], default 32) and OUT_DIR/ref/y.npy, the output computed here in
# float64 with numpy (an independent reference: no onnxruntime, no torch).
# The model has the residual adds hpc-fuse-epilogues puts into a conv:
#   stem   conv 3->16 3x3 + relu
#   block1 conv 16->16, relu, conv 16->16, add(conv, stem), relu
#   block2 conv 16->32 stride 2, relu, conv 32->32; downsample conv 1x1
#          stride 2 without bias (computed after the conv it is added to);
#          add(conv, downsample), relu
#   block3 conv 32->32, relu, conv 32->32, add(block2, conv) (the residual
#          on the left), no relu
#   y      global average pool of block3 -> [1, 32, 1, 1]
# At SIZE 32 the 16-channel convs are below the runtime's 5 MFLOP
# threshold (its own kernels run them in the plain layout), the others run
# on oneDNN.
#
#===-----------------------------------------------------------------------===#

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_ref(x, w, b, stride, pad):
    """Cross-correlation as ONNX Conv, NCHW, float64."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    if b is not None:
        y += b.reshape(1, m, 1, 1)
    return y


def main():
    out = sys.argv[1]
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    rng = np.random.default_rng(11)
    os.makedirs(os.path.join(out, "ref"), exist_ok=True)
    inits, nodes, ref = [], [], {}
    x = rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)
    ref["image"] = x.astype(np.float64)

    def conv(name, src, cin, cout, k, stride, bias=True):
        scale = 1.0 / np.sqrt(cin * k * k)
        w = rng.normal(0, scale, (cout, cin, k, k)).astype(np.float32)
        b = rng.normal(0, 0.1, cout).astype(np.float32) if bias else None
        inits.append(numpy_helper.from_array(w, name + ".w"))
        ins = [src, name + ".w"]
        if bias:
            inits.append(numpy_helper.from_array(b, name + ".b"))
            ins.append(name + ".b")
        pad = k // 2
        nodes.append(helper.make_node("Conv", ins, [name], kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[pad] * 4))
        ref[name] = conv_ref(ref[src], w.astype(np.float64),
                             None if b is None else b.astype(np.float64), stride, pad)
        return name

    def relu(src):
        name = src + ".relu"
        nodes.append(helper.make_node("Relu", [src], [name]))
        ref[name] = np.maximum(ref[src], 0)
        return name

    def add(a, b, name):
        nodes.append(helper.make_node("Add", [a, b], [name]))
        ref[name] = ref[a] + ref[b]
        return name

    stem = relu(conv("stem", "image", 3, 16, 3, 1))
    c = relu(conv("b1.c1", stem, 16, 16, 3, 1))
    c = conv("b1.c2", c, 16, 16, 3, 1)
    b1 = relu(add(c, stem, "b1.add"))
    c = relu(conv("b2.c1", b1, 16, 32, 3, 2))
    c = conv("b2.c2", c, 32, 32, 3, 1)
    d = conv("b2.down", b1, 16, 32, 1, 2, bias=False)
    b2 = relu(add(c, d, "b2.add"))
    c = relu(conv("b3.c1", b2, 32, 32, 3, 1))
    c = conv("b3.c2", c, 32, 32, 3, 1)
    b3 = add(b2, c, "b3.add")
    nodes.append(helper.make_node("GlobalAveragePool", [b3], ["y"]))
    y = ref[b3].mean(axis=(2, 3), keepdims=True)

    graph = helper.make_graph(
        nodes, "resnet_blocks",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 1, 1])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "resnet.onnx"))
    np.save(os.path.join(out, "image.npy"), x)
    np.save(os.path.join(out, "ref", "y.npy"), y.astype(np.float32))


if __name__ == "__main__":
    main()
