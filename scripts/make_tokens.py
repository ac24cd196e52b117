#!/usr/bin/env python3
"""Writes a byte-level token file from text files, for `train --tokens`.

Each byte of the input files (concatenated in the order given, directories
expanded in sorted order) is one token 0..255, stored as raw little-endian
uint16 (the layout of nanoGPT's train.bin). The quick start uses the
license texts every Debian machine has in /usr/share/common-licenses.

    scripts/make_tokens.py -o build/examples/licenses.bin /usr/share/common-licenses
"""
import argparse
import os
import sys
from array import array


def files_of(paths):
    for p in paths:
        if os.path.isdir(p):
            for name in sorted(os.listdir(p)):
                full = os.path.join(p, name)
                if os.path.isfile(full) and not os.path.islink(full):
                    yield full
        elif os.path.isfile(p):
            yield p
        else:
            sys.exit(f"make_tokens.py: error: {p}: no such file or directory")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inputs", nargs="+", help="text files or directories")
    ap.add_argument("-o", "--output", required=True, help="token file to write")
    args = ap.parse_args()
    tokens = array("H")
    for path in files_of(args.inputs):
        with open(path, "rb") as f:
            tokens.extend(f.read())
    if sys.byteorder != "little":
        tokens.byteswap()
    tmp = args.output + ".tmp"
    with open(tmp, "wb") as f:
        tokens.tofile(f)
    os.replace(tmp, args.output)
    print(f"make_tokens.py: {len(tokens)} tokens (bytes) -> {args.output}")


if __name__ == "__main__":
    main()
