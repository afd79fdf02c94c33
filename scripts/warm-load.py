#!/usr/bin/env python3
"""A fixed load of warm commands, for counting what they make the kernel do: N commands of
`true` through one `cordon exec`, K in flight at a time, after one to start the sandbox.
Run it under `perf` and divide by N; counts of events hold from run to run where times do
not, which is why BENCHMARKS gives them beside the times. For example, as root:

    perf stat -e 'syscalls:sys_enter_clone3,syscalls:sys_enter_madvise' -a -- \\
        python3 scripts/warm-load.py --cordon target/dist/cordon -n 1000 -k 16
    perf record -e page-faults -c 1 -a -o faults.data -- \\
        python3 scripts/warm-load.py --cordon target/dist/cordon -n 1000 -k 16
    perf report -i faults.data --sort comm --stdio -n -g none

It prints how many commands a second it ran, which under `perf` is not a figure to quote.
"""

import argparse
import os
import sys
import tempfile
import time

import execsession


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cordon", default="target/dist/cordon")
    ap.add_argument("-n", type=int, default=1000, help="commands to run")
    ap.add_argument("-k", type=int, default=16, help="commands in flight at a time")
    a = ap.parse_args()
    if a.n < 1 or a.k < 1:
        sys.exit("-n and -k must be at least 1")
    cordon = os.path.abspath(a.cordon)
    with tempfile.TemporaryDirectory(dir="/var/tmp") as cwd:
        proc = execsession.start(cordon, cwd, dict(os.environ))
        execsession.send(proc, 0)
        execsession.exited(proc)
        sent, done = 0, 0
        began = time.perf_counter()
        while sent < min(a.k, a.n):
            sent += 1
            execsession.send(proc, sent)
        while done < a.n:
            execsession.exited(proc)
            done += 1
            if sent < a.n:
                sent += 1
                execsession.send(proc, sent)
        took = time.perf_counter() - began
        proc.stdin.close()
        proc.wait()
    print(f"{a.n} commands, {a.k} in flight: {a.n / took:.0f}/s", file=sys.stderr)


if __name__ == "__main__":
    main()
