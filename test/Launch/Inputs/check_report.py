# Reads hpc-launch's --report FILE.json, checks its shape and the recovery
# times' arithmetic, and prints it in lines for FileCheck:
#   attempts A restarts B finished true|false
#   failure attempt A rank R cause 'CAUSE' step S
#   recovery attempt A: yes|no
#   checkpoints saves N bytes B loads L
# (one failure and one recovery line per failure). --min-load S: every
# recovered failure's checkpoint_load_s is at least S.
import json
import sys

KEYS = ["attempt", "rank", "cause", "step", "recovery_s", "detect_stop_s",
        "restart_load_s", "checkpoint_load_s", "first_step_s"]

path = sys.argv[1]
min_load = float(sys.argv[sys.argv.index("--min-load") + 1]) if "--min-load" in sys.argv else 0
r = json.load(open(path))
assert list(r) == ["attempts", "restarts", "finished", "failures", "checkpoints"], list(r)
assert r["restarts"] == r["attempts"] - 1 and r["attempts"] >= 1, r
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
c = r["checkpoints"]
assert list(c) == ["saves", "save_s", "save_bytes", "save_mb_per_s", "loads", "load_s"], list(c)
assert c["save_s"] >= 0 and c["load_s"] >= 0, c
if c["save_s"] > 0:
    assert abs(c["save_mb_per_s"] - c["save_bytes"] / 1e6 / c["save_s"]) <= 0.05 + 1e-3 * c["save_mb_per_s"], c
assert c["loads"] == sum(1 for f in r["failures"] if f["restart_load_s"] is not None), c
assert abs(c["load_s"] - sum(f["checkpoint_load_s"] or 0 for f in r["failures"])) < 0.005, c
print("checkpoints saves %d bytes %d loads %d" % (c["saves"], c["save_bytes"], c["loads"]))
