#!/usr/bin/env python3
"""How much communication a trace hides under computation, per step and rank.

    overlap_report.py TRACE.json [--skip-steps K] [--rank R] [--json]

TRACE.json is a `train --trace` (or `run --trace`) file: every rank's
kernels on its main thread (tid 0) and, where dist ops were started
asynchronously, their data movement on the communication thread (tid 1).
For each step (program run, args.run) and rank:

- communication: the union of the communication thread's events and the
  main thread's synchronous collectives and point-to-point ops
  (dist.all_reduce, dist.send, ...);
- exposed: the part of it under no compute kernel of the same rank (the
  main thread's other events; dist.wait and the *_start calls are neither:
  a rank waiting is not computing);
- overlap = 1 - exposed / communication.

Prints one row per step and rank, then the whole: the sums over the steps
kept (--skip-steps drops the first K, e.g. the warm-up) and all ranks (or
--rank R). --json prints the same as one JSON object. Exit 1 with one line
for an unreadable trace or one without communication.

A pipeline binary's trace (hpc-opt --mesh=pp=P) also names each op's block
("F3", "B3", "W3": args.block) and marks the waits on a receive from another
stage (args.recv). For it the report adds, per stage (rank), the bubble: the
time the rank waits on such receives over the step's time (the span from the
first event of the step on any rank to the last), summed over the steps
kept; `--stages S` groups the ranks into S stages of consecutive ranks (pp
is the mesh's first axis; default: one rank a stage).
"""
import argparse
import collections
import json
import sys

COMM_OPS = {"dist.all_reduce", "dist.reduce_scatter", "dist.all_gather", "dist.all_to_all",
            "dist.broadcast", "dist.send", "dist.recv"}
COMM_THREAD = 1


def is_comm(e):
    return e.get("tid", 0) == COMM_THREAD or e["name"] in COMM_OPS


def is_compute(e):
    name = e["name"]
    return (e.get("tid", 0) != COMM_THREAD and name not in COMM_OPS and name != "dist.wait"
            and not name.endswith("_start"))


def union(intervals):
    """Sorted, disjoint (start, end) covering the given intervals."""
    out = []
    for s, t in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], t)
        else:
            out.append([s, t])
    return out


def length(intervals):
    return sum(t - s for s, t in intervals)


def uncovered(comm, compute):
    """The length of `comm` outside `compute` (both sorted and disjoint)."""
    exposed, k = 0.0, 0
    for s, t in comm:
        while k < len(compute) and compute[k][1] <= s:
            k += 1
        pos, j = s, k
        while j < len(compute) and compute[j][0] < t:
            a, b = compute[j]
            if a > pos:
                exposed += a - pos
            pos = max(pos, b)
            j += 1
        if pos < t:
            exposed += t - pos
    return exposed


def analyse(events, skip_steps, rank):
    by = collections.defaultdict(lambda: ([], []))
    for e in events:
        if e.get("ph") != "X" or (rank is not None and e["pid"] != rank):
            continue
        key = (e["args"]["run"], e["pid"])
        span = (e["ts"], e["ts"] + e["dur"])
        if is_comm(e):
            by[key][0].append(span)
        elif is_compute(e):
            by[key][1].append(span)
    steps = sorted({run for run, _ in by})
    kept = set(steps[skip_steps:])
    rows = []
    for (run, pid) in sorted(by):
        if run not in kept:
            continue
        comm, compute = union(by[(run, pid)][0]), union(by[(run, pid)][1])
        total = length(comm)
        exposed = uncovered(comm, compute)
        rows.append({"step": run, "rank": pid, "comm_ms": total / 1000,
                     "exposed_ms": exposed / 1000, "compute_ms": length(compute) / 1000,
                     "overlap": 1 - exposed / total if total > 0 else None})
    return rows


def bubbles(events, skip_steps, stages):
    """Per stage: the time its ranks wait on receives from other stages over
    the steps' time, or None for a trace without such waits."""
    spans = collections.defaultdict(lambda: [float("inf"), float("-inf")])
    waits = collections.defaultdict(float)
    ranks = set()
    has_recv = False
    for e in events:
        if e.get("ph") != "X":
            continue
        run = e["args"]["run"]
        ranks.add(e["pid"])
        span = spans[run]
        span[0] = min(span[0], e["ts"])
        span[1] = max(span[1], e["ts"] + e["dur"])
        if e["args"].get("recv"):
            has_recv = True
            waits[(run, e["pid"])] += e["dur"]
    if not has_recv:
        return None
    kept = sorted(spans)[skip_steps:]
    step_us = sum(spans[r][1] - spans[r][0] for r in kept)
    n = len(ranks)
    stages = stages or n
    if n % stages:
        raise ValueError(f"{n} ranks do not split into {stages} stages")
    per = n // stages
    out = []
    for s in range(stages):
        members = [r for r in sorted(ranks) if r // per == s]
        wait = sum(waits[(run, r)] for run in kept for r in members) / len(members)
        out.append({"stage": s, "ranks": members, "wait_ms": wait / 1000,
                    "step_ms": step_us / 1000, "bubble": wait / step_us if step_us else 0.0})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--skip-steps", type=int, default=0)
    ap.add_argument("--rank", type=int, default=None)
    ap.add_argument("--stages", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        with open(a.trace) as f:
            events = json.load(f)["traceEvents"]
        rows = analyse(events, a.skip_steps, a.rank)
        stage_rows = bubbles(events, a.skip_steps, a.stages)
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"overlap_report.py: error: {a.trace}: not a readable trace ({e})")
    comm = sum(r["comm_ms"] for r in rows)
    exposed = sum(r["exposed_ms"] for r in rows)
    if comm <= 0:
        sys.exit(f"overlap_report.py: error: {a.trace}: no communication in the steps kept")
    whole = {"steps": len({r["step"] for r in rows}), "ranks": len({r["rank"] for r in rows}),
             "comm_ms": comm, "exposed_ms": exposed, "overlap": 1 - exposed / comm}
    if a.json:
        out = {"rows": rows, "total": whole}
        if stage_rows is not None:
            out["bubble"] = stage_rows
        print(json.dumps(out, indent=1))
        return
    print(f"{'step':>5} {'rank':>4} {'compute_ms':>10} {'comm_ms':>9} {'exposed_ms':>10} {'overlap':>8}")
    for r in rows:
        ov = f"{100 * r['overlap']:7.1f}%" if r["overlap"] is not None else "       -"
        print(f"{r['step']:5d} {r['rank']:4d} {r['compute_ms']:10.3f} {r['comm_ms']:9.3f} "
              f"{r['exposed_ms']:10.3f} {ov}")
    print(f"total: {whole['steps']} step(s) x {whole['ranks']} rank(s): communication "
          f"{comm:.3f} ms, exposed {exposed:.3f} ms, overlap {100 * whole['overlap']:.1f}%")
    if stage_rows is not None:
        print(f"{'stage':>5} {'ranks':>8} {'wait_ms':>9} {'step_ms':>9} {'bubble':>7}")
        for r in stage_rows:
            ranks = ",".join(str(x) for x in r["ranks"])
            print(f"{r['stage']:5d} {ranks:>8} {r['wait_ms']:9.3f} {r['step_ms']:9.3f} "
                  f"{100 * r['bubble']:6.1f}%")
        mean = sum(r["bubble"] for r in stage_rows) / len(stage_rows)
        print(f"bubble: {len(stage_rows)} stage(s), mean {100 * mean:.1f}% of the step "
              f"(waits on receives from other stages)")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
