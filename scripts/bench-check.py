#!/usr/bin/env python3
"""Time per decision of `cordon check --jsonl`, start-up excluded.

Each round runs every binary twice, interleaved: once with no request (start-up, policy
loading and exit) and once with N shell decisions; the difference over N is the time per
decision, JSON in and out included. Prints the median and range over the rounds.

    python3 scripts/bench-check.py [--rounds 7] [--requests 4000] [--each] BINARY [BINARY...]

With --each, every one of the five commands is timed on its own as well.

Run it from anywhere: it works in a scratch home and workspace of its own, so that no policy
or settings file of the machine's user changes what is measured.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

COMMANDS = [
    "ls -la",
    "git status && cargo test 2>&1 | tail -n 20",
    "grep -rn \"$(whoami)\" src",
    "sudo rm -rf /tmp/x",
    "for f in *.rs; do wc -l \"$f\"; done",
]


def timed(binary, stdin, cwd, env):
    start = time.perf_counter()
    subprocess.run(
        [binary, "check", "--jsonl"],
        input=stdin,
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--each", action="store_true", help="also time each command on its own")
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    args.binaries = [os.path.abspath(b) for b in args.binaries]
    def lines(commands):
        return "".join(
            json.dumps({"tool": "run_shell_command", "args": {"command": c}}) + "\n"
            for c in (commands * (args.requests // len(commands) + 1))[: args.requests]
        ).encode()

    mixes = [("the five in turn", lines(COMMANDS))]
    if args.each:
        mixes += [(c, lines([c])) for c in COMMANDS]
    with tempfile.TemporaryDirectory() as scratch:
        home = os.path.join(scratch, "home")
        work = os.path.join(scratch, "work")
        os.makedirs(home)
        os.makedirs(work)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "CORDON_MANAGED_SETTINGS": os.path.join(scratch, "managed.toml"),
        }
        for mix, requests in mixes:
            per = {b: [] for b in args.binaries}
            for _ in range(args.rounds):
                for b in args.binaries:
                    empty = timed(b, b"", work, env)
                    full = timed(b, requests, work, env)
                    per[b].append((full - empty) / args.requests * 1e6)
            print(
                f"per decision, start-up excluded ({mix}; "
                f"{args.requests} requests, {args.rounds} rounds):"
            )
            for b, xs in per.items():
                print(
                    f"  {b}: median {statistics.median(xs):.1f} µs, "
                    f"range {min(xs):.1f}-{max(xs):.1f} µs"
                )


if __name__ == "__main__":
    main()
