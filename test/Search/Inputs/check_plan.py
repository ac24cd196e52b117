#!/usr/bin/env python3
# Checks properties of dist-search reports (report=FILE.json) that FileCheck
# cannot express (inequalities, relations between two reports). Prints one
# "ok: ..." line per passed check; exits 1 on the first failure.
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--tp-within-node", action="store_true",
                    help="every stage's tp <= devices per node")
    ap.add_argument("--stages-within-node", action="store_true",
                    help="every stage's devices lie in one node (only pipeline crosses nodes)")
    ap.add_argument("--min-stages", type=int)
    ap.add_argument("--more-stages-than", metavar="REPORT",
                    help="more pipeline stages than the plan in REPORT")
    ap.add_argument("--devices", type=int, help="devices used")
    ap.add_argument("--ep-above-one", action="store_true", help="some stage uses expert parallelism")
    ap.add_argument("--tflops-near", nargs=2, type=float, metavar=("PUBLISHED", "PERCENT"),
                    help="predicted TFLOP/s per device within PERCENT of PUBLISHED")
    ap.add_argument("--grid-ratio-at-least", type=float,
                    help="step time of the Megatron-style grid plan / searched >= this")
    ap.add_argument("--same-step-time", metavar="REPORT", help="exactly the same predicted step time")
    args = ap.parse_args()

    r = load(args.report)
    plan = r["plan"]
    stages = plan["stages"]
    per_node = r["cluster"]["devices_per_node"]

    def fail(msg):
        print("FAIL: " + msg)
        sys.exit(1)

    if args.tp_within_node:
        tps = [s["tp"] for s in stages]
        if max(tps) > per_node:
            fail("tp %s exceeds %d devices per node" % (tps, per_node))
        print("ok: tp %s <= %d (inside a node)" % (sorted(set(tps)), per_node))
    if args.stages_within_node:
        for s in stages:
            first, n = s["first_device"], s["num_devices"]
            if first // per_node != (first + n - 1) // per_node:
                fail("stage %d spans devices %d-%d across nodes" % (s["stage"], first, first + n - 1))
        print("ok: every stage inside one node; %d stages across %d devices"
              % (len(stages), plan["devices_used"]))
    if args.min_stages is not None:
        if len(stages) < args.min_stages:
            fail("%d stages < %d" % (len(stages), args.min_stages))
        print("ok: %d stages >= %d" % (len(stages), args.min_stages))
    if args.more_stages_than:
        other = load(args.more_stages_than)["plan"]["num_stages"]
        if len(stages) <= other:
            fail("%d stages, not more than %d" % (len(stages), other))
        print("ok: %d stages > %d" % (len(stages), other))
    if args.devices is not None:
        if plan["devices_used"] != args.devices:
            fail("uses %d devices, not %d" % (plan["devices_used"], args.devices))
        print("ok: uses %d devices" % args.devices)
    if args.ep_above_one:
        eps = [s["ep"] for s in stages]
        if max(eps) <= 1:
            fail("no expert parallelism: ep %s" % eps)
        print("ok: ep %s" % sorted(set(eps)))
    if args.tflops_near:
        published, pct = args.tflops_near
        got = plan["prediction"]["tflops_per_device"]
        err = 100 * abs(got - published) / published
        if err > pct:
            fail("%.1f TFLOP/s is %.1f%% from %.1f" % (got, err, published))
        print("ok: %.1f TFLOP/s within %.0f%% of %.1f" % (got, pct, published))
    if args.grid_ratio_at_least is not None:
        base = r["baseline"]
        if not base["valid"]:
            fail("no grid plan")
        ratio = base["step_time_ratio"]
        if ratio < args.grid_ratio_at_least:
            fail("grid/searched %.6f < %.6f" % (ratio, args.grid_ratio_at_least))
        print("ok: grid/searched step time %.4f >= %g" % (ratio, args.grid_ratio_at_least))
    if args.same_step_time:
        a = plan["prediction"]["step_time_s"]
        b = load(args.same_step_time)["plan"]["prediction"]["step_time_s"]
        if a != b:
            fail("step time %r != %r" % (a, b))
        print("ok: same step time %r" % a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
