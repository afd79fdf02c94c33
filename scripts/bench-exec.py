#!/usr/bin/env python3
"""Throughput of sandboxed commands through `cordon exec --jsonl`, against one `cordon run` after
another.

`cordon exec --jsonl --mode yolo` gets N runs of `true` with IN_FLIGHT of them going at any
moment (a new one is sent each time one reports `exited`); every run must exit 0. For
comparison, the same N `cordon run -- true` are started one after another. Both run in a fresh
scratch directory (the sandbox's writable working directory). Prints commands per second for
each. Results go in docs/BENCHMARKS.md.

    cargo build --release -p cordon
    python3 scripts/bench-exec.py --cordon target/release/cordon -n 500 --in-flight 16
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def through_exec(cordon, n, in_flight, cwd):
    proc = subprocess.Popen(
        [cordon, "exec", "--jsonl", "--mode", "yolo"],
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    sent = 0
    done = 0
    failed = []

    def send():
        nonlocal sent
        proc.stdin.write(json.dumps({"type": "run", "id": str(sent), "command": "true"}) + "\n")
        proc.stdin.flush()
        sent += 1

    start = time.perf_counter()
    for _ in range(min(in_flight, n)):
        send()
    for line in proc.stdout:
        event = json.loads(line)
        if event["type"] == "error":
            sys.exit(f"cordon exec said: {event['message']}")
        if event["type"] != "exited":
            continue
        done += 1
        if event.get("exit_code") != 0:
            failed.append(event)
        if sent < n:
            send()
        if done == n:
            break
    elapsed = time.perf_counter() - start
    proc.stdin.close()
    proc.wait()
    if failed:
        sys.exit(f"{len(failed)} runs failed, e.g. {failed[0]}")
    return elapsed


def one_after_another(cordon, n, cwd):
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run([cordon, "run", "--", "true"], cwd=cwd, check=True)
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cordon", default="target/release/cordon")
    p.add_argument("-n", type=int, default=500)
    p.add_argument("--in-flight", type=int, default=16)
    args = p.parse_args()
    cordon = os.path.realpath(args.cordon)
    with tempfile.TemporaryDirectory(prefix="cordon-bench-exec-") as cwd:
        # One of each first, so neither side pays for a cold cache.
        through_exec(cordon, 1, 1, cwd)
        one_after_another(cordon, 1, cwd)
        t_exec = through_exec(cordon, args.n, args.in_flight, cwd)
        t_seq = one_after_another(cordon, args.n, cwd)
    print(f"cordon exec --jsonl, {args.in_flight} in flight: {args.n} runs in {t_exec:.2f} s = "
          f"{args.n / t_exec:.0f} commands/s")
    print(f"cordon run -- true, one after another: {args.n} runs in {t_seq:.2f} s = "
          f"{args.n / t_seq:.0f} commands/s")


if __name__ == "__main__":
    main()
