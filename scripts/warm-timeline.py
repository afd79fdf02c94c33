#!/usr/bin/env python3
"""Where one warm command's time goes: the moments of a `cordon exec` command, from cordon
reading the request to the command's report, as medians over many commands run one after
another (the same requests as bench-exec.py's latency).

It puts uprobes (`perf probe`) on functions of the cordon binary named below, and records
them with the kernel's events for the command's `execve` and the exit of each process,
system-wide, while it runs the commands. So it needs root, `perf`, and a binary whose
functions are still there by name: build one without whole-program LTO, with frame pointers
to keep each function whole:

    RUSTFLAGS="-C force-frame-pointers=yes" cargo build --release -p cordon --target-dir /var/tmp/fp
    sudo python3 scripts/warm-timeline.py --cordon /var/tmp/fp/release/cordon

The probes are removed at the end. A probe costs a few microseconds each time it fires, so
the moments are a little later than without them; compare the steps, not the total, with
bench-exec.py's figure.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import execsession

# (probe name, symbol's mangled-name part, on return?)
PROBES = [
    ("started_thread", "cli4exec16start_and_report17h", False),
    ("plan_begin", "run4warm8WarmPool5start17h", False),
    ("plan_done", "run4warm7planned17h", True),
    ("journal_enter", "journal4Held5enter17h", False),
    ("sent_to_sandbox", "warm11WarmSandbox3run17h", False),
    ("keeper_got_it", "7handoff7receive17h", True),
    ("command_process_launches", "linux6helper6launch17h", False),
    ("keeper_ends", "linux4warm3end17h", False),
    ("exit_heard", "warm7WarmRun4wait17h", True),
    ("undo_begins", "protect8RunGuard4undo17h", False),
    ("undo_done", "protect8RunGuard4undo17h", True),
    ("report_made", "run4warm7Started6finish17h", True),
    ("thread_done", "cli4exec16start_and_report17h", True),
]
GROUP = "cordon_timeline"


def symbols(binary):
    out = subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            found.setdefault(parts[2], parts[0])
    return found


def add_probes(binary):
    names = symbols(binary)
    added = []
    for probe, part, ret in PROBES:
        matches = [n for n in names if part in n and "closure" not in n]
        if not matches:
            print(f"skipped: {probe}: no function matching {part} (inlined?)", file=sys.stderr)
            continue
        spec = f"{GROUP}:{probe}={matches[0]}" + ("%return" if ret else "")
        done = subprocess.run(["perf", "probe", "-q", "-x", binary, "--no-demangle", "-a", spec],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"skipped: {probe}: {done.stderr.strip()}", file=sys.stderr)
            continue
        added.append(probe)
    return added


def run_commands(cordon, cwd, env, n, gap):
    proc = execsession.start(cordon, cwd, env)
    for i in range(n):
        execsession.send(proc, i)
        execsession.exited(proc)
        time.sleep(gap)
    proc.stdin.close()
    proc.wait()


def timeline(script_text, skip):
    """Each command's moments, from the `cordon` process reading its request."""
    line_re = re.compile(r"\s*(\S+)\s+(\d+)/(\d+)\s+([\d.]+):\s+(\S+):")
    commands, current = [], None
    for line in script_text.splitlines():
        m = line_re.match(line)
        if not m:
            continue
        comm, _, _, t, event = m.groups()
        ms = float(t) * 1000
        group, name = event.split(":", 1)
        if name == "sys_enter_read" and comm == "cordon":
            if current:
                commands.append(current)
            current = {"t0": ms, "seen": {}}
            continue
        if current is None:
            continue
        if name in ("sched_process_exec", "sched_process_exit"):
            name = f"{name.removeprefix('sched_process_')} of {comm}"
        current["seen"].setdefault(name.removesuffix("__return"), ms - current["t0"])
    steps = {}
    for c in commands[skip:]:
        for name, at in c["seen"].items():
            steps.setdefault(name, []).append(at)
    return len(commands[skip:]), steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cordon", required=True)
    ap.add_argument("-n", type=int, default=200, help="commands")
    ap.add_argument("--gap", type=float, default=0.005,
                    help="seconds between one command's end and the next's request")
    a = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("needs perf")
    cordon = os.path.realpath(a.cordon)
    scratch = tempfile.mkdtemp(prefix="cordon-timeline-", dir="/var/tmp")
    cwd = os.path.join(scratch, "work")
    os.mkdir(cwd)
    os.mkdir(os.path.join(scratch, "tmp"))
    env = dict(os.environ, TMPDIR=os.path.join(scratch, "tmp"))
    data = os.path.join(scratch, "perf.data")
    subprocess.run(["perf", "probe", "-q", "-d", f"{GROUP}:*"], capture_output=True)
    added = add_probes(cordon)
    try:
        if not added:
            sys.exit("no probe could be placed")
        recorder = subprocess.Popen(
            ["perf", "record", "-q", "-a", "-o", data, "-e", f"{GROUP}:*",
             "-e", "sched:sched_process_exec", "-e", "sched:sched_process_exit",
             "-e", "syscalls:sys_enter_read", "--filter", "fd == 0"],
            stderr=subprocess.DEVNULL)
        time.sleep(2)
        run_commands(cordon, cwd, env, a.n, a.gap)
        recorder.send_signal(2)
        recorder.wait()
        text = subprocess.run(["perf", "script", "-i", data, "-F", "comm,pid,tid,time,event"],
                              capture_output=True, text=True).stdout
    finally:
        subprocess.run(["perf", "probe", "-q", "-d", f"{GROUP}:*"], capture_output=True)
    count, steps = timeline(text, skip=10)
    print(f"{count} commands of `true`, one after another; milliseconds after cordon read "
          f"the request (median, and the middle half):")
    for name, times in sorted(steps.items(), key=lambda kv: statistics.median(kv[1])):
        if len(times) < count // 2:
            continue
        q = statistics.quantiles(times, n=4)
        print(f"  {statistics.median(times):7.3f}  ({q[0]:.3f}-{q[2]:.3f})  {name}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
