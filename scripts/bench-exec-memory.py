#!/usr/bin/env python3
"""Memory of a warm sandbox and per in-flight command through `cordon exec --jsonl`.

The proportional set size (PSS, from /proc/PID/smaps_rollup, so pages shared between processes
are split between them) of every process under `cordon exec` is added up three times: with no
run yet; after one run of `true` (what is left is the warm sandbox kept for the next: its
helper, its first process and the keeper made ahead); and with N runs of `sleep 30` in flight,
once each has its `sleep`. The warm sandbox is the second less the first; one in-flight command
is the third less the second, divided by N. The same with CORDON_NO_WARM=1, where each run is a
`cordon run` of its own and nothing stays between runs. The processes per command are counted
too. Repeated ROUNDS times, warm and cold in turn; prints the median and the range. Linux only;
run as root to read every process's smaps.

    python3 scripts/bench-exec-memory.py --cordon target/dist/cordon -n 16 --rounds 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def descendants(pid):
    """Every process under `pid`, by walking /proc's parent links."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss(pid):
    procs = descendants(pid)
    return sum(pss_kib(p) for p in procs), len(procs)


def one_round(cordon, n, cwd, env):
    proc = subprocess.Popen([cordon, "exec", "--jsonl", "--mode", "yolo"], cwd=cwd, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        time.sleep(0.3)
        idle, _ = tree_pss(proc.pid)
        proc.stdin.write(json.dumps({"type": "run", "id": "first", "command": "true"}) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:
            event = json.loads(line)
            if event["type"] == "error":
                sys.exit(f"cordon exec said: {event['message']}")
            if event["type"] == "exited":
                break
        time.sleep(0.3)
        kept, kept_procs = tree_pss(proc.pid)
        for i in range(n):
            proc.stdin.write(json.dumps({"type": "run", "id": str(i), "command": "sleep 30"}) + "\n")
        proc.stdin.flush()
        started = 0
        for line in proc.stdout:
            event = json.loads(line)
            if event["type"] == "error":
                sys.exit(f"cordon exec said: {event['message']}")
            if event["type"] == "started":
                started += 1
                if started == n:
                    break
        # The sandboxes finish setting up after `started`: wait until each has its sleep.
        for _ in range(100):
            procs = descendants(proc.pid)
            sleeping = sum(1 for p in procs if open_comm(p) == "sleep")
            if sleeping == n:
                break
            time.sleep(0.05)
        busy, busy_procs = tree_pss(proc.pid)
        return kept - idle, (busy - kept) / n, (busy_procs - kept_procs) / n
    finally:
        for i in range(n):
            try:
                proc.stdin.write(json.dumps({"type": "cancel", "id": str(i)}) + "\n")
            except OSError:
                pass
        try:
            proc.stdin.close()
        except OSError:
            pass
        proc.wait(timeout=60)


def open_comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cordon", default="target/dist/cordon")
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    cordon = os.path.abspath(a.cordon)
    ways = {"warm": dict(os.environ), "cold (CORDON_NO_WARM=1)": dict(os.environ, CORDON_NO_WARM="1")}
    results = {name: ([], [], []) for name in ways}
    for _ in range(a.rounds):
        for name, env in ways.items():
            with tempfile.TemporaryDirectory(dir="/var/tmp") as cwd:
                for got, value in zip(results[name], one_round(cordon, a.n, cwd, env)):
                    got.append(value)
    mib = lambda xs: f"median {statistics.median(xs) / 1024:.2f} MiB ({min(xs) / 1024:.2f}-{max(xs) / 1024:.2f})"
    print(f"{a.n} runs of `sleep 30` in flight, {a.rounds} rounds:")
    for name, (kept, per, procs) in results.items():
        print(f"  {name}: kept between runs {mib(kept)}; per in-flight command {mib(per)}, "
              f"{statistics.median(procs):.1f} processes")


if __name__ == "__main__":
    main()
