#!/usr/bin/env python3
"""Checks a cluster file written by hpc-calibrate (docs/cost-model.md,
"Calibration (hpc-calibrate)"): the summary fields, that they are derived
from the raw "calibration" tables as documented, and that the tables are
self-consistent (gflops = flops / seconds, GB/s = bytes / seconds). Prints
"ok" or the first problem (and exits 1).

usage: check_cluster.py FILE --nodes N --devices-per-node D --ranks R
                        --levels intra-node,inter-node|none [--quick]
"""
import argparse
import json
import math
import os
import sys

KINDS = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "send_recv"]


class Bad(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Bad(what)


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b))


def check_kernels(cal):
    dtypes = set()
    for key, length in (("gemm", 4), ("conv", 9)):
        expect(cal[key], "no %s rows" % key)
        for r in cal[key]:
            s = r["shape"]
            expect(len(s) == length, "%s %s: shape %s" % (key, r["name"], s))
            if key == "gemm":
                flop = 2.0 * s[0] * s[1] * s[2] * s[3]
            else:
                n, c, h, w, k, kh, kw, st, pad = s
                oh = (h + 2 * pad - kh) // st + 1
                ow = (w + 2 * pad - kw) // st + 1
                flop = 2.0 * n * k * c * kh * kw * oh * ow
            expect(r["seconds"] > 0 and r["gflops"] > 0, "%s %s: rates" % (key, r["name"]))
            expect(close(r["gflops"], flop / r["seconds"] / 1e9),
                   "%s %s: gflops %g != flops / seconds" % (key, r["name"], r["gflops"]))
            if key == "gemm":
                dtypes.add(r["dtype"])
    expect(dtypes == {"fp32", "bf16"}, "gemm dtypes %s" % sorted(dtypes))
    expect(cal["memory"], "no memory rows")
    for m in cal["memory"]:
        expect(close(m["gbytes_per_s"], m["bytes"] / m["seconds"] / 1e9), "memory row %s" % m)
    expect(cal["kernel_overhead_us"] > 0, "kernel_overhead_us")


def check_collectives(c, levels):
    rows = c["calibration"]["collectives"]
    got = sorted((r["level"], r["kind"]) for r in rows)
    expect(got == sorted((l, k) for l in levels for k in KINDS), "collectives %s" % got)
    for r in rows:
        expect(r["alpha_us"] >= 0 and r["beta_gbytes_per_s"] > 0, "fit of %s" % r)
        expect(len(r["sizes_bytes"]) >= 2 and r["sizes_bytes"] == sorted(r["sizes_bytes"]),
               "sizes of %s" % r)
        expect(all(s % (4 * r["group_size"]) == 0 for s in r["sizes_bytes"]), "sizes %s" % r)
    links = {l["level"]: l for l in c["links"]}
    expect(sorted(links) == sorted(levels), "links %s" % sorted(links))
    for level, link in links.items():
        p2p = [r for r in rows if r["level"] == level and r["kind"] == "send_recv"][0]
        expect(close(link["bandwidth_gbytes_per_s"], p2p["beta_gbytes_per_s"]) and
               close(link["latency_us"], p2p["alpha_us"]), "link %s" % level)


def check(c, a):
    expect(c["nodes"] == a.nodes, "nodes %s" % c["nodes"])
    expect(c["devices_per_node"] == a.devices_per_node, "devices_per_node %s" % c["devices_per_node"])
    d = c["device"]
    expect(d["kind"] and d["kind"] != "cpu", "device.kind %r" % d["kind"])
    expect(0 < d["reserved_gib"] < d["memory_gib"], "memory %s" % d)
    # Ranks that outnumber the cores (one thread each here) have a share of
    # one; whole cores are not written.
    cores = os.cpu_count()
    if a.devices_per_node > cores:
        expect(close(d["core_share"], cores / a.devices_per_node), "core_share %s" % d)
        expect(0 <= d["core_lending"] <= 1, "core_lending %s" % d)
    else:
        expect("core_share" not in d and "core_lending" not in d,
               "core_share %s on whole cores" % d)
    cal = c["calibration"]
    expect(cal["ranks"] == a.ranks and cal["threads"] == 1 and cal["quick"] == a.quick,
           "ranks/threads/quick %s %s %s" % (cal["ranks"], cal["threads"], cal["quick"]))
    expect(cal["date"].endswith("Z"), "date %r" % cal["date"])
    check_kernels(cal)
    best = {dt: max(r["gflops"] for r in cal["gemm"] if r["dtype"] == dt) for dt in ("fp32", "bf16")}
    for dt in best:
        expect(close(d["peak_tflops"][dt], best[dt] / 1e3), "peak_tflops.%s" % dt)
    expect(close(d["memory_bandwidth_gbytes_per_s"], cal["memory"][-1]["gbytes_per_s"]),
           "memory_bandwidth_gbytes_per_s")
    e = c["efficiency"]
    expect(all(e[k] == 1 for k in ("matmul", "memory", "network", "network_inter")),
           "efficiency %s" % e)
    expect(close(e["kernel_overhead_us"], cal["kernel_overhead_us"]), "kernel_overhead_us")
    check_collectives(c, [] if a.levels == "none" else a.levels.split(","))
    # With two or more ranks, the overlap of a collective on the
    # communication thread with GEMMs is measured (and recorded only: the
    # efficiency keeps the default).
    expect(e["overlap"] == 0.7, "efficiency.overlap %s" % e["overlap"])
    if a.ranks > 1:
        o = cal["overlap"]
        expect(o["bytes"] > 0 and o["compute_s"] > 0 and o["comm_s"] > 0 and o["both_s"] > 0,
               "overlap %s" % o)
        expect(0 <= o["fraction"] <= 1, "overlap.fraction %s" % o["fraction"])
        expect(close(o["fraction"], max(0.0, min(1.0, (o["compute_s"] + o["comm_s"] - o["both_s"])
                                                   / o["compute_s"]))), "overlap.fraction formula")
        # The collective overhead is measured and applied (efficiency holds
        # it when it is above 0; a file leaves a zero out).
        expect(cal["collective_overhead_us"] >= 0, "collective_overhead_us")
        expect(close(e.get("collective_overhead_us", 0), cal["collective_overhead_us"]),
               "efficiency.collective_overhead_us %s, measured %s"
               % (e.get("collective_overhead_us"), cal["collective_overhead_us"]))
    else:
        expect("overlap" not in cal, "one rank: overlap not measured")
        expect("collective_overhead_us" not in cal and "collective_overhead_us" not in e,
               "one rank: collective overhead not measured")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--devices-per-node", type=int, required=True)
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--levels", required=True)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    try:
        check(json.load(open(a.file)), a)
    except (Bad, KeyError, IndexError, TypeError, ValueError) as e:
        print("%s: %s: %s" % (a.file, type(e).__name__, e))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
