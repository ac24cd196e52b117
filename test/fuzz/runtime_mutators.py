#===- runtime_mutators.py - bad inputs for compiled model executables ------===#
#
# generate(rng, target) makes one Case: the files of a case folder (inputs,
# weights, data, a checkpoint; FIFOs, symlinks, unreadable files), the
# executable's command line, and what a correct runtime must do with it:
#
#   reject   the input is invalid: exit 1 with one error line is the only
#            right answer (exit 0 is a silent acceptance)
#   any      it may be valid (a flipped byte inside float data): exit 0 or
#            one error line
#   strict   invalid only in what the runtime does not read: the padding of
#            a .npy header (numpy's reader refuses it), a checkpoint
#            manifest's world_size or state_bytes, a shard's hpc_step;
#            accepting it is counted apart ("lenient"), not as bad
#
# The verdict does not come from the runtime: each file is judged on its
# own by an oracle (numpy's .npy header reader, onnx's TensorProto parser
# and numpy_helper, a strict safetensors reader below, the JSON of a
# checkpoint manifest) or by the mutation itself (a truncated safetensors
# file, a FIFO, /dev/zero). Everything depends only on `rng`, so a
# (seed, index) pair reproduces a case.
#
#===-----------------------------------------------------------------------===#

import io
import json
import re
import struct
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import mutators

INT64_MAX = 2**63 - 1
HUGE_NUMBERS = ["1000000001", "4294967296", str(INT64_MAX), str(2**64),
                "99999999999999999999999", "1e9", "1e999", "-1", "0"]


class Case:
    """One run of a compiled program. `argv` follows the program name;
    "{case}" in it stands for the case folder."""

    def __init__(self, category, target, what, expect):
        self.category = category
        self.target = target
        self.what = list(what)
        self.expect = expect  # "reject", "any" or "strict"
        self.files = {}       # relative name -> bytes
        self.dirs = []        # relative names of empty folders
        self.fifos = []       # relative names
        self.symlinks = {}    # relative name -> target
        self.modes = {}       # relative name -> chmod mode
        self.argv = []
        self.link_program = False  # run a link to the program from the case folder

    def to_json(self):
        return {"category": self.category, "target": self.target, "what": self.what,
                "expect": self.expect, "argv": self.argv, "dirs": self.dirs,
                "fifos": self.fifos, "symlinks": self.symlinks,
                "modes": {k: oct(v) for k, v in self.modes.items()},
                "link_program": self.link_program}

    @staticmethod
    def from_json(d, files):
        c = Case(d["category"], d["target"], d["what"], d["expect"])
        c.argv = d["argv"]
        c.dirs = d.get("dirs", [])
        c.fifos = d.get("fifos", [])
        c.symlinks = d.get("symlinks", {})
        c.modes = {k: int(v, 8) for k, v in d.get("modes", {}).items()}
        c.link_program = d.get("link_program", False)
        c.files = files
        return c


#===----------------------------------------------------------------------===#
# Valid inputs of a target, and the command that uses them
#===----------------------------------------------------------------------===#

def sample_array(dtype, shape, salt=0):
    """Deterministic values: small floats, or indices valid for a Gather of
    4 rows."""
    n = int(np.prod(shape)) if shape else 1
    if np.dtype(dtype).kind in "iu":
        return (np.arange(n, dtype=np.int64) % 4).astype(dtype).reshape(shape)
    return ((np.arange(n) * 0.37 + salt) % 3 - 1).astype(dtype).reshape(shape)


def npy_bytes(array):
    f = io.BytesIO()
    np.save(f, array)
    return f.getvalue()


def pb_bytes(array, name, typed=False):
    if typed:
        t = helper.make_tensor(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[array.dtype],
                               array.shape, array.flatten().tolist())
    else:
        t = numpy_helper.from_array(array, name)
    return t.SerializeToString()


def base_case(category, target, what, expect, fmt="npy"):
    """A case whose files and command run the target correctly: every input
    (or data source) as FMT, the output folder inside the case folder."""
    c = Case(category, target.name, what, expect)
    if target.command == "run":
        c.argv = ["run"]
        for name, dtype, shape in target.inputs:
            arr = sample_array(dtype, shape)
            fname = "%s.%s" % (name, fmt)
            c.files[fname] = npy_bytes(arr) if fmt == "npy" else pb_bytes(arr, name)
            c.argv += ["--input", "%s={case}/%s" % (name, fname)]
        c.argv += ["--output-dir", "{case}/out"]
    elif target.vocab:
        c.files["tok.bin"] = token_array(target, target.samples * target.inputs[0][2][0] + 1) \
            .astype("<u2").tobytes()
        c.argv = ["train", "--tokens", "{case}/tok.bin", "--steps", "2"]
    else:
        c.argv = ["train"]
        for name, dtype, shape in target.inputs:
            arr = sample_array(dtype, (target.samples,) + tuple(shape), salt=len(name))
            c.files[name + ".npy"] = npy_bytes(arr)
            c.argv += ["--data", "%s={case}/%s.npy" % (name, name)]
        c.argv += ["--steps", "2"]
    return c


def token_array(target, n):
    return (np.arange(n, dtype=np.int64) * 7) % target.vocab


def input_expected(target, name):
    """(dtype, shape, rows): the array an input file must hold; for a data
    file of a train step, `shape` is one sample's and `rows` the batch."""
    for n, dtype, shape in target.inputs:
        if n == name:
            if target.command == "train":
                return np.dtype(dtype), tuple(shape), target.batch
            return np.dtype(dtype), tuple(shape), None
    raise KeyError(name)


def array_fits(arr_dtype, arr_shape, fortran, target, name):
    """The verdict on a well-formed array: 'any' when the target can use
    it, else 'reject'."""
    dtype, shape, rows = input_expected(target, name)
    if arr_dtype.kind != dtype.kind or arr_dtype.itemsize != dtype.itemsize:
        return "reject"
    if rows is None:
        if tuple(arr_shape) != shape:
            return "reject"
    elif len(arr_shape) != len(shape) + 1 or tuple(arr_shape[1:]) != shape or \
            arr_shape[0] < rows:
        return "reject"
    if fortran and sum(1 for d in arr_shape if d > 1) > 1:
        return "reject"  # the runtime reads C order only: accepting it is wrong
    return "any"


#===----------------------------------------------------------------------===#
# .npy
#===----------------------------------------------------------------------===#

def npy_verdict(data, original, target, name):
    """Judges a (mutated) .npy file with numpy's header reader."""
    try:
        f = io.BytesIO(data)
        version = np.lib.format.read_magic(f)
        dtype_shape = np.lib.format._read_array_header(f, version, max_header_size=1 << 20)
        shape, fortran, dtype = dtype_shape
        offset = f.tell()
    except Exception:
        return _npy_lenient(data, original)
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        return "reject"
    needed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if len(data) - offset < needed:
        return "reject"
    return array_fits(dtype, shape, fortran, target, name)


_NPY_FIELDS = re.compile(
    rb"\{'descr': '([^']*)', 'fortran_order': (True|False), 'shape': (\([0-9, ]*\)), \}")


def _npy_lenient(data, original):
    """'strict' when only what numpy checks and the runtime need not read
    changed (the padding after the dict, the newline), else 'reject'."""
    if len(data) != len(original) or data[:10] != original[:10]:
        return "reject"
    hlen = original[8] | original[9] << 8
    m_new = _NPY_FIELDS.match(data, 10)
    m_old = _NPY_FIELDS.match(original, 10)
    if not m_new or not m_old or m_new.group(0) != m_old.group(0):
        return "reject"
    if data[10 + hlen:] != original[10 + hlen:]:
        return "reject"
    return "strict"


def npy_header(descr, fortran, shape, pad_to=64):
    h = "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    h += " " * ((pad_to - (10 + len(h) + 1) % pad_to) % pad_to) + "\n"
    return h.encode("latin1")


def npy_assemble(header, data, version=1):
    if version == 1:
        pre = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) & 0xffff)
    else:
        pre = b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<I", len(header))
    return pre + header + data


def _shape_text(shape):
    return "(%s)" % ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")


def _npy_shape_text(rng, s):
    """A shape entry for a header of an array of shape `s`: other shapes,
    sizes that overflow, and text that is not a tuple of integers."""
    choice = rng.choice(["reverse", "drop", "add1", "double", "zero", "neg", "huge",
                         "overflow", "text", "empty", "float", "long", "nested"])
    if choice == "reverse":
        t = _shape_text(s[::-1])
    elif choice == "drop":
        t = _shape_text(s[:-1])
    elif choice == "add1":
        t = _shape_text(s + [1])
    elif choice == "double":
        i = rng.randrange(len(s))
        t = _shape_text(s[:i] + [s[i] * 2] + s[i + 1:])
    elif choice == "zero":
        t = _shape_text([0] + s[1:])
    elif choice == "neg":
        t = _shape_text([-s[0]] + s[1:])
    elif choice == "huge":
        t = _shape_text([rng.choice([2**31, 2**32, 2**40, 2**62])] + s[1:])
    elif choice == "overflow":
        t = _shape_text(rng.choice([[2**32, 2**32], [2**62, 4], [2**63 - 1, 2],
                                    [2**64 + 6], [10**20, 3], [3037000500, 3037000500]]))
    elif choice == "text":
        t = rng.choice(["(2, 3", "2, 3)", "[2, 3]", "(2 3)", "(a, 3)", "(,)", "(2,,3)",
                        "((2, 3),)", "(" + "9" * 400 + ",)"])
    elif choice == "empty":
        t = "()"
    elif choice == "float":
        t = "(%s.0,)" % s[0] if len(s) == 1 else "(%s.0, %s)" % (
            s[0], ", ".join(str(d) for d in s[1:]))
    elif choice == "long":
        t = "(%s)" % ", ".join("%dL" % d for d in s)
    else:
        t = "(" * 2000 + ")" * 2000
    return t


def mutate_npy(rng, original, arr):
    """A mutated .npy of `arr` (whose serialization is `original`) and a
    description."""
    data = arr.tobytes()
    descr = repr(np.lib.format.dtype_to_descr(arr.dtype))
    shape = _shape_text(arr.shape)
    kind = rng.choice(["bytes", "header-bytes", "data-bytes", "truncate", "descr",
                       "fortran", "shape", "shape", "hlen", "version", "append", "keys"])
    if kind == "bytes":
        out, what = mutators.mutate_bytes(rng, original)
        return out, ["bytes"] + what
    hlen = original[8] | original[9] << 8
    if kind in ("header-bytes", "data-bytes"):
        lo, hi = (0, 10 + hlen) if kind == "header-bytes" else (10 + hlen, len(original))
        if hi <= lo:
            lo, hi = 0, len(original)
        out = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(lo, hi)
            out[i] = rng.choice([out[i] ^ (1 << rng.randrange(8)), rng.randrange(256)])
        return bytes(out), [kind]
    if kind == "truncate":
        n = rng.randrange(len(original))
        return original[:n], ["truncate@%d" % n]
    if kind == "descr":
        d = rng.choice(["'<f8'", "'<f2'", "'<i4'", "'<i8'", "'|u1'", "'|b1'", "'>f4'",
                        "'>i8'", "'<c8'", "'<U4'", "'|O'", "''", "'<'", "'f'", "'<f4x'",
                        "'<f16'", "'f4'", "'=f4'", "'<i8'", "'|V2'", "'<f4", "None", "3",
                        "[('a', '<f4')]", "'<" + "f" * 300 + "'"])
        return npy_assemble(npy_header(d, "False", shape), data), ["descr " + d[:40]]
    if kind == "fortran":
        f = rng.choice(["True", "true", "1", "0", "None", "'False'", "", "False False"])
        return npy_assemble(npy_header(descr, f, shape), data), ["fortran_order " + f]
    if kind == "shape":
        t = _npy_shape_text(rng, list(arr.shape))
        return npy_assemble(npy_header(descr, "False", t), data), ["shape " + t[:60]]
    if kind == "hlen":
        delta = rng.choice([-64, -16, -2, -1, 1, 2, 16, 64, 4096, 65535 - hlen])
        out = bytearray(original)
        out[8:10] = struct.pack("<H", max(0, min(65535, hlen + delta)))
        return bytes(out), ["header length %+d" % delta]
    if kind == "version":
        v = rng.choice([0, 2, 3, 4, 255])
        out = bytearray(original)
        out[6] = v
        if v in (2, 3) and rng.random() < 0.5:
            out = bytearray(npy_assemble(original[10:10 + hlen], data, v))
            if rng.random() < 0.5:
                out[8:12] = struct.pack("<I", rng.choice([2**31, 2**32 - 1, 2**24]))
                return bytes(out), ["version %d, header length huge" % v]
            return bytes(out), ["version %d, re-encoded" % v]
        return bytes(out), ["version byte %d" % v]
    if kind == "append":
        extra = rng.randbytes(rng.choice([1, 4, 100]))
        return original + extra, ["append %d bytes" % len(extra)]
    keys = rng.choice([
        "{'descr': %s, 'fortran_order': False, 'shape': %s, 'extra': 1, }" % (descr, shape),
        "{'descr': %s, 'shape': %s, }" % (descr, shape),
        "{'fortran_order': False, 'shape': %s, }" % shape,
        "{'descr': %s, 'fortran_order': False, }" % descr,
        "{'descr': %s, 'fortran_order': False, 'shape': %s, 'shape': (1,), }" % (descr, shape),
        "[%s, False, %s]" % (descr, shape),
        ""])
    h = keys + " " * ((64 - (11 + len(keys)) % 64) % 64) + "\n"
    return npy_assemble(h.encode(), data), ["dict " + keys[:60]]


#===----------------------------------------------------------------------===#
# TensorProto (.pb)
#===----------------------------------------------------------------------===#

def pb_verdict(data, target, name):
    """Judges a (mutated) TensorProto with onnx's parser and numpy_helper."""
    t = TensorProto()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Unexpected end-group tag"
            t.ParseFromString(data)
        if t.data_location == TensorProto.EXTERNAL or t.HasField("segment"):
            return "reject"
        arr = numpy_helper.to_array(t)
    except Exception:
        return "reject"
    if arr.dtype.hasobject:
        return "reject"
    return array_fits(arr.dtype, arr.shape, False, target, name)


def _varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7f
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def mutate_pb(rng, arr, name):
    """A mutated TensorProto of `arr`: byte-level over its serialization,
    or structure-aware through the onnx API and raw wire bytes."""
    typed = rng.random() < 0.3
    base = pb_bytes(arr, name, typed)
    kind = rng.choice(["bytes", "bytes", "truncate", "dims", "data_type", "raw_size",
                       "typed", "wire", "location"])
    if kind == "bytes":
        out, what = mutators.mutate_bytes(rng, base)
        return out, ["bytes" + (" typed" if typed else "")] + what
    if kind == "truncate":
        n = rng.randrange(len(base))
        return base[:n], ["truncate@%d" % n]
    t = TensorProto()
    t.ParseFromString(base)
    if kind == "dims":
        dims = list(t.dims)
        choice = rng.choice(["reverse", "drop", "add", "neg", "huge", "overflow", "none"])
        if choice == "reverse":
            dims = dims[::-1]
        elif choice == "drop":
            dims = dims[:-1]
        elif choice == "add":
            dims = dims + [rng.choice([1, 2])]
        elif choice == "neg":
            dims = [-d for d in dims]
        elif choice == "huge":
            dims = [rng.choice([2**31, 2**40, 2**62, INT64_MAX])] + dims[1:]
        elif choice == "overflow":
            dims = rng.choice([[2**32, 2**32], [2**62, 4], [3037000500, 3037000500, 2]])
        else:
            dims = []
        del t.dims[:]
        t.dims.extend(dims)
        return t.SerializeToString(), ["dims %s" % dims]
    if kind == "data_type":
        dt = rng.choice([0, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 23, 99, 2**31 - 1])
        t.data_type = dt
        return t.SerializeToString(), ["data_type %d" % dt]
    if kind == "raw_size":
        raw = t.raw_data if t.HasField("raw_data") else arr.tobytes()
        k = rng.choice([-4, -1, 1, 4, len(raw)])
        t.ClearField("float_data")
        t.ClearField("int64_data")
        t.raw_data = raw[:k] if k < 0 else raw + b"\0" * k
        return t.SerializeToString(), ["raw_data %+d bytes" % k]
    if kind == "typed":
        choice = rng.choice(["fewer", "more", "wrong-field", "both"])
        vals = arr.flatten().tolist()
        t.ClearField("raw_data")
        field = t.int64_data if arr.dtype.kind in "iu" else t.float_data
        if choice == "fewer":
            field.extend(vals[:-1])
        elif choice == "more":
            field.extend(vals + vals[:1])
        elif choice == "wrong-field":
            (t.float_data if arr.dtype.kind in "iu" else t.int64_data).extend(
                [int(v) for v in vals])
        else:
            field.extend(vals)
            t.int32_data.extend([1] * len(vals))
        return t.SerializeToString(), ["typed " + choice]
    if kind == "location":
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", rng.choice(["/etc/passwd", "../x", "x.bin"])
        return t.SerializeToString(), ["external data " + e.value]
    # Raw wire bytes onnx would not write: a length past the end, a varint
    # of 11 bytes, wire types 3, 4, 6 and 7, a huge packed length.
    choice = rng.choice(["len-past-end", "long-varint", "wire3", "wire6", "packed-huge",
                         "dims-unterminated"])
    if choice == "len-past-end":
        extra = _varint(9 << 3 | 2) + _varint(2**40)
    elif choice == "long-varint":
        extra = _varint(2 << 3) + b"\xff" * 10 + b"\x01"
    elif choice == "wire3":
        extra = _varint(20 << 3 | 3)
    elif choice == "wire6":
        extra = _varint(20 << 3 | 6) + b"\0" * 8
    elif choice == "packed-huge":
        extra = _varint(1 << 3 | 2) + _varint(2**62)
    else:
        extra = _varint(1 << 3 | 2) + _varint(5) + b"\x80\x80"
    return base + extra, ["wire " + choice]


#===----------------------------------------------------------------------===#
# safetensors
#===----------------------------------------------------------------------===#

ST_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
             "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}


def st_split(data):
    """(header dict, data section) of a well-formed file, else None, by the
    format's rules: the size field within the file, one JSON object without
    duplicate keys, each tensor a known dtype, non-negative integer dims, and
    data_offsets inside the data section that hold exactly its bytes."""
    if len(data) < 8:
        return None
    n = struct.unpack("<Q", data[:8])[0]
    if n > len(data) - 8:
        return None

    def pairs(kv):
        keys = [k for k, _ in kv]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate key")
        return dict(kv)

    def no_constant(_):
        raise ValueError("not JSON")

    try:
        h = json.loads(data[8:8 + n].decode("utf-8"), object_pairs_hook=pairs,
                       parse_constant=no_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(h, dict):
        return None
    body = data[8 + n:]
    for k, v in h.items():
        if k == "__metadata__":
            if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
                return None
            continue
        if not isinstance(v, dict) or set(v) != {"dtype", "shape", "data_offsets"}:
            return None
        if v["dtype"] not in ST_DTYPES or not isinstance(v["shape"], list):
            return None
        if not all(type(d) is int and d >= 0 for d in v["shape"]):
            return None
        off = v["data_offsets"]
        if not isinstance(off, list) or len(off) != 2 or \
                not all(type(o) is int for o in off):
            return None
        if not 0 <= off[0] <= off[1] <= len(body):
            return None
        if off[1] - off[0] != int(np.prod(v["shape"], dtype=object)) * ST_DTYPES[v["dtype"]]:
            return None
    return h, body


def st_verdict(data, original):
    """A weights file must be well-formed; one that names the model's
    hpc_hash must also hold the compiled layout: the same tensors with the
    same dtype, shape and offsets, and the same data bytes."""
    got = st_split(data)
    if got is None:
        return "reject"
    h, body = got
    oh, obody = st_split(original)
    meta = h.get("__metadata__", {})
    if "hpc_hash" not in meta:
        return "any"  # read by name: it may or may not hold what the plan needs
    if meta["hpc_hash"].lower() != oh["__metadata__"]["hpc_hash"]:
        return "reject"
    strip = lambda d: {k: v for k, v in d.items() if k != "__metadata__"}
    if strip(h) != strip(oh) or body != obody:
        return "reject"
    return "any"


def st_assemble(header_text, body, size=None):
    raw = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    raw += b" " * ((64 - (8 + len(raw)) % 64) % 64)
    return struct.pack("<Q", len(raw) if size is None else size) + raw + body


def _edit_tensor(rng, entry, others):
    """Changes one field of a tensor entry in place; returns a description."""
    field = rng.choice(["dtype", "shape", "shape", "offsets", "offsets"])
    if field == "dtype":
        entry["dtype"] = rng.choice(["F16", "BF16", "F64", "I32", "I64", "U8", "BOOL",
                                     "f32", "F32 ", "", None, 3, "X" * 1000])
        return "dtype %r" % (entry["dtype"],)
    if field == "shape":
        s = list(entry["shape"])
        entry["shape"] = rng.choice([
            s[::-1], s + [1], [1] + s, s[:-1], [], [d * 2 for d in s],
            [-d for d in s], [2**40] + s[1:], [2**64] + s[1:], [2**62, 4],
            [float(d) for d in s], [str(d) for d in s], [s], "3", None])
        return "shape %r" % (entry["shape"],)
    b, e = entry["data_offsets"]
    other = rng.choice(others)["data_offsets"] if others else [0, 0]
    entry["data_offsets"] = rng.choice([
        [b + 4, e + 4], [b - 4, e - 4] if b >= 4 else [b + 8, e + 8], [e, b], [b, e + 4],
        [b, e - 4], [b, 2**40], [2**64 - 4, 2**64], [-4, e], [float(b), float(e)],
        [str(b), str(e)], [b], [b, e, e], other, [0, 0], None])
    return "data_offsets %r" % (entry["data_offsets"],)


def mutate_safetensors(rng, original):
    """A mutated copy of a compiled program's weights file."""
    h, body = st_split(original)
    kind = rng.choice(["bytes", "header-bytes", "truncate", "size", "tensor", "tensor",
                       "rename", "remove", "extra", "hash", "metadata", "shape-of-header",
                       "json-text", "append"])
    n = struct.unpack("<Q", original[:8])[0]
    if kind == "bytes":
        out, what = mutators.mutate_bytes(rng, original)
        return out, ["bytes"] + what
    if kind == "header-bytes":
        out = bytearray(original)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(8, 8 + n)
            out[i] = rng.choice([out[i] ^ (1 << rng.randrange(8)), rng.randrange(256)])
        return bytes(out), ["header bytes"]
    if kind == "truncate":
        k = rng.randrange(len(original))
        return original[:k], ["truncate@%d" % k]
    if kind == "size":
        v = rng.choice([0, 1, n - 1, n + 1, n - 8, n + 64, len(original), 2**32, 2**63,
                        2**64 - 1, 2**64 - 8])
        return struct.pack("<Q", v) + original[8:], ["header size %d" % v]
    if kind == "append":
        return original + rng.randbytes(rng.choice([1, 8, 64])), ["append"]
    h = json.loads(json.dumps(h))
    names = [k for k in h if k != "__metadata__"]
    keep_hash = rng.random() < 0.8
    what = []
    if kind == "tensor":
        name = rng.choice(names)
        what.append("%s: %s" % (name, _edit_tensor(
            rng, h[name], [h[k] for k in names if k != name])))
    elif kind == "rename":
        name = rng.choice(names)
        new = rng.choice([name + "_x", name.upper(), "", "__metadata__x", name + "\u00e9"])
        h[new] = h.pop(name)
        what.append("rename %s -> %r" % (name, new))
    elif kind == "remove":
        name = rng.choice(names)
        del h[name]
        what.append("remove " + name)
    elif kind == "extra":
        name = rng.choice(names)
        h["extra"] = dict(h[name])
        if rng.random() < 0.5:
            h["extra"]["data_offsets"] = [len(body), len(body) + 4]
            h["extra"]["shape"] = [1]
        what.append("extra tensor like " + name)
    elif kind == "hash":
        v = h["__metadata__"]["hpc_hash"]
        h["__metadata__"]["hpc_hash"] = rng.choice(
            [v[:-1] + ("0" if v[-1] != "0" else "1"), "", "zz" + v[2:], v.upper(), v + "0",
             "0x" + v, 123])
        keep_hash = True
        what.append("hpc_hash %r" % (h["__metadata__"]["hpc_hash"],))
    elif kind == "metadata":
        h["__metadata__"] = rng.choice([
            dict(h["__metadata__"], note="x"), dict(h["__metadata__"], format=1),
            [h["__metadata__"]], "x", None, dict(h["__metadata__"], hpc_hash=None)])
        keep_hash = True
        what.append("__metadata__ %r" % (h["__metadata__"],))
    elif kind == "shape-of-header":
        text = rng.choice(["[]", "\"x\"", "1", "null", "{}", json.dumps([h])])
        return st_assemble(text, body), ["header " + text[:40]]
    else:
        text = json.dumps(h)
        choice = rng.choice(["dup", "trailing", "nan", "deep", "unterminated", "nul"])
        if choice == "dup":
            name = rng.choice(names)
            entry = dict(h[name], data_offsets=[0, 0], shape=[0])
            text = text[:-1] + ", %s: %s}" % (json.dumps(name), json.dumps(entry))
        elif choice == "trailing":
            text = text + " x"
        elif choice == "nan":
            text = text.replace("[", "[NaN, ", 1)
        elif choice == "deep":
            text = text[:-1] + ", \"deep\": " + "[" * 100000 + "]" * 100000 + "}"
        elif choice == "unterminated":
            text = text[:-1]
        else:
            text = text[:len(text) // 2] + "\0" + text[len(text) // 2:]
        return st_assemble(text, body), ["json " + choice]
    if not keep_hash and isinstance(h.get("__metadata__"), dict):
        h["__metadata__"].pop("hpc_hash", None)
        what.append("without hpc_hash")
    return st_assemble(json.dumps(h), body), [kind] + what


#===----------------------------------------------------------------------===#
# Checkpoint manifests
#===----------------------------------------------------------------------===#

# Manifest keys a resume reads, and keys it does not read but that must
# agree with the rest (a world_size of 2 beside one shard). A plan_hash of
# another plan means resharding, which the shards' own hpc_plan_hash then
# refuses; format_version 1 (no slice records) is still read by its plan.
CKPT_CRITICAL = ("plan_hash", "shards", "step")
CKPT_UNREAD = ("format", "state_bytes", "world_size")


def manifest_verdict(text, original):
    """A manifest whose JSON breaks, or whose keys a resume reads differ
    from the checkpoint it describes, must be refused ('strict' when only
    a key it does not read changed); the data position must stay a valid
    sample index."""
    try:
        m = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "reject"
    o = json.loads(original)
    if not isinstance(m, dict):
        return "reject"
    same = lambda k: m.get(k, None) == o[k] and type(m.get(k)) is type(o[k])
    if not all(same(k) for k in CKPT_CRITICAL):
        return "reject"
    version = m.get("format_version")
    if type(version) is not int or version not in (1, o["format_version"]):
        return "reject"
    # next_sample counts the samples read so far (it does not wrap), so any
    # int64 >= 0 is a position; data_position.step repeats "step" and is
    # not read.
    pos = m.get("data_position")
    if not isinstance(pos, dict) or type(pos.get("next_sample")) is not int or \
            not 0 <= pos["next_sample"] <= INT64_MAX:
        return "reject"
    return "any" if all(same(k) for k in CKPT_UNREAD + ("format_version",)) else "strict"


def mutate_manifest(rng, original):
    m = json.loads(original)
    kind = rng.choice(["bytes", "key", "key", "remove", "shard", "truncate"])
    if kind == "bytes":
        out, what = mutators.mutate_bytes(rng, original)
        return out, ["manifest bytes"] + what
    if kind == "truncate":
        k = rng.randrange(len(original))
        return original[:k], ["manifest truncate@%d" % k]
    if kind == "remove":
        key = rng.choice(sorted(m))
        del m[key]
        return json.dumps(m).encode(), ["manifest without " + key]
    if kind == "key":
        key = rng.choice(["step", "world_size", "state_bytes", "format_version", "plan_hash",
                          "format", "model", "data_position", "rng"])
        v = m[key]
        if isinstance(v, int):
            m[key] = rng.choice([v + 1, v - 1, 0, -1, 2**63, 2**64, str(v), float(v), None])
        elif isinstance(v, str):
            m[key] = rng.choice([v + "0", "", v.upper() if v.upper() != v else v + "x", 1])
        else:
            sub = rng.choice(sorted(v))
            v[sub] = rng.choice([-1, 2**62, 10**30, "0", None, 3])
            key += "." + sub
        return json.dumps(m).encode(), ["manifest %s = %r" % (key, m[key.split(".")[0]])]
    s = m["shards"][0]
    choice = rng.choice(["bytes", "hash", "file-outside", "file-missing", "file-abs",
                         "empty", "two", "not-list"])
    if choice == "bytes":
        s["bytes"] = rng.choice([s["bytes"] + 1, 0, -1, 2**63])
    elif choice == "hash":
        s["hash"] = rng.choice(["0" * 16, "", "xyz"])
    elif choice == "file-outside":
        s["file"] = "../../x.safetensors"
    elif choice == "file-missing":
        s["file"] = "rank-9.safetensors"
    elif choice == "file-abs":
        s["file"] = "/etc/passwd"
    elif choice == "empty":
        m["shards"] = []
    elif choice == "two":
        m["shards"].append(dict(s))
    else:
        m["shards"] = s
    return json.dumps(m).encode(), ["manifest shard " + choice]


def hash64(data):
    """hpcrt_hash64 of runtime/common/Hash.c (FNV-style over 8-byte words)."""
    h = 0xcbf29ce484222325
    prime = 0x100000001b3
    mask = (1 << 64) - 1
    words = len(data) // 8
    for i in range(words):
        h = ((h ^ struct.unpack_from("<Q", data, 8 * i)[0]) * prime) & mask
    tail = len(data) % 8
    if tail:
        w = int.from_bytes(data[8 * words:], "little")
        h = ((h ^ w) * prime) & mask
    return h ^ len(data)


#===----------------------------------------------------------------------===#
# Cases, one generator per category
#===----------------------------------------------------------------------===#

def gen_npy(rng, target):
    cat = "train-data" if target.command == "train" else "npy"
    c = base_case(cat, target, [], "any")
    name, dtype, shape = rng.choice(target.inputs)
    fname = name + ".npy"
    original = c.files[fname]
    arr = np.load(io.BytesIO(original))
    out, what = mutate_npy(rng, original, arr)
    c.files[fname] = out
    c.what = [name] + what
    c.expect = npy_verdict(out, original, target, name)
    return c


def gen_pb(rng, target):
    c = base_case("pb", target, [], "any", fmt="pb")
    name, dtype, shape = rng.choice(target.inputs)
    arr = sample_array(dtype, shape)
    out, what = mutate_pb(rng, arr, name)
    c.files[name + ".pb"] = out
    c.what = [name] + what
    c.expect = pb_verdict(out, target, name)
    return c


def gen_safetensors(rng, target):
    c = base_case("safetensors", target, [], "any")
    out, what = mutate_safetensors(rng, target.weights)
    verdict = st_verdict(out, target.weights)
    if rng.random() < 0.3:
        # In place of the program's own weights file (the program is linked
        # into the case folder): a file without hpc_hash is refused there.
        c.files[target.weights_name] = out
        c.link_program = True
        got = st_split(out)
        if got is None or "hpc_hash" not in got[0].get("__metadata__", {}):
            verdict = "reject"
        what = ["own file"] + what
    else:
        c.files["w.safetensors"] = out
        c.argv += ["--weights", "{case}/w.safetensors"]
        what = ["--weights"] + what
    c.what, c.expect = what, verdict
    return c


def _number_edits(flag):
    bad = ["abc", "", "1.5", "0x10", "-1", "0", "1e3", "5x", "nan", "inf"] + HUGE_NUMBERS
    fine = ["+3", " 3", "03", "3 "]
    v = bad + fine
    return [([flag, x], "reject" if x in bad else "any", "%s %r" % (flag, x)) for x in v]


def _run_arg_edits(target, c):
    """(extra argv, verdict, description) edits of a run command."""
    name = target.inputs[0][0]
    first = "{case}/%s.npy" % name
    e = [(["--frobnicate"], "reject", "unknown flag"), (["-x"], "reject", "unknown -x"),
         (["---input", name + "=" + first], "reject", "---input"),
         (["--Input", name + "=" + first], "reject", "--Input"),
         (["positional"], "reject", "positional"), (["--"], "reject", "--"),
         ([""], "reject", "empty argument"), (["--input"], "reject", "--input no value"),
         (["--iters"], "reject", "--iters no value"),
         (["--threads"], "reject", "--threads no value"),
         (["--trace"], "reject", "--trace no value"),
         (["--weights"], "reject", "--weights no value"),
         (["--output-dir"], "reject", "--output-dir no value"),
         (["--input", ""], "reject", "--input ''"),
         (["--input", "=" + first], "reject", "--input =FILE"),
         (["--input", name + "="], "reject", "--input NAME="),
         (["--input="], "reject", "--input="),
         (["--input", "nosuch=" + first], "reject", "unknown input"),
         (["--input", name.upper() + "x=" + first], "reject", "input name case"),
         (["--input", name + " =" + first], "reject", "input name with space"),
         (["--input", name + "==" + first], "reject", "input NAME==FILE"),
         (["--input", name + "=" + first], "reject", "input given twice"),
         (["--output-dir", "{case}/out2"], "any", "--output-dir twice"),
         (["--output-dir", "{case}/%s.npy" % name], "reject", "--output-dir a file"),
         (["--output-dir", "{case}/%s.npy/sub" % name], "reject",
          "--output-dir under a file"),
         (["--output-dir", "/dev/null"], "reject", "--output-dir /dev/null"),
         (["--output-dir", "{case}/" + "d" * 5000], "reject", "--output-dir name too long"),
         (["--output-dir", ""], "reject", "--output-dir ''"),
         (["--iters", "2", "--iters", "3"], "any", "--iters twice"),
         (["--verbose", "--verbose"], "any", "--verbose twice"),
         (["--verbose=1"], "reject", "--verbose=1"), (["--iters=2"], "any", "--iters=2"),
         (["--trace", "/dev/full"], "reject", "--trace /dev/full"),
         (["--trace", "{case}/nodir/t.json"], "reject", "--trace in a missing folder"),
         (["--trace", "{case}"], "reject", "--trace a folder"),
         (["--weights", ""], "reject", "--weights ''"),
         (["--weights", "{case}/%s.npy" % name], "reject", "--weights an .npy")]
    e += _number_edits("--iters") + _number_edits("--threads")
    e.append((["--threads", "100000"], "any", "--threads 100000"))
    if target.check_inputs:
        e += [(["--check-inputs"], "any", "--check-inputs"),
              (["--check-inputs=1"], "reject", "--check-inputs=1")]
    return e + _peer_timeout_edits(target)


def _peer_timeout_edits(target):
    if not target.peer_timeout:
        return []
    e = [(["--peer-timeout", v], "reject", "--peer-timeout %r" % v)
         for v in ["abc", "-1", "", "nan", "-inf", "5s", "1,5"]]
    e += [(["--peer-timeout", v], "any", "--peer-timeout %r" % v)
          for v in ["5", "0.5", "0", "1e9", "inf"]]
    return e + [(["--peer-timeout"], "reject", "--peer-timeout no value")]


def _train_arg_edits(target, c):
    name = target.inputs[0][0]
    data = "{case}/%s.npy" % name
    e = [(["--frobnicate"], "reject", "unknown flag"), (["positional"], "reject", "positional"),
         ([""], "reject", "empty argument"), (["--data"], "reject", "--data no value"),
         (["--lr"], "reject", "--lr no value"), (["--metrics"], "reject", "--metrics no value"),
         (["--data", data], "reject", "--data without NAME="),
         (["--data", "nosuch=" + data], "reject", "--data unknown input"),
         (["--data", name + "=" + data], "reject", "--data given twice"),
         (["--data", name + "="], "reject", "--data NAME="),
         (["--tokens", data], "reject", "--tokens for a program without token inputs"),
         (["--ckpt-every", "0"], "reject", "--ckpt-every 0"),
         (["--log-every", "0"], "reject", "--log-every 0"),
         (["--ckpt-keep", "0"], "reject", "--ckpt-keep 0"),
         (["--resume"], "reject", "--resume without --ckpt-dir"),
         (["--resume-from", "{case}/nosuch"], "reject", "--resume-from a missing folder"),
         (["--resume-from", ""], "reject", "--resume-from ''"),
         (["--dump-outputs", "{case}/d", "--dump-steps", "1,,2"], "reject",
          "--dump-steps 1,,2"),
         (["--dump-outputs", "{case}/d", "--dump-steps", "0"], "reject", "--dump-steps 0"),
         (["--lr-schedule", "bogus"], "reject", "--lr-schedule bogus"),
         (["--lr-schedule", "cosine:"], "reject", "--lr-schedule cosine:"),
         (["--lr-schedule", "cosine:-1,10"], "reject", "--lr-schedule cosine:-1,10"),
         (["--lr-schedule", "linear:1,2,3"], "reject", "--lr-schedule linear:1,2,3"),
         (["--metrics", "/dev/full"], "reject", "--metrics /dev/full"),
         (["--metrics", "{case}"], "reject", "--metrics a folder"),
         # Not --save /dev/full: the save renames a file over its target, which
         # as root replaces the device node.
         (["--save", "{case}/nodir/w.safetensors"], "reject", "--save in a missing folder"),
         (["--ckpt-dir", data], "reject", "--ckpt-dir a file"),
         (["--init-weights", data], "reject", "--init-weights an .npy"),
         (["--steps", "3"], "any", "--steps twice"),
         (["--verbose=1"], "reject", "--verbose=1")]
    e += _number_edits("--steps") + _number_edits("--threads")
    e += [(["--lr", v], "reject", "--lr %r" % v)
          for v in ["abc", "nan", "inf", "-1", "1e999", "", "-inf"]]
    return e + _peer_timeout_edits(target)


OVERRIDDEN = {"--output-dir", "--trace", "--weights", "--metrics", "--save", "--ckpt-dir",
              "--resume-from", "--init-weights", "--steps", "--iters", "--threads"}


def gen_args(rng, target):
    c = base_case("args", target, [], "any")
    if rng.random() < 0.12:
        cmd = rng.choice([("RUN", "reject"), ("", "reject"), ("info", "reject"),
                          ("train" if target.command == "run" else "run", "reject"),
                          ("--help", "any"), ("help", "any")])
        if cmd[0] in ("--help", "help", "info") and rng.random() < 0.5:
            c.argv = [cmd[0]]
            c.expect = "any"
            c.what = ["command %r alone" % cmd[0]]
            return c
        c.argv[0] = cmd[0]
        c.expect = cmd[1]
        c.what = ["command %r" % cmd[0]]
        return c
    edits = _run_arg_edits(target, c) if target.command == "run" else \
        _train_arg_edits(target, c)
    extra, verdict, what = rng.choice(edits)
    # A flag without a value stays last, and one whose value is used only
    # when the run gets to it would be overridden by the base command's own.
    front = len(extra) > 1 and not set(extra) & OVERRIDDEN and rng.random() < 0.5
    c.argv = c.argv[:1] + extra + c.argv[1:] if front else c.argv + extra
    c.expect, c.what = verdict, [what]
    return c


SPECIAL_KINDS = ["dev-zero", "dev-null", "dev-urandom", "dir", "fifo", "symlink-loop",
                 "dangling-symlink", "unreadable", "trailing-slash", "long-path",
                 "link-to-dev-zero", "proc-self-mem"]


def _special(rng, c, fname, kind):
    """Turns case file `fname` into the special file `kind`; returns the
    path to pass."""
    path = "{case}/" + fname
    if kind == "dev-zero":
        return "/dev/zero"
    if kind == "dev-null":
        return "/dev/null"
    if kind == "dev-urandom":
        return "/dev/urandom"
    if kind == "proc-self-mem":
        return "/proc/self/mem"
    if kind in ("dir", "fifo", "symlink-loop", "dangling-symlink", "link-to-dev-zero"):
        c.files.pop(fname, None)
    if kind == "dir":
        c.dirs.append(fname)
    elif kind == "fifo":
        c.fifos.append(fname)
    elif kind == "symlink-loop":
        c.symlinks[fname] = fname
    elif kind == "dangling-symlink":
        c.symlinks[fname] = "nosuch"
    elif kind == "link-to-dev-zero":
        c.symlinks[fname] = "/dev/zero"
    elif kind == "unreadable":
        return None
    elif kind == "trailing-slash":
        return path + "/"
    elif kind == "long-path":
        return "{case}/" + "/".join(["d" * 250] * 20) + "/" + fname
    return path


def gen_special(rng, target):
    c = base_case("special", target, [], "reject")
    kind = rng.choice(SPECIAL_KINDS)
    slots = ["tokens"] if target.vocab else ["input"]
    if target.weights and not target.vocab:
        slots.append("weights")
    if target.command == "train" and not target.vocab:
        slots += ["resume-from", "init-weights"]
    slot = rng.choice(slots)
    if slot == "tokens":
        if kind == "unreadable":
            c.modes["tok.bin"] = 0
            c.expect = "any-if-root"
        else:
            path = _special(rng, c, "tok.bin", kind)
            c.argv = [a.replace("{case}/tok.bin", path) for a in c.argv]
    elif slot == "input":
        name = rng.choice(target.inputs)[0]
        ext = rng.choice(["npy", "pb"]) if target.command == "run" else "npy"
        fname = name + "." + ext
        if ext == "pb":
            c.files.pop(name + ".npy")
            arr = sample_array(*[(d, s) for n, d, s in target.inputs if n == name][0])
            c.files[fname] = pb_bytes(arr, name)
            c.argv = [a.replace(name + ".npy", fname) for a in c.argv]
        if kind == "unreadable":
            c.modes[fname] = 0
            c.expect = "any-if-root"
        else:
            path = _special(rng, c, fname, kind)
            c.argv = [a.replace("{case}/" + fname, path) for a in c.argv]
    else:
        flag = "--" + slot
        fname = {"weights": "w.safetensors", "init-weights": "w.safetensors",
                 "resume-from": "ck/step-2"}[slot]
        if slot == "resume-from":
            c.argv = [a if a != "2" else "4" for a in c.argv]
            for k, v in target.checkpoint.items():
                c.files["ck/" + k] = v
            if kind in ("fifo", "unreadable", "dir") and rng.random() < 0.6:
                inner = "ck/step-2/" + rng.choice(["manifest.json", "rank-0.safetensors"])
                kind += " (%s)" % inner.split("/")[-1]
                if kind.startswith("fifo"):
                    c.files.pop(inner)
                    c.fifos.append(inner)
                elif kind.startswith("dir"):
                    c.files.pop(inner)
                    c.dirs.append(inner)
                else:
                    c.modes[inner] = 0
                    c.expect = "any-if-root"
                c.argv += [flag, "{case}/" + fname]
                c.what = [slot, kind]
                return c
            if kind == "dir":
                kind = "empty dir"
                for k in list(c.files):
                    if k.startswith("ck/"):
                        c.files.pop(k)
                c.dirs.append(fname)
                c.argv += [flag, "{case}/" + fname]
                c.what = [slot, kind]
                return c
            if kind in ("unreadable", "trailing-slash", "long-path"):
                kind = "a regular file"
                for k in list(c.files):
                    if k.startswith("ck/"):
                        c.files.pop(k)
                c.files[fname] = b"not a checkpoint\n"
                c.argv += [flag, "{case}/" + fname]
                c.what = [slot, kind]
                return c
            for k in list(c.files):
                if k.startswith("ck/"):
                    c.files.pop(k)
            path = _special(rng, c, fname, kind)
        else:
            c.files[fname] = target.weights
            if kind == "unreadable":
                c.modes[fname] = 0
                c.expect = "any-if-root"
                path = "{case}/" + fname
            else:
                path = _special(rng, c, fname, kind)
        c.argv += [flag, path]
    c.what = [slot, kind]
    return c


def gen_checkpoint(rng, target):
    c = base_case("checkpoint", target, [], "any")
    c.argv = [a if a != "2" else "4" for a in c.argv]
    c.argv += ["--resume-from", "{case}/ck/step-2"]
    files = {"ck/" + k: v for k, v in target.checkpoint.items()}
    mname, sname = "ck/step-2/manifest.json", "ck/step-2/rank-0.safetensors"
    manifest, shard = files[mname], files[sname]
    kind = rng.choice(["manifest", "manifest", "shard-bytes", "shard-header",
                       "shard-header", "shard-data"])
    if kind == "manifest":
        out, what = mutate_manifest(rng, manifest)
        files[mname] = out
        c.expect = manifest_verdict(out, manifest)
    elif kind == "shard-bytes":
        out, what = mutators.mutate_bytes(rng, shard)
        files[sname] = out
        c.expect = "any" if out == shard else "reject"
        what = ["shard bytes"] + what
    else:
        h, body = st_split(shard)
        if kind == "shard-data":
            b = bytearray(body)
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
            out = shard[:len(shard) - len(body)] + bytes(b)
            what = ["shard data flip@%d" % i]
        else:
            out, what = _mutate_shard_header(rng, h, body)
        rehash = rng.random() < 0.8
        if rehash:
            m = json.loads(manifest)
            m["shards"][0]["bytes"] = len(out)
            m["shards"][0]["hash"] = "%016x" % hash64(out)
            files[mname] = json.dumps(m, indent=2).encode()
            what.append("manifest rehashed")
        files[sname] = out
        c.expect = shard_verdict(out, shard) if rehash else (
            "any" if out == shard else "reject")
    c.files.update(files)
    c.what = [kind] + what
    return c


# The shard metadata a resume reads; hpc_step, hpc_rank and hpc_slice.*
# repeat what the manifest and the plan say, and a resume does not read them.
SHARD_CRITICAL = ("hpc_plan_hash",)


def shard_verdict(data, original):
    """A rehashed shard: its tensors and the metadata the runtime checks
    must be those of the checkpoint it came from; its values may change."""
    got = st_split(data)
    if got is None:
        return "reject"
    h, _ = got
    oh, _ = st_split(original)
    strip = lambda d: {k: v for k, v in d.items() if k != "__metadata__"}
    if strip(h) != strip(oh):
        return "reject"
    meta, ometa = h.get("__metadata__", {}), oh["__metadata__"]
    changed = [k for k in set(meta) | set(ometa) if meta.get(k) != ometa.get(k)]
    if any(k.startswith(SHARD_CRITICAL) for k in changed):
        return "reject"
    return "strict" if any(k.startswith("hpc_") for k in changed) else "any"


def _mutate_shard_header(rng, h, body):
    h = json.loads(json.dumps(h))
    names = [k for k in h if k != "__metadata__"]
    kind = rng.choice(["tensor", "tensor", "rename", "remove", "extra", "metadata"])
    if kind == "tensor":
        name = rng.choice(names)
        what = "%s: %s" % (name, _edit_tensor(rng, h[name], [h[k] for k in names if k != name]))
    elif kind == "rename":
        name = rng.choice(names)
        h[name + "_x"] = h.pop(name)
        what = "rename " + name
    elif kind == "remove":
        name = rng.choice(names)
        del h[name]
        what = "remove " + name
    elif kind == "extra":
        h["extra"] = dict(h[rng.choice(names)])
        what = "extra tensor"
    else:
        key = rng.choice(sorted(h["__metadata__"]) + ["note"])
        h["__metadata__"][key] = rng.choice(["", "x", "999", "-1", "{}", "2"])
        what = "metadata %s=%r" % (key, h["__metadata__"][key])
    return st_assemble(json.dumps(h), body), ["shard header " + what]


def gen_values(rng, target):
    """Values a file may hold and the program must refuse: a Gather index
    out of range; NaN or Inf under `run --check-inputs` (without it they are
    legitimate inputs)."""
    c = base_case("values", target, [], "any")
    name, dtype, shape = rng.choice(target.inputs)
    arr = sample_array(dtype, shape).copy()
    flat = arr.reshape(-1)
    i = rng.randrange(flat.size)
    if np.dtype(dtype).kind in "iu":
        v = rng.choice([4, 5, -5, 2**31, 2**62, INT64_MAX, -2**63, -4, 3, -1, 0])
        flat[i] = v
        c.expect = "reject" if not -target.index_bound <= v < target.index_bound else "any"
        c.what = ["%s[%d] = %d" % (name, i, v)]
    else:
        v = rng.choice([float("nan"), float("inf"), float("-inf")])
        flat[i] = v
        check = target.check_inputs and rng.random() < 0.7
        if check:
            c.argv.append("--check-inputs")
        c.expect = "reject" if check else "any"
        c.what = ["%s[%d] = %r%s" % (name, i, v, " --check-inputs" if check else "")]
    c.files[name + ".npy"] = npy_bytes(arr)
    return c


def tokens_verdict(tokens, target, npy_ok=True):
    """A token file must hold enough tokens for one batch ((len-1)/T
    samples, at least the batch), and every token of the steps the case
    runs must be an id of the vocabulary."""
    if tokens is None or not npy_ok:
        return "reject"
    seq = target.inputs[0][2][0]
    if len(tokens) < 2 or (len(tokens) - 1) // seq < target.batch:
        return "reject"
    samples = (len(tokens) - 1) // seq
    used = set()
    for step in range(2):
        for k in range(step * target.batch, (step + 1) * target.batch):
            used.update(range((k % samples) * seq, (k % samples) * seq + seq + 1))
    if any(not 0 <= int(tokens[i]) < target.vocab for i in used):
        return "reject"
    return "any"


def gen_tokens(rng, target):
    """--tokens files: raw little-endian uint16 or an .npy of integers."""
    c = base_case("tokens", target, [], "any")
    seq = target.inputs[0][2][0]
    good = token_array(target, target.samples * seq + 1)
    kind = rng.choice(["bytes", "length", "length", "odd", "values", "values", "npy", "npy"])
    if kind == "bytes":
        raw, what = mutators.mutate_bytes(rng, good.astype("<u2").tobytes())
        c.files["tok.bin"] = raw
        c.what = ["raw"] + what
        c.expect = "reject" if len(raw) % 2 else tokens_verdict(
            np.frombuffer(raw, "<u2"), target)
        return c
    if kind == "length":
        n = rng.choice([0, 1, 2, seq, target.batch * seq, target.batch * seq + 1,
                        target.batch * seq + 2, 3 * seq])
        c.files["tok.bin"] = good[:n].astype("<u2").tobytes()
        c.what = ["%d tokens" % n]
        c.expect = tokens_verdict(good[:n], target)
        return c
    if kind == "odd":
        c.files["tok.bin"] = good.astype("<u2").tobytes() + b"\x01"
        c.what = ["odd byte count"]
        c.expect = "reject"
        return c
    if kind == "values":
        t = good.copy()
        i = rng.randrange(2 * target.batch * seq)
        t[i] = rng.choice([target.vocab, target.vocab + 1, 65535, target.vocab - 1, 0])
        c.files["tok.bin"] = t.astype("<u2").tobytes()
        c.what = ["token[%d] = %d" % (i, t[i])]
        c.expect = tokens_verdict(t, target)
        return c
    dtype = rng.choice(["int64", "int32", "uint16", "int8", "float32", "bool", "uint64"])
    shape = rng.choice([(len(good),), (1, len(good)), (len(good), 1)])
    arr = good.astype(dtype).reshape(shape)
    if dtype in ("int64", "int32") and rng.random() < 0.4:
        arr.reshape(-1)[rng.randrange(2 * target.batch * seq)] = rng.choice([-1, 2**31 - 1])
    del c.files["tok.bin"]
    c.files["tok.npy"] = npy_bytes(arr)
    c.argv = [a.replace("tok.bin", "tok.npy") for a in c.argv]
    flat = arr.reshape(-1).astype(np.int64)
    what = "negative ids" if (flat < 0).any() else \
        "ids past the vocabulary" if (flat >= target.vocab).any() else "ids in range"
    c.what = ["npy", what, "%s %s" % (dtype, shape)]
    integer = np.dtype(dtype).kind in "iu"
    c.expect = tokens_verdict(arr.reshape(-1).astype(np.int64), target, npy_ok=integer) \
        if dtype != "bool" else "any"
    return c


CATEGORIES = [("npy", gen_npy, 18), ("pb", gen_pb, 14), ("safetensors", gen_safetensors, 18),
              ("args", gen_args, 14), ("special", gen_special, 12),
              ("train-data", gen_npy, 8), ("checkpoint", gen_checkpoint, 12),
              ("values", gen_values, 4), ("tokens", gen_tokens, 6)]


def eligible(category, target):
    if target.categories and category not in target.categories:
        return False
    if category == "tokens":
        return bool(target.vocab)
    if category in ("npy", "pb"):
        return target.command == "run"
    if category == "safetensors":
        return target.weights is not None
    if category in ("train-data", "checkpoint"):
        return target.command == "train"
    if category == "values":
        return target.command == "run" and (target.index_bound or target.check_inputs)
    return True


def generate(rng, targets, categories=None):
    cats = [c for c in CATEGORIES if (not categories or c[0] in categories) and
            any(eligible(c[0], t) for t in targets)]
    if not cats:
        raise ValueError("no category of %s fits the programs" % (categories,))
    name, gen, _ = rng.choices(cats, weights=[w for _, _, w in cats])[0]
    target = rng.choice([t for t in targets if eligible(name, t)])
    c = gen(rng, target)
    c.category = name
    return c
