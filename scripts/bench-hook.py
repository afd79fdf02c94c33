#!/usr/bin/env python3
"""What `cordon hook claude-code` costs an agent per tool call: the whole process, from start
to answer, with a Claude Code PreToolUse input on standard input, timed in turn with
`cordon check` on the same call and with `true` (the cost of starting any process), round
after round. Prints the median and the 10th-90th percentiles of each, in milliseconds.

    python3 scripts/bench-hook.py [--cordon PATH] [--rounds N]
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cordon", default="target/release/cordon")
    ap.add_argument("--rounds", type=int, default=300)
    a = ap.parse_args()
    cordon = os.path.abspath(a.cordon)
    ws = tempfile.mkdtemp(prefix="cordon-bench-hook-")
    command = "git status && cargo test 2>&1 | tail -n 20"
    hook_input = json.dumps({
        "session_id": "s", "transcript_path": os.path.join(ws, "t.jsonl"), "cwd": ws,
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": command}, "tool_use_id": "toolu_1",
    }).encode()
    ways = {
        "cordon hook claude-code": ([cordon, "hook", "claude-code"], hook_input),
        # Codex hands its hook Claude Code's input (its shell tool is also `Bash`).
        "cordon hook codex": ([cordon, "hook", "codex"], hook_input),
        "cordon check (same call)": ([cordon, "check", "--tool", "run_shell_command",
                                      "--args", json.dumps({"command": command})], b""),
        "true": (["true"], b""),
    }
    times = {w: [] for w in ways}
    for r in range(a.rounds + 10):
        for way, (argv, stdin) in ways.items():
            start = time.perf_counter()
            out = subprocess.run(argv, input=stdin, cwd=ws, capture_output=True)
            took = (time.perf_counter() - start) * 1000
            if out.returncode != 0:
                raise SystemExit(f"{way}: exit {out.returncode}: {out.stderr.decode()}")
            if r >= 10:  # the first rounds warm the caches
                times[way].append(took)
    print(f"{a.rounds} rounds, median (p10-p90) ms per call, process start included:")
    for way, t in times.items():
        t.sort()
        print(f"  {way:28} {statistics.median(t):6.2f} ({t[len(t) // 10]:.2f}-{t[len(t) * 9 // 10]:.2f})")


if __name__ == "__main__":
    main()
