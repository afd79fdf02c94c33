#!/usr/bin/env python3
"""Times whole commands in turn, round after round, so that drift in the machine's state falls
on all of them alike (hyperfine runs one command's runs, then the next's). Prints the median
and the 10th/90th percentiles of each, in milliseconds; Python's own spawn cost is included in
every figure alike.

    scripts/bench-interleaved.py ROUNDS "CMD ARGS…" "CMD ARGS…" …
"""
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    commands = [c.split() for c in sys.argv[2:]]
    times = [[] for _ in commands]
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(10):  # warm-up
        for c in commands:
            subprocess.run(c, **quiet)
    for _ in range(rounds):
        for i, c in enumerate(commands):
            start = time.perf_counter()
            subprocess.run(c, **quiet)
            times[i].append((time.perf_counter() - start) * 1000)
    for text, t in zip(sys.argv[2:], times):
        t.sort()
        print(f"median {statistics.median(t):.2f} ms  p10 {t[len(t) // 10]:.2f}  "
              f"p90 {t[len(t) * 9 // 10]:.2f}  {text}")


if __name__ == "__main__":
    main()
