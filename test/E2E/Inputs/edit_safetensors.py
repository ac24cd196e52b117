#!/usr/bin/env python3
#===- edit_safetensors.py - invalid edits of a weights file's header ------===#
#
#   edit_safetensors.py IN OUT EDIT [TENSOR]
#
# Copies the safetensors file IN to OUT with one edit of its JSON header
# (the data section stays as it is), for the tests of the runtime's weights
# loader. TENSOR (default: the first tensor entry) is the entry edited:
#
#   dtype        its dtype F32 -> I32 (same bytes, another dtype)
#   dtype-size   its dtype F32 -> F64 (twice the bytes)
#   shape        its shape gets a trailing 1 (same bytes, another shape)
#   bytes        its data_offsets end 4 bytes early
#   reversed     its data_offsets [end, begin]
#   rename       renamed to TENSOR + "_renamed"
#   remove       removed
#   duplicate    the header text holds its key twice
#   overlap      a second entry over the same bytes
#   outside      its data_offsets moved past the data section
#   extra        an extra entry of 0 bytes at the end of the data section
#   field        an unknown field in its entry
#   not-object   its entry is a list
#   header-size  the 8-byte header size says more than the file has
#   not-json     the header is not JSON
#   none         no edit (the file as the script writes it)
#
#===-----------------------------------------------------------------------===#

import json
import struct
import sys


def main(argv):
    src, dst, edit = argv[1], argv[2], argv[3]
    data = open(src, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    names = [k for k in header if k != "__metadata__"]
    name = argv[4] if len(argv) > 4 else names[0]
    e = header[name]
    text = None
    if edit == "dtype":
        e["dtype"] = "I32" if e["dtype"] != "I32" else "F32"
    elif edit == "dtype-size":
        e["dtype"] = "F64" if e["dtype"] != "F64" else "F32"
    elif edit == "shape":
        e["shape"] = e["shape"] + [1]
    elif edit == "bytes":
        e["data_offsets"][1] -= 4
    elif edit == "reversed":
        e["data_offsets"] = e["data_offsets"][::-1]
    elif edit == "rename":
        header[name + "_renamed"] = header.pop(name)
    elif edit == "remove":
        del header[name]
    elif edit == "duplicate":
        text = json.dumps(header)
        entry = json.dumps({name: e})[1:-1]
        text = text[:-1] + ", " + entry + "}"
    elif edit == "overlap":
        header[name + "_copy"] = dict(e)
    elif edit == "outside":
        size = e["data_offsets"][1] - e["data_offsets"][0]
        e["data_offsets"] = [len(body), len(body) + size]
    elif edit == "extra":
        header["extra"] = {"dtype": "F32", "shape": [0],
                           "data_offsets": [len(body), len(body)]}
    elif edit == "field":
        e["note"] = "x"
    elif edit == "not-object":
        header[name] = [e["dtype"], e["shape"], e["data_offsets"]]
    elif edit not in ("header-size", "not-json", "none"):
        sys.exit("edit_safetensors.py: unknown edit %s" % edit)
    if text is None:
        text = json.dumps(header)
    if edit == "not-json":
        text = text[:-1]
    raw = text.encode()
    # Keep the data section 64-aligned, as the compiler writes it.
    raw += b" " * ((-(8 + len(raw))) % 64)
    size = len(raw) + len(body) + 1 if edit == "header-size" else len(raw)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", size) + raw + body)


main(sys.argv)
