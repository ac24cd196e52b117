"""Counts a partitioned program's tp all_reduces of one activation shape
and its tp reduce_scatters, and prints the most elements one tp all_reduce
carries (a gradient bucket packs several tensors into one flat buffer)
(sequence-parallel.test).

    count_collectives.py SHAPE FILE.mlir...     SHAPE like 4x16x64
"""
import os
import re
import sys

shape = sys.argv[1]
for path in sys.argv[2:]:
    text = open(path).read()
    reduces = len(re.findall(r'dist\.all_reduce(?:_start)? %\S+ over \["tp"\] sum : tensor<' + shape + 'xf32>', text))
    scatters = len(re.findall(r'dist\.reduce_scatter(?:_start)? %\S+ over \["tp"\]', text))
    largest = 0
    for t in re.findall(r'dist\.all_reduce(?:_start)? %\S+ over \["tp"\] sum : tensor<([0-9x]*)xf32>', text):
        n = 1
        for d in t.split("x") if t else []:
            n *= int(d)
        largest = max(largest, n)
    dims = ", ".join(shape.split("x"))
    print(f"{os.path.basename(path)}: all_reduce over tp of [{dims}]: {reduces}, reduce_scatter over tp: {scatters}, "
          f"largest all_reduce over tp: {largest} elements")
