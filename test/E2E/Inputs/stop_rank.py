"""Stops or kills one rank of a running mpirun job and checks how the job
ends: the other ranks exit within the peer timeout with the line naming the
stopped rank, use no core while they wait, and no process is left.

usage: stop_rank.py --signal STOP|KILL --rank R --timeout S --work DIR
                    [--after TEXT] -- MPIRUN ... PROG train|run ... --peer-timeout S

The job is started with its stdout and stderr in DIR; once TEXT (default
"step ", train's first progress line) is in its output, the rank is
signalled. Prints one "ok:" line
per check that held and the job's error lines (for FileCheck), or "FAIL:"
lines and exits 1. A process of the job still alive at the end is killed
(and the check fails).
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def children(pid):
    """Every descendant of pid (pids), from /proc."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def world_rank(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for var in f.read().split(b"\0"):
                if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(var.split(b"=", 1)[1])
    except OSError:
        pass
    return None


def cpu_seconds(pid):
    """utime + stime of every thread of pid."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def alive(pid):
    """Running or stopped (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(pred, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--signal", choices=["STOP", "KILL"], required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--timeout", type=float, required=True, help="the job's --peer-timeout")
    ap.add_argument("--work", required=True)
    ap.add_argument("--after", default="step ")
    ap.add_argument("job", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    job = a.job[1:] if a.job[:1] == ["--"] else a.job
    os.makedirs(a.work, exist_ok=True)
    out_path, err_path = os.path.join(a.work, "out.log"), os.path.join(a.work, "err.log")
    failures = []
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        p = subprocess.Popen(job, stdout=out, stderr=err)

    def output():
        text = ""
        for path in (out_path, err_path):
            with open(path, errors="replace") as f:
                text += f.read()
        return text

    ranks = {}

    def started():
        if p.poll() is not None:
            return True
        for c in children(p.pid):
            r = world_rank(c)
            if r is not None:
                ranks[r] = c
        return a.after in output() and len(ranks) >= 2

    if not wait_for(started, 60) or p.poll() is not None:
        p.kill()
        sys.exit(f"FAIL: the job did not start (rc {p.poll()}):\n{output()}")
    victim = ranks[a.rank]
    others = [pid for r, pid in ranks.items() if r != a.rank]
    os.kill(victim, getattr(signal, "SIG" + a.signal))
    t0 = time.monotonic()

    if a.signal == "STOP":
        # Two seconds of the others' wait, from half a second after the stop
        # (the step they were in has ended by then).
        time.sleep(0.5)
        before = {pid: cpu_seconds(pid) for pid in others if alive(pid)}
        w0 = time.monotonic()
        time.sleep(2.0)
        wall = time.monotonic() - w0
        busy = max((cpu_seconds(pid) - c) / wall for pid, c in before.items()
                   if alive(pid)) if before else None
        if busy is None:
            failures.append("the other ranks ended before their wait could be measured")
        elif busy < 0.1:
            print(f"ok: the waiting ranks use less than 10% of a core ({100 * busy:.1f}%)")
        else:
            failures.append(f"a waiting rank used {100 * busy:.0f}% of a core")

    margin = 5.0
    try:
        rc = p.wait(timeout=a.timeout + margin - (time.monotonic() - t0))
    except subprocess.TimeoutExpired:
        rc = None
    took = time.monotonic() - t0
    if rc is None:
        failures.append(f"the job still runs {took:.1f} s after the {a.signal}")
    elif rc == 0:
        failures.append("the job exited 0")
    else:
        print(f"ok: the job ended with a non-zero status within the timeout + {margin:g} s "
              f"({took:.1f} s after the {a.signal})")
    left = [pid for pid in [victim] + others + children(p.pid) if alive(pid)]
    if rc is not None and not wait_for(lambda: not any(alive(q) for q in left), 2.0):
        failures.append("processes left running: " +
                        ", ".join(str(q) for q in left if alive(q)))
    elif rc is not None:
        print("ok: no process of the job is left")
    for q in [victim] + others:
        if alive(q):
            os.kill(q, signal.SIGKILL)
    if p.poll() is None:
        p.kill()
        p.wait()
    with open(err_path, errors="replace") as f:
        for line in f:
            if ": error: " in line:
                print(line.rstrip())
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
