# Reads hpc-launch's --report FILE.json, checks its shape and the recovery
# times' arithmetic, and prints it in lines for FileCheck:
#   attempts A restarts B finished true|false
#   failure attempt A rank R cause 'CAUSE' step S
#   recovery attempt A: yes|no
#   replan step S status STATUS binary NAME switched_at C gain G
#   checkpoints saves N bytes B loads L
# (one failure and one recovery line per failure, one replan line per
# compile: NAME the binary's file name, G = 1 - predicted / measured step). --min-load S: every
# recovered failure's checkpoint_load_s is at least S.
import json
import sys

KEYS = ["attempt", "rank", "cause", "step", "recovery_s", "detect_stop_s",
        "restart_load_s", "checkpoint_load_s", "first_step_s"]

REPLAN_KEYS = ["step", "status", "binary", "measured_step_s", "predicted_step_s",
               "switched_at_step", "compile_s"]

path = sys.argv[1]
min_load = float(sys.argv[sys.argv.index("--min-load") + 1]) if "--min-load" in sys.argv else 0
r = json.load(open(path))
assert list(r) == ["attempts", "restarts", "finished", "wall_s", "failures", "replans", "checkpoints"], list(r)
assert r["wall_s"] is None or r["wall_s"] >= 0, r
switches = sum(1 for p in r["replans"] if p["status"] == "switched")
assert r["restarts"] == r["attempts"] - 1 - switches and r["attempts"] >= 1, r
print("attempts %d restarts %d finished %s" % (
    r["attempts"], r["restarts"], "true" if r["finished"] is True else "false"))
for f in r["failures"]:
    assert list(f) == KEYS, list(f)
    print("failure attempt %d rank %s cause %r step %s" % (
        f["attempt"], f["rank"], f["cause"], f["step"]))
    assert f["detect_stop_s"] >= 0, f
    if f["recovery_s"] is None:
        assert f["first_step_s"] is None, f
    else:
        parts = f["detect_stop_s"] + f["restart_load_s"] + f["first_step_s"]
        assert abs(parts - f["recovery_s"]) < 0.005, f
        assert min(f["restart_load_s"], f["first_step_s"]) >= 0, f
        assert min_load <= f["checkpoint_load_s"] <= f["restart_load_s"] + 0.005, f
    print("recovery attempt %d: %s" % (f["attempt"], "no" if f["recovery_s"] is None else "yes"))
for p in r["replans"]:
    assert list(p) == REPLAN_KEYS, list(p)
    assert p["status"] in ("switched", "kept", "failed", "cancelled"), p
    assert (p["status"] == "switched") == (p["switched_at_step"] is not None), p
    assert p["binary"] is not None or p["status"] in ("kept", "failed", "cancelled"), p
    assert p["binary"] is None or p["status"] in ("switched", "cancelled"), p
    assert p["compile_s"] >= 0, p
    known = p["measured_step_s"] is not None and p["predicted_step_s"] is not None
    print("replan step %d status %s binary %s switched_at %s gain %s" % (
        p["step"], p["status"], p["binary"] and p["binary"].rsplit("/", 1)[-1],
        p["switched_at_step"],
        "%.2f" % (1 - p["predicted_step_s"] / p["measured_step_s"]) if known else None))
c = r["checkpoints"]
assert list(c) == ["saves", "save_s", "save_bytes", "save_mb_per_s", "loads", "load_s"], list(c)
assert c["save_s"] >= 0 and c["load_s"] >= 0, c
if c["save_s"] > 0:
    assert abs(c["save_mb_per_s"] - c["save_bytes"] / 1e6 / c["save_s"]) <= 0.05 + 1e-3 * c["save_mb_per_s"], c
assert c["loads"] == sum(1 for f in r["failures"] if f["restart_load_s"] is not None), c
assert abs(c["load_s"] - sum(f["checkpoint_load_s"] or 0 for f in r["failures"])) < 0.005, c
print("checkpoints saves %d bytes %d loads %d" % (c["saves"], c["save_bytes"], c["loads"]))
