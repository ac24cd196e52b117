# A fake rank of a training job, for hpc-launch's tests: it keeps the
# heartbeat contract of docs/launch.md (HPC_HEARTBEAT replaced atomically by
# `ready STEP LOAD_S`, `step STEP SAVES SAVE_S BYTES`, `ckpt ...`, `done ...`) and fails on
# request, without MPI or a model, so that a test takes seconds.
#
# usage: fake_job.py [--steps N] [--sleep S] [--ckpt-dir DIR] [--ckpt-every K]
#                    [--resume] [--load S] [--log FILE]
#                    [--kill R:S] [--exit R:S] [--hang R:S] [--no-beat R]
#                    [--every-attempt] [--metrics FILE] [--profile-every K]
#                    [--plan-name NAME]
#
# Checkpoints mimic the runtime's: after step S (a multiple of K) every rank
# writes DIR/step-S/rank-R and waits until every rank has (a checkpoint is
# collective), then rank 0 replaces DIR/latest ("step-S", as the runtime
# does); --resume continues from the newest complete one (an error
# when there is none), and a fresh run refuses a DIR that holds step-N
# directories (the ranks wait for each other at the start, so that every
# rank checks before any writes a checkpoint). --load sleeps that long
# "loading" on a resume (LOAD_S).
# Faults (rank R, during step S, before its heartbeat): --kill raises
# SIGKILL, --exit exits with status 3, --hang sleeps forever; --no-beat R:
# rank R never beats and sleeps forever. Faults fire in attempt 0 only
# (HPC_ATTEMPT), in every attempt with --every-attempt.
# --log FILE gets one line per rank and attempt at its start (and one at a
# hang), appended: what the rank saw of hpc-launch, and --plan-name (the
# plan it runs: "original" unless a re-planned "binary" says otherwise).
# --metrics FILE: rank 0 writes a line per step and, with --profile-every
# K, a profile line after each K-th step (after its checkpoint, as the
# runtime does); the file is appended to on --resume, else truncated.
import os
import signal
import sys
import time

heartbeat = os.environ.get("HPC_HEARTBEAT")
attempt = int(os.environ.get("HPC_ATTEMPT", "0"))
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))


def beat(line):
    if heartbeat:
        with open(heartbeat + ".tmp", "w") as f:
            f.write(line + "\n")
        os.rename(heartbeat + ".tmp", heartbeat)


def fail(message):
    sys.stderr.write("fake_job: error: rank %d: %s\n" % (rank, message))
    sys.exit(1)


def log(path, line):
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, (line + "\n").encode())
        os.close(fd)


def parse(argv):
    o = {"steps": 20, "sleep": 0.05, "ckpt-dir": None, "ckpt-every": 5, "resume": False,
         "load": 0.0, "log": None, "kill": None, "exit": None, "hang": None,
         "no-beat": None, "every-attempt": False, "metrics": None, "profile-every": 0,
         "plan-name": "original"}
    i = 0
    while i < len(argv):
        name = argv[i][2:]
        if name not in o:
            fail("unknown argument " + argv[i])
        if isinstance(o[name], bool):
            o[name] = True
            i += 1
            continue
        value = argv[i + 1]
        if name in ("kill", "exit", "hang"):
            value = tuple(int(x) for x in value.split(":"))
        elif name in ("steps", "ckpt-every", "no-beat", "profile-every"):
            value = int(value)
        elif name in ("sleep", "load"):
            value = float(value)
        o[name] = value
        i += 2
    return o


def complete_checkpoints(d):
    steps = []
    for n in os.listdir(d) if os.path.isdir(d) else []:
        if n.startswith("step-") and n[5:].isdigit():
            s = int(n[5:])
            if all(os.path.exists(os.path.join(d, n, "rank-%d" % r)) for r in range(world)):
                steps.append(s)
    return sorted(steps)


# The checkpoints this rank wrote in this attempt: count, seconds, bytes.
saves = [0, 0.0, 0]


def saved():
    return " %d %.3f %d" % tuple(saves)


def checkpoint(d, step):
    beat("ckpt %d%s" % (step, saved()))
    t = time.time()
    sd = os.path.join(d, "step-%d" % step)
    os.makedirs(sd, exist_ok=True)
    text = "%d\n" % step
    with open(os.path.join(sd, "rank-%d" % rank), "w") as f:
        f.write(text)
    while not all(os.path.exists(os.path.join(sd, "rank-%d" % r)) for r in range(world)):
        time.sleep(0.01)
    if rank == 0:
        with open(os.path.join(d, ".latest.tmp"), "w") as f:
            f.write("step-%d" % step)
        os.rename(os.path.join(d, ".latest.tmp"), os.path.join(d, "latest"))
    saves[0] += 1
    saves[1] += time.time() - t
    saves[2] += len(text)


def main():
    o = parse(sys.argv[1:])
    armed = attempt == 0 or o["every-attempt"]
    if armed and o["no-beat"] == rank:
        while True:
            time.sleep(1)
    start, load = 0, 0.0
    d = o["ckpt-dir"]
    if o["resume"]:
        steps = complete_checkpoints(d) if d else []
        if not steps:
            fail("no checkpoint to resume from in %s" % d)
        t = time.time()
        time.sleep(o["load"])
        start, load = steps[-1], time.time() - t
    elif d and any(n.startswith("step-") for n in (os.listdir(d) if os.path.isdir(d) else [])):
        fail("%s already holds checkpoints" % d)
    if d:
        # Every rank has checked before any writes a checkpoint.
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, ".started-%d-%d" % (attempt, rank)), "w").close()
        while not all(os.path.exists(os.path.join(d, ".started-%d-%d" % (attempt, r)))
                      for r in range(world)):
            time.sleep(0.01)
    metrics = None
    if o["metrics"] and rank == 0:
        metrics = open(o["metrics"], "a" if o["resume"] else "w")
    beat("ready %d %.3f" % (start, load))
    log(o["log"], "attempt %d rank %d start %d resume %s reason %r var %s host %s "
        "heartbeat %s plan %s pid %d at %.6f" % (
            attempt, rank, start, "--resume" in sys.argv, os.environ.get("HPC_RESTART_REASON"),
            os.environ.get("FAKE_VAR"), os.uname().nodename,
            os.path.basename(heartbeat or "none"), o["plan-name"], os.getpid(), time.time()))
    window = time.time()
    for step in range(start + 1, o["steps"] + 1):
        time.sleep(o["sleep"])
        if armed and o["kill"] == (rank, step):
            os.kill(os.getpid(), signal.SIGKILL)
        if armed and o["exit"] == (rank, step):
            sys.stdout.flush()
            os._exit(3)
        if armed and o["hang"] == (rank, step):
            log(o["log"], "hang rank %d step %d at %.6f" % (rank, step, time.time()))
            while True:
                time.sleep(1)
        beat("step %d%s" % (step, saved()))
        if metrics:
            metrics.write('{"step": %d, "loss": 1.0}\n' % step)
            metrics.flush()
        if d and step % o["ckpt-every"] == 0:
            checkpoint(d, step)
            beat("step %d%s" % (step, saved()))
        if metrics and o["profile-every"] and step % o["profile-every"] == 0:
            now = time.time()
            steps = min(o["profile-every"], step - start)
            line = ('{"profile": true, "step": %d, "steps": %d, "step_time_s": %.6f, '
                    '"layout": "%s"}\n' % (step, steps, (now - window) / steps, o["plan-name"]))
            # In two writes: hpc-launch may read the first half alone.
            metrics.write(line[:20])
            metrics.flush()
            time.sleep(0.06)
            metrics.write(line[20:])
            metrics.flush()
            window = time.time()
    beat("done %d%s" % (o["steps"], saved()))
    print("rank %d: trained steps %d..%d" % (rank, start + 1, o["steps"]), flush=True)


main()
