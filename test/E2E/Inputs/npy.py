#!/usr/bin/env python3
#===- npy.py - write and print .npy files for the E2E tests ---------------===#
#
#   npy.py save FILE DTYPE SHAPE VALUES   e.g. save x.npy float32 2,3 1,2,3,4,5,6
#                                         (SHAPE "" or "-" for a scalar)
#   npy.py print FILE [DECIMALS]          dtype, shape and the values, rounded
#   npy.py random FILE DTYPE SHAPE LOW HIGH [SEED]
#                                         uniform ints (int dtypes) or floats
#   npy.py garbage FILE                   bytes that are not a .npy file
#   npy.py header FILE DICT DATA_BYTES    a .npy v1 file whose header is the
#                                         text DICT (padded as numpy pads it)
#                                         and DATA_BYTES zero bytes of data
#   npy.py pb FILE DTYPE_CODE DIMS RAW_BYTES
#                                         a TensorProto: dims DIMS (may be
#                                         negative or huge), data_type
#                                         DTYPE_CODE, RAW_BYTES zero bytes of
#                                         raw_data
#
#===-----------------------------------------------------------------------===#

import struct
import sys

import numpy as np


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def shape_of(text):
    return tuple(int(d) for d in text.split(",") if d) if text != "-" else ()


def main(argv):
    cmd, path = argv[1], argv[2]
    if cmd == "save":
        dtype, shape = np.dtype(argv[3]), shape_of(argv[4])
        values = [float(v) for v in argv[5].split(",")] if argv[5] else []
        np.save(path, np.array(values, dtype=np.float64).astype(dtype)
                .reshape(shape))
    elif cmd == "random":
        dtype, shape = np.dtype(argv[3]), shape_of(argv[4])
        low, high = float(argv[5]), float(argv[6])
        rng = np.random.default_rng(int(argv[7]) if len(argv) > 7 else 0)
        if dtype.kind in "iu":
            a = rng.integers(int(low), int(high), shape)
        else:
            a = rng.uniform(low, high, shape)
        np.save(path, a.astype(dtype))
    elif cmd == "print":
        a = np.load(path, allow_pickle=False)
        decimals = int(argv[3]) if len(argv) > 3 else 4
        if a.dtype.kind == "f":
            values = np.round(a.astype(np.float64), decimals) + 0.0
        else:
            values = a
        print("%s %s" % (a.dtype, list(a.shape)))
        print(values.reshape(-1).tolist())
    elif cmd == "garbage":
        with open(path, "wb") as f:
            f.write(b"this is not a numpy file\x00\x01\x02\x03" * 4)
    elif cmd == "header":
        text = argv[3]
        text += " " * ((-(10 + len(text) + 1)) % 64) + "\n"
        with open(path, "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)))
            f.write(text.encode() + b"\0" * int(argv[4]))
    elif cmd == "pb":
        dims = [int(d) for d in argv[4].split(",") if d]
        msg = b""
        for d in dims:
            msg += varint(1 << 3) + varint(d % (1 << 64))
        msg += varint(2 << 3) + varint(int(argv[3]))
        raw = b"\0" * int(argv[5])
        msg += varint((9 << 3) | 2) + varint(len(raw)) + raw
        with open(path, "wb") as f:
            f.write(msg)
    else:
        sys.exit("npy.py: unknown command %s" % cmd)


main(sys.argv)
