#===- mutators.py - byte-level and structure-aware mutations of models ----===#
#
# mutate(rng, seed) turns a seed (seeds.Seed) into a Mutant: the files of one
# model directory (the model, external data files, symlinks, FIFOs), the
# hpc-opt arguments, and a short description of what was changed. Everything
# depends only on `rng`, so a (seed, index) pair reproduces a mutant.
#
# Byte-level: bit flips, truncations, insertions, overwrites, deletions and
# duplicated chunks of the serialized protobuf (or of the ONNX text of a
# textual seed).
# Structure-aware (onnx Python API): initializer dims and element types, data
# sizes (raw and typed fields), dangling inputs, duplicate names, attribute
# values out of range, attributes of the wrong type, removed and unknown
# attributes, self-loops and cycles, extra node inputs and outputs, declared
# types that conflict, graph input shapes, op types, opsets, and external
# data entries (symlinks out of the folder, FIFOs, directories, bad offsets
# and lengths, short files).
#
#===-----------------------------------------------------------------------===#

import copy

import onnx
from onnx import AttributeProto, TensorProto, helper

INT64_MAX = 2**63 - 1
INT64_MIN = -2**63
BIG_INTS = [INT64_MAX, INT64_MIN, 2**62, 2**40, -2**40, 2**31, 2**32 + 1,
            -1, -2, 0, 1, 3, 7, 1000000007]

SUPPORTED_OPS = ["Relu", "Add", "Mul", "MatMul", "Gemm", "Conv", "MaxPool",
                 "AveragePool", "Gather", "Split", "Concat", "Reshape",
                 "Transpose", "Softmax", "Cast", "Slice", "Pad", "Squeeze",
                 "Unsqueeze", "ReduceMean", "ReduceSum", "Flatten", "Expand",
                 "Tile", "Where", "TopK", "Shape", "ConstantOfShape", "Range",
                 "LayerNormalization", "BatchNormalization", "Identity",
                 "ConvTranspose", "GlobalAveragePool", "Resize", "ArgMax",
                 "OneHot", "GatherElements", "Trilu", "DepthToSpace",
                 "InstanceNormalization", "Constant", "Clip", "Dropout"]


class Mutant:
    """One model directory to write and run."""

    def __init__(self, kind, model_name, files, args, what):
        self.kind = kind              # "byte" or "struct"
        self.model_name = model_name  # file name of the model in the folder
        self.files = files            # name -> bytes
        self.symlinks = {}            # name -> target
        self.fifos = []               # names
        self.dirs = []                # names
        self.args = list(args)
        self.what = what              # list of strings


#===----------------------------------------------------------------------===#
# Byte level
#===----------------------------------------------------------------------===#

def mutate_bytes(rng, data):
    data = bytearray(data)
    what = []
    for _ in range(rng.randint(1, 4)):
        if not data:
            data = bytearray(rng.randbytes(rng.randint(1, 16)))
            what.append("refill")
            continue
        op = rng.choice(["flip", "flip", "flip", "truncate", "insert",
                         "overwrite", "delete", "duplicate", "byte"])
        n = len(data)
        if op == "flip":
            i = rng.randrange(n)
            data[i] ^= 1 << rng.randrange(8)
            what.append("flip@%d" % i)
        elif op == "byte":
            i = rng.randrange(n)
            data[i] = rng.choice([0, 0xff, 0x7f, 0x80, rng.randrange(256)])
            what.append("byte@%d" % i)
        elif op == "truncate":
            i = rng.randrange(n)
            data = data[:i]
            what.append("truncate@%d" % i)
        elif op == "insert":
            i = rng.randrange(n + 1)
            data[i:i] = rng.randbytes(rng.randint(1, 8))
            what.append("insert@%d" % i)
        elif op == "overwrite":
            i = rng.randrange(n)
            k = rng.randint(1, 8)
            data[i:i + k] = rng.randbytes(k)
            what.append("overwrite@%d" % i)
        elif op == "delete":
            i = rng.randrange(n)
            del data[i:i + rng.randint(1, 16)]
            what.append("delete@%d" % i)
        else:
            i = rng.randrange(n)
            j = min(n, i + rng.randint(1, 64))
            k = rng.randrange(n + 1)
            data[k:k] = data[i:j]
            what.append("duplicate@%d" % i)
    return bytes(data), what


#===----------------------------------------------------------------------===#
# Structure aware
#===----------------------------------------------------------------------===#

def _value_names(g):
    names = [i.name for i in g.input] + [t.name for t in g.initializer]
    for n in g.node:
        names.extend(o for o in n.output if o)
    return names


def _pick_node(rng, g, pred=lambda n: True):
    nodes = [n for n in g.node if pred(n)]
    return rng.choice(nodes) if nodes else None


def _opset(m):
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 1


def _schema(m, node):
    try:
        return onnx.defs.get_schema(node.op_type, _opset(m), "")
    except Exception:
        return None


def _data_tensors(m):
    """Initializers and Constant value tensors."""
    out = list(m.graph.initializer)
    for n in m.graph.node:
        for a in n.attribute:
            if a.type == AttributeProto.TENSOR:
                out.append(a.t)
    return out


def s_init_dims(rng, m, ctx):
    ts = _data_tensors(m)
    if not ts:
        return None
    t = rng.choice(ts)
    op = rng.choice(["negative", "huge", "huge-nodata", "zero", "add", "drop"])
    dims = list(t.dims)
    if op == "negative" and dims:
        dims[rng.randrange(len(dims))] = rng.choice([-1, -4, INT64_MIN])
    elif op == "huge" and dims:
        dims[rng.randrange(len(dims))] = rng.choice([2**62, 2**40, INT64_MAX, 2**31])
    elif op == "huge-nodata":
        dims = [2**62, 4]
        t.ClearField("raw_data")
        for f in ("float_data", "int64_data", "int32_data", "double_data"):
            t.ClearField(f)
    elif op == "zero" and dims:
        dims[rng.randrange(len(dims))] = 0
    elif op == "add":
        dims.insert(rng.randrange(len(dims) + 1), rng.choice([1, 2, 3]))
    elif dims:
        dims.pop(rng.randrange(len(dims)))
    else:
        dims = [rng.choice([-1, 2**62, 0, 5])]
    del t.dims[:]
    t.dims.extend(dims)
    return "dims of %s -> %s (%s)" % (t.name, dims, op)


def s_elem_type(rng, m, ctx):
    g = m.graph
    choice = rng.choice(["init", "input", "output", "cast"])
    dt = rng.choice(list(range(0, 24)) + [99, -1])
    if choice == "init" and g.initializer:
        t = rng.choice(g.initializer)
        t.data_type = dt
        return "data_type of %s -> %d" % (t.name, dt)
    if choice == "input" and g.input:
        vi = rng.choice(g.input)
        vi.type.tensor_type.elem_type = dt
        return "elem_type of input %s -> %d" % (vi.name, dt)
    if choice == "output" and g.output:
        vi = rng.choice(g.output)
        vi.type.tensor_type.elem_type = dt
        return "elem_type of output %s -> %d" % (vi.name, dt)
    n = _pick_node(rng, g, lambda n: n.op_type == "Cast")
    if n is None:
        return None
    for a in n.attribute:
        if a.name == "to":
            a.i = dt
    return "Cast to -> %d" % dt


def s_data_size(rng, m, ctx):
    ts = _data_tensors(m)
    if not ts:
        return None
    t = rng.choice(ts)
    op = rng.choice(["cut", "grow", "seven", "typed", "both", "clear"])
    if op == "cut" and t.raw_data:
        t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data))]
    elif op == "grow":
        t.raw_data = t.raw_data + rng.randbytes(rng.randint(1, 9))
    elif op == "seven":
        t.data_type = TensorProto.INT64
        del t.dims[:]
        t.dims.append(1)
        t.ClearField("float_data")
        t.raw_data = rng.randbytes(7)
    elif op == "typed":
        n = 1
        for d in t.dims:
            n *= max(d, 0)
        n = max(0, n + rng.choice([-1, 1, 5]))
        if n > 1 << 16:  # dims made huge by another mutation
            n = rng.choice([0, 7])
        t.ClearField("raw_data")
        if t.data_type == TensorProto.INT64:
            t.ClearField("int64_data")
            t.int64_data.extend([1] * n)
        else:
            t.ClearField("float_data")
            t.float_data.extend([0.5] * n)
    elif op == "both":
        t.float_data.append(1.0)
        t.int64_data.append(1)
    else:
        t.ClearField("raw_data")
        for f in ("float_data", "int64_data", "int32_data", "double_data"):
            t.ClearField(f)
    return "data of %s (%s)" % (t.name, op)


def s_dangling(rng, m, ctx):
    g = m.graph
    op = rng.choice(["node", "node", "output", "empty"])
    if op == "output" and g.output:
        rng.choice(g.output).name = "ghost"
        return "graph output -> ghost"
    n = _pick_node(rng, g, lambda n: len(n.input) > 0)
    if n is None:
        return None
    i = rng.randrange(len(n.input))
    n.input[i] = "" if op == "empty" else "ghost_%d" % rng.randrange(3)
    return "input %d of %s -> %r" % (i, n.op_type, n.input[i])


def s_duplicate(rng, m, ctx):
    g = m.graph
    names = _value_names(g)
    op = rng.choice(["output", "output", "init", "input", "out-as-input"])
    if op == "output" and g.node and names:
        n = rng.choice(g.node)
        if not n.output:
            return None
        n.output[rng.randrange(len(n.output))] = rng.choice(names)
        return "node output renamed to an existing name"
    if op == "init" and g.initializer:
        t = copy.deepcopy(rng.choice(g.initializer))
        t.raw_data = t.raw_data[::-1]
        g.initializer.append(t)
        return "duplicate initializer %s" % t.name
    if op == "input" and g.input:
        g.input.append(copy.deepcopy(rng.choice(g.input)))
        return "duplicate graph input"
    n = _pick_node(rng, g, lambda n: len(n.output) > 0)
    if n is None or not g.input:
        return None
    n.output[0] = rng.choice(g.input).name
    return "node output named like a graph input"


def s_attr_range(rng, m, ctx):
    n = _pick_node(rng, m.graph, lambda n: any(
        a.type in (AttributeProto.INT, AttributeProto.INTS) for a in n.attribute))
    if n is None:
        return None
    a = rng.choice([a for a in n.attribute
                    if a.type in (AttributeProto.INT, AttributeProto.INTS)])
    v = rng.choice(BIG_INTS)
    if a.type == AttributeProto.INT:
        a.i = v
    elif a.ints and rng.random() < 0.7:
        a.ints[rng.randrange(len(a.ints))] = v
    else:
        del a.ints[:]
        a.ints.extend([v] * rng.randint(0, 5))
    return "%s.%s -> %d" % (n.op_type, a.name, v)


def s_attr_type(rng, m, ctx):
    n = _pick_node(rng, m.graph, lambda n: len(n.attribute) > 0)
    if n is None:
        return None
    a = rng.choice(n.attribute)
    old = a.type
    new = rng.choice([AttributeProto.INT, AttributeProto.INTS,
                      AttributeProto.FLOAT, AttributeProto.STRING,
                      AttributeProto.FLOATS, AttributeProto.TENSOR, 0])
    if new == old:
        new = AttributeProto.INT if old != AttributeProto.INT else AttributeProto.INTS
    first = a.ints[0] if a.ints else (a.i or 2)
    name = a.name
    a.Clear()
    a.name = name
    if new == AttributeProto.INT:
        a.i = first
    elif new == AttributeProto.INTS:
        a.ints.extend([first, first])
    elif new == AttributeProto.FLOAT:
        a.f = float(first)
    elif new == AttributeProto.FLOATS:
        a.floats.extend([float(first)])
    elif new == AttributeProto.STRING:
        a.s = b"VALID"
    elif new == AttributeProto.TENSOR:
        a.t.CopyFrom(helper.make_tensor("t", TensorProto.INT64, [1], [first]))
    else:
        a.i = first
    a.type = new
    return "%s.%s type %d -> %d" % (n.op_type, name, old, new)


def s_attr_remove(rng, m, ctx):
    n = _pick_node(rng, m.graph, lambda n: len(n.attribute) > 0)
    if n is None:
        return None
    i = rng.randrange(len(n.attribute))
    name = n.attribute[i].name
    del n.attribute[i]
    return "removed %s.%s" % (n.op_type, name)


def s_attr_add(rng, m, ctx):
    n = _pick_node(rng, m.graph) if m.graph.node else None
    if n is None:
        return None
    schema = _schema(m, n)
    names = list(schema.attributes) if schema else []
    if names and rng.random() < 0.8:
        name = rng.choice(names)
        typ = int(schema.attributes[name].type)
    else:
        name, typ = "bogus", AttributeProto.INT
    for a in list(n.attribute):
        if a.name == name:
            n.attribute.remove(a)
    v = rng.choice(BIG_INTS)
    if typ == AttributeProto.INT:
        attr = helper.make_attribute(name, v)
    elif typ == AttributeProto.INTS:
        attr = helper.make_attribute(name, [v] * rng.randint(0, 4))
    elif typ == AttributeProto.FLOAT:
        attr = helper.make_attribute(name, rng.choice([0.0, -1.0, 1e30, float("nan")]))
    elif typ == AttributeProto.STRING:
        attr = helper.make_attribute(name, rng.choice(["", "SAME_UPPER", "VALID", "junk"]))
    else:
        attr = helper.make_attribute(name, v)
    n.attribute.append(attr)
    return "set %s.%s" % (n.op_type, name)


def s_self_loop(rng, m, ctx):
    g = m.graph
    op = rng.choice(["self", "cycle", "swap"])
    if op == "self":
        n = _pick_node(rng, g, lambda n: len(n.input) and len(n.output))
        if n is None:
            return None
        n.input[rng.randrange(len(n.input))] = n.output[0]
        return "%s feeds itself" % n.op_type
    if len(g.node) < 2:
        return None
    i, j = sorted(rng.sample(range(len(g.node)), 2))
    if op == "cycle" and g.node[i].input and g.node[j].output:
        g.node[i].input[0] = g.node[j].output[0]
        return "cycle between nodes %d and %d" % (i, j)
    a, b = copy.deepcopy(g.node[i]), copy.deepcopy(g.node[j])
    g.node[i].CopyFrom(b)
    g.node[j].CopyFrom(a)
    return "swapped nodes %d and %d" % (i, j)


def s_extra_io(rng, m, ctx):
    n = _pick_node(rng, m.graph) if m.graph.node else None
    if n is None:
        return None
    if rng.random() < 0.5:
        names = _value_names(m.graph)
        n.input.append(rng.choice(names) if names else "")
        return "extra input of %s" % n.op_type
    n.output.append("extra_out_%d" % rng.randrange(9))
    return "extra output of %s" % n.op_type


def s_value_info(rng, m, ctx):
    g = m.graph
    op = rng.choice(["vi", "vi-dup", "output-shape", "output-type"])
    outs = [o for n in g.node for o in n.output if o]
    if op.startswith("vi") and outs:
        name = rng.choice(outs)
        shape = [rng.choice([1, 2, 3, 7]) for _ in range(rng.randint(0, 4))]
        g.value_info.append(helper.make_tensor_value_info(
            name, rng.choice([1, 7, 6]), shape))
        if op == "vi-dup":
            g.value_info.append(helper.make_tensor_value_info(name, 1, [9]))
        return "value_info %s -> %s" % (name, shape)
    if not g.output:
        return None
    o = rng.choice(g.output)
    tt = o.type.tensor_type
    if op == "output-shape" and tt.shape.dim:
        d = tt.shape.dim[rng.randrange(len(tt.shape.dim))]
        d.dim_value = rng.choice([1, 5, 9, 2**40])
        return "declared output shape of %s" % o.name
    tt.elem_type = rng.choice([1, 6, 7, 11])
    return "declared output type of %s" % o.name


def s_op_type(rng, m, ctx):
    n = _pick_node(rng, m.graph) if m.graph.node else None
    if n is None:
        return None
    old = n.op_type
    n.op_type = rng.choice(SUPPORTED_OPS)
    return "op %s -> %s" % (old, n.op_type)


def s_opset(rng, m, ctx):
    v = rng.choice([1, 5, 6, 7, 9, 11, 12, 13, 17, 18, 21, 22, 99, -3])
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = v
    return "opset -> %d" % v


def s_node_drop(rng, m, ctx):
    if not m.graph.node:
        return None
    i = rng.randrange(len(m.graph.node))
    del m.graph.node[i]
    return "dropped node %d" % i


def s_input_shape(rng, m, ctx):
    g = m.graph
    if not g.input:
        return None
    vi = rng.choice(g.input)
    dims = vi.type.tensor_type.shape.dim
    op = rng.choice(["value", "param", "add", "drop", "clear"])
    if op == "value" and dims:
        dims[rng.randrange(len(dims))].dim_value = rng.choice(
            [0, -1, 2**40, 2**62, INT64_MAX, 3])
    elif op == "param" and dims:
        dims[rng.randrange(len(dims))].dim_param = "n"
    elif op == "add":
        dims.add().dim_value = rng.choice([1, 2])
    elif op == "drop" and dims:
        del dims[rng.randrange(len(dims))]
    else:
        vi.type.tensor_type.ClearField("shape")
    return "shape of input %s (%s)" % (vi.name, op)


EXTERNAL_VARIANTS = ["ok", "passwd", "dotdot", "absolute", "fifo", "dir",
                     "short", "offset-past-end", "offset-abc", "length-neg",
                     "length-wrong", "offset-neg", "no-location", "inner-link",
                     "dev-zero", "link-loop", "missing", "offset-plus",
                     "length-huge", "dup-key"]


def s_external(rng, m, ctx):
    """Moves an initializer's data to an external file, some way or other."""
    g = m.graph
    ext = [t for t in g.initializer if t.data_location == TensorProto.EXTERNAL]
    cands = [t for t in g.initializer if t.raw_data]
    if ext and (not cands or rng.random() < 0.5):
        t = rng.choice(ext)
        data = None
    elif cands:
        t = rng.choice(cands)
        data = t.raw_data
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        for k, v in (("location", "ext.bin"), ("offset", "0"),
                     ("length", str(len(data)))):
            e = t.external_data.add()
            e.key, e.value = k, v
        ctx.files["ext.bin"] = data
    else:
        return None
    variant = rng.choice(EXTERNAL_VARIANTS)
    entries = {e.key: e for e in t.external_data}
    loc = entries["location"].value if "location" in entries else "ext.bin"
    size = len(ctx.files.get(loc, b""))

    def setv(key, value):
        if key in entries:
            entries[key].value = value
        else:
            e = t.external_data.add()
            e.key, e.value = key, value
            entries[key] = e

    if variant == "passwd":
        ctx.symlinks["passwd.bin"] = "/etc/passwd"
        setv("location", "passwd.bin")
        setv("offset", "0")
    elif variant == "dotdot":
        setv("location", "../" + loc)
    elif variant == "absolute":
        setv("location", "/etc/passwd")
    elif variant == "fifo":
        ctx.fifos.append("fifo.bin")
        setv("location", "fifo.bin")
    elif variant == "dir":
        ctx.dirs.append("adir")
        setv("location", "adir")
    elif variant == "short" and loc in ctx.files:
        ctx.files[loc] = ctx.files[loc][:rng.randrange(max(1, size))]
    elif variant == "offset-past-end":
        setv("offset", str(size + rng.choice([0, 4, 1 << 20])))
    elif variant == "offset-abc":
        setv("offset", rng.choice(["abc", "1.5", "0x10", " 4", "4 ", "", "+4"]))
    elif variant == "length-neg":
        setv("length", "-1")
    elif variant == "length-wrong":
        setv("length", str(rng.choice([0, 1, 3, 1 << 40])))
    elif variant == "offset-neg":
        setv("offset", "-8")
    elif variant == "no-location":
        t.ClearField("external_data")
        for k, e in entries.items():
            if k != "location":
                ne = t.external_data.add()
                ne.key, ne.value = k, e.value
    elif variant == "inner-link" and loc in ctx.files:
        ctx.symlinks["inner.bin"] = loc
        setv("location", "inner.bin")
    elif variant == "dev-zero":
        ctx.symlinks["zero.bin"] = "/dev/zero"
        setv("location", "zero.bin")
    elif variant == "link-loop":
        ctx.symlinks["loop.bin"] = "loop.bin"
        setv("location", "loop.bin")
    elif variant == "missing":
        setv("location", "nowhere.bin")
    elif variant == "offset-plus":
        setv("offset", str(INT64_MAX))
    elif variant == "length-huge":
        setv("length", str(2**63 + 5))
    elif variant == "dup-key":
        e = t.external_data.add()
        e.key, e.value = "location", "nowhere.bin"
    return "external data of %s (%s)" % (t.name, variant)


STRUCT_MUTATORS = [s_init_dims, s_elem_type, s_data_size, s_dangling,
                   s_duplicate, s_attr_range, s_attr_range, s_attr_type,
                   s_attr_type, s_attr_remove, s_attr_add, s_attr_add,
                   s_self_loop, s_extra_io, s_value_info, s_op_type, s_opset,
                   s_node_drop, s_input_shape, s_external, s_external]


def mutate(rng, seed):
    """A Mutant of `seed`: byte-level about a third of the time."""
    if rng.random() < 0.35:
        if seed.text is not None and rng.random() < 0.5:
            data, what = mutate_bytes(rng, seed.text.encode())
            return Mutant("byte", "model.onnxtxt", {"model.onnxtxt": data},
                          seed.args, ["text"] + what)
        data, what = mutate_bytes(rng, seed.bytes)
        files = dict(seed.files)
        files["model.onnx"] = data
        return Mutant("byte", "model.onnx", files, seed.args, what)
    m = onnx.ModelProto()
    m.ParseFromString(seed.bytes)
    mutant = Mutant("struct", "model.onnx", dict(seed.files), seed.args, [])
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        mutator = rng.choice(STRUCT_MUTATORS)
        try:
            what = mutator(rng, m, mutant)
        except ValueError:  # a value protobuf itself refuses to hold
            what = None
        if what:
            mutant.what.append(what)
    if not mutant.what:
        mutant.what.append(s_opset(rng, m, mutant))
    mutant.files["model.onnx"] = m.SerializeToString()
    return mutant
