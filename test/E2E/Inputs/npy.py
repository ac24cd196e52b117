#!/usr/bin/env python3
#===- npy.py - write and print .npy files for the E2E tests ---------------===#
#
#   npy.py save FILE DTYPE SHAPE VALUES   e.g. save x.npy float32 2,3 1,2,3,4,5,6
#                                         (SHAPE "" or "-" for a scalar)
#   npy.py print FILE [DECIMALS]          dtype, shape and the values, rounded
#   npy.py random FILE DTYPE SHAPE LOW HIGH [SEED]
#                                         uniform ints (int dtypes) or floats
#   npy.py garbage FILE                   bytes that are not a .npy file
#
#===-----------------------------------------------------------------------===#

import sys

import numpy as np


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
    else:
        sys.exit("npy.py: unknown command %s" % cmd)


main(sys.argv)
