# A fake compiler for hpc-launch's re-planning tests (--replan-compile): it
# takes the flags hpc-launch appends, `--auto-parallel
# --recalibrate=METRICS@STEP --replan-threshold=F --report=R.json -o BIN`
# (an error for any other), reads the profile line of STEP from METRICS
# (an error when there is none) and answers as hpc-opt does: a report with
# a "replan" section, and the binary only when its plan is predicted at
# least F faster than the measured step.
#
# usage: fake_compiler.py [--faster G] [--only-at S,S...] [--measured S] [--fail]
#                         [--sleep S] [--log FILE] HPC-LAUNCH'S FLAGS
#
# --faster G: the plan is predicted G faster than measured (default 0:
# keep the running plan). --only-at: a plan faster only at these steps.
# --measured S: report the step as S seconds (default: the profile's), so
# that the steps left pay a switch (hpc-launch weighs the time they save
# against what a switch costs).
# --fail: exit 3 after an error line. --sleep S: take S seconds first.
# The "binary" it writes is a shell script that runs the job's interpreter
# with the job's arguments and `--plan-name plan-STEP` (the tests run
# `%python fake_job.py ...`, so the binary takes PROGRAM's place, the
# interpreter's). --log FILE gets a line per compile (its arguments, the
# profile's layout, its pid) and one when it ends.
import json
import os
import sys
import time


def fail(message, status=2):
    sys.stderr.write("fake_compiler: error: %s\n" % message)
    sys.exit(status)


def log(path, line):
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


own = {"faster": 0.0, "only-at": None, "measured": None, "fail": False, "sleep": 0.0,
       "log": None}
argv = sys.argv[1:]
while argv and argv[0][2:] in own:
    name = argv.pop(0)[2:]
    if isinstance(own[name], bool):
        own[name] = True
    elif name == "only-at":
        own[name] = [int(x) for x in argv.pop(0).split(",")]
    elif name == "log":
        own[name] = argv.pop(0)
    else:
        own[name] = float(argv.pop(0))

flags = {}
i = 0
while i < len(argv):
    a = argv[i]
    if a == "--auto-parallel":
        flags["auto-parallel"] = True
    elif a == "-o" and i + 1 < len(argv):
        i += 1
        flags["o"] = argv[i]
    elif a.startswith("--") and "=" in a and a[2:a.index("=")] in (
            "recalibrate", "replan-threshold", "report"):
        flags[a[2:a.index("=")]] = a[a.index("=") + 1:]
    else:
        fail("unexpected argument %r" % a)
    i += 1
missing = {"auto-parallel", "recalibrate", "replan-threshold", "report", "o"} - set(flags)
if missing:
    fail("missing " + ", ".join(sorted(missing)))
metrics, _, at = flags["recalibrate"].rpartition("@")
step, threshold = int(at), float(flags["replan-threshold"])
log(own["log"], "compile step %d pid %d args %s" % (step, os.getpid(), " ".join(argv)))
time.sleep(own["sleep"])

profile = None
for line in open(metrics):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if j.get("profile") is True and j.get("step") == step:
        profile = j
if profile is None:
    fail("%s: no profile line of step %d" % (metrics, step))
log(own["log"], "profile step %d layout %s" % (step, profile["layout"]))
if own["fail"]:
    fail("the plan search failed", 3)

measured = own["measured"] if own["measured"] is not None else profile["step_time_s"]
faster = own["faster"] if own["only-at"] is None or step in own["only-at"] else 0.0
predicted = measured * (1 - faster)
gain = 1 - predicted / measured
compile = gain >= threshold
# Pretty-printed, as hpc-opt writes it; a "plan" section with a
# predicted_step_s of its own comes first (hpc-launch must read the
# "replan" section's).
report = {"plan": {"mesh": "dp=2", "predicted_step_s": 99.0},
          "replan": {"measured_step_s": measured, "predicted_step_s": predicted, "gain": gain,
                     "threshold": threshold, "compile": compile}}
with open(flags["report"], "w") as f:
    json.dump(report, f, indent=2)
if compile:
    with open(flags["o"], "w") as f:
        f.write('#!/bin/sh\nexec %s "$@" --plan-name plan-%d\n' % (sys.executable, step))
    os.chmod(flags["o"], 0o755)
    print("fake_compiler: step %d: the plan is predicted %.0f%% faster: writing %s"
          % (step, 100 * gain, flags["o"]), flush=True)
else:
    print("fake_compiler: step %d: below the threshold, keeping the running plan (nothing "
          "written)" % step, flush=True)
log(own["log"], "done step %d" % step)
