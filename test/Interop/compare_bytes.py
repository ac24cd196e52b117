"""Checks that HPC-Opt's partitioning sends no more bytes per rank than
upstream shard's: reads the "each rank sends N bytes" line of each report.

usage: compare_bytes.py OURS_REPORT UPSTREAM_REPORT
"""
import re
import sys


def sent(path):
    with open(path) as f:
        m = re.search(r"each rank sends (\d+) bytes", f.read())
    if not m:
        sys.exit(f"{path}: no 'each rank sends N bytes' line")
    return int(m.group(1))


ours, upstream = sent(sys.argv[1]), sent(sys.argv[2])
if ours > upstream:
    sys.exit(f"dist-partition sends {ours} bytes per rank, more than upstream's {upstream}")
print(f"ok: dist-partition {ours} <= upstream shard {upstream} bytes per rank")
