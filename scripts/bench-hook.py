#!/usr/bin/env python3
"""What `cordon hook claude-code` costs an agent per tool call: the whole process, from start
to answer, with a Claude Code PreToolUse input on standard input, timed in turn with
`cordon check` on the same call and with `true` (the cost of starting any process), round
after round. Prints the median, the 10th-90th percentiles and the 99th of each, in
milliseconds.

With --launch, what the rewritten command (`cordon hook --sandbox-shell`) adds when the agent
runs it: `bash -c CMD` timed in turn with `bash -c` of the line the hook hands back, for the
project's settings and for a contained ask, and with sandbox-runtime's `srt` and Codex's
`codex sandbox` where they are given. With --tree DIRS it runs in a git repository with that
many directories, as a project's working directory is, not an empty one: a cold `cordon run`
searches the whole tree for git metadata.

    python3 scripts/bench-hook.py [--cordon PATH] [--rounds N]
    python3 scripts/bench-hook.py --launch [--srt PATH] [--codex PATH] [--rounds N] [--tree DIRS]

Where `cordon-hook` is beside the cordon timed, the same calls through it are timed too: it is
what `cordon setup` writes into the agents' settings when it is installed.

--also "NAME=ARGV" (repeatable) adds a way to the decision's rounds: ARGV, split as a shell
would, given the same hook input on standard input; for instance another build of cordon
(`NAME=PATH hook claude-code`) or `cordon-app`'s `hook_only` example.
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time

from benchtree import make_tree


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cordon", default="target/dist/cordon")
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--launch", action="store_true")
    ap.add_argument("--srt", help="sandbox-runtime's srt, for --launch")
    ap.add_argument("--codex", help="Codex's codex, for --launch")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=ARGV",
                    help="another way to time with the same hook input")
    ap.add_argument("--tree", type=int, default=0, metavar="DIRS",
                    help="run in a git repository of DIRS directories of eight files each, "
                         "not an empty directory")
    a = ap.parse_args()
    cordon = os.path.abspath(a.cordon)
    # Not under /tmp: a sandboxed command has a /tmp of its own.
    ws = tempfile.mkdtemp(prefix="cordon-bench-hook-", dir="/var/tmp")
    try:
        if a.tree:
            make_tree(ws, a.tree)
        if a.launch:
            return launch(a, cordon, ws)
        decisions(a, cordon, ws)
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def decisions(a, cordon, ws):
    """A hook call's whole process, for each way, round after round."""
    command = "git status && cargo test 2>&1 | tail -n 20"
    hook_input = json.dumps({
        "session_id": "s", "transcript_path": os.path.join(ws, "t.jsonl"), "cwd": ws,
        "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": command}, "tool_use_id": "toolu_1",
    }).encode()
    ways = {
        "cordon hook claude-code": ([cordon, "hook", "claude-code"], hook_input),
        "hook claude-code --sandbox-shell": ([cordon, "hook", "claude-code", "--sandbox-shell"],
                                             hook_input),
        # Codex hands its hook Claude Code's input (its shell tool is also `Bash`).
        "cordon hook codex": ([cordon, "hook", "codex"], hook_input),
        "cordon check (same call)": ([cordon, "check", "--tool", "run_shell_command",
                                      "--args", json.dumps({"command": command})], b""),
    }
    hook = os.path.join(os.path.dirname(cordon), "cordon-hook")
    if os.path.exists(hook):
        ways["cordon-hook claude-code"] = ([hook, "claude-code"], hook_input)
        ways["cordon-hook --sandbox-shell"] = ([hook, "claude-code", "--sandbox-shell"], hook_input)
    for also in a.also:
        name, sep, argv = also.partition("=")
        if not sep or not name or not argv.strip():
            raise SystemExit(f"--also {also!r}: give NAME=ARGV, for instance \"static=PATH hook claude-code\"")
        argv = shlex.split(argv)
        if "/" in argv[0]:  # the ways run in the scratch workspace
            argv[0] = os.path.abspath(argv[0])
        ways[name] = (argv, hook_input)
    ways["true"] = (["true"], b"")
    show(a.rounds, interleave(ways, a.rounds, ws))


def interleave(ways, rounds, ws):
    """Each way's whole-process times, the ways taken in turn round after round."""
    times = {w: [] for w in ways}
    for r in range(rounds + 10):
        for way, (argv, stdin) in ways.items():
            start = time.perf_counter()
            out = subprocess.run(argv, input=stdin, cwd=ws, capture_output=True)
            took = (time.perf_counter() - start) * 1000
            if out.returncode != 0:
                raise SystemExit(f"{way}: exit {out.returncode}: {out.stderr.decode()}")
            if r >= 10:  # the first rounds warm the caches
                times[way].append(took)
    return times


def show(rounds, times):
    print(f"{rounds} rounds, median (p10-p90) p99 ms per call, process start included:")
    for way, t in times.items():
        t.sort()
        p99 = t[min(len(t) - 1, len(t) * 99 // 100)]
        print(f"  {way:34} {statistics.median(t):6.2f} ({t[len(t) // 10]:.2f}-{t[len(t) * 9 // 10]:.2f}) {p99:.2f}")


def launch(a, cordon, ws):
    """The agent's shell running the command itself, and running the line the hook hands
    back, for an allowed command and for a contained ask."""
    command = "true"

    def rewritten(mode):
        hook_input = json.dumps({
            "hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": ws,
            "permission_mode": mode, "tool_input": {"command": command},
        }).encode()
        out = subprocess.run([cordon, "hook", "claude-code", "--sandbox-shell"],
                             input=hook_input, cwd=ws, capture_output=True, check=True)
        line = json.loads(out.stdout)["hookSpecificOutput"]["updatedInput"]["command"]
        return line

    allowed = rewritten("default")
    # `true` is allowed; a contained run is what an ask becomes with nobody to answer.
    contained = allowed.replace(" run ", " run --profile contained --fail-if-unavailable ", 1)
    ways = {
        "bash -c CMD": (["bash", "-c", command], b""),
        "bash -c (cordon run, settings)": (["bash", "-c", allowed], b""),
        "bash -c (cordon run, contained)": (["bash", "-c", contained], b""),
    }
    if a.srt:
        ways["srt -- CMD"] = ([a.srt, "--", command], b"")
    if a.codex:
        ways["codex sandbox -- CMD"] = ([a.codex, "sandbox", "-c", "sandbox_mode=workspace-write",
                                         "--", command], b"")
    show(a.rounds, interleave(ways, a.rounds, ws))


if __name__ == "__main__":
    main()
