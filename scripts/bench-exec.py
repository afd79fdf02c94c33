#!/usr/bin/env python3
"""Per-command latency and throughput of sandboxed commands: `cordon exec --jsonl` (warm
sandboxes, and cold with CORDON_NO_WARM=1) beside a process per command for bwrap, srt and
`codex sandbox` where installed, and `/bin/sh -c true` and `bash -c true` with no sandbox.

Each round runs every way once, in turn (interleaved, so that drift in the machine's state falls
on all of them alike):

- latency: LATENCY runs of `true`, one after another; for `exec`, the time from writing the
  `run` request to reading its `exited` event, in one `exec` session; for the others, a whole
  process from Python's `subprocess.run`. The round's figure is the median of its runs.
- throughput: N runs with IN_FLIGHT going at any moment (for `exec` a new `run` each time one
  reports `exited`; for the others, IN_FLIGHT threads starting processes). Commands per second.
  For `exec`, also the CPU its own process used per command meanwhile (from /proc; the
  sandboxes' and commands' processes are not in it; counted in clock ticks, so fine only over
  hundreds of commands).

Every run must exit 0. Prints, for each way, the median over the rounds and the lowest and
highest round. The scratch directory (the writable working directory) is made under /var/tmp:
under /tmp, cordon's warm sandbox steps aside (/tmp is each command's own). Results go in
docs/BENCHMARKS.md.

    cargo build --profile dist -p cordon
    python3 scripts/bench-exec.py --cordon target/dist/cordon --rounds 5

With --tree DIRS the working directory is a git repository with that many directories, as a
project's is: what each run costs for the size of the tree (its search for git metadata)
shows there and not in an empty directory.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import execsession
from benchtree import make_tree


def replace_bashrc(cwd):
    """What an editor's save does to a protected file: a new file renamed over the old one.
    A warm sandbox whose view covered the old one must be built again for the next command."""
    new = os.path.join(cwd, ".bashrc.new")
    with open(new, "w") as f:
        f.write("# edited\n")
    os.rename(new, os.path.join(cwd, ".bashrc"))


class Exec:
    """One `cordon exec --jsonl --mode yolo` session; `before` runs before each command."""

    def __init__(self, cordon, cwd, env, before=None):
        self.before = before or (lambda: None)
        self.proc = execsession.start(cordon, cwd, env)
        self.sent = 0

    def send(self):
        execsession.send(self.proc, self.sent)
        self.sent += 1

    def exited(self):
        return execsession.exited(self.proc)

    def latency(self, runs):
        times = []
        for _ in range(runs):
            self.before()
            start = time.perf_counter()
            self.send()
            self.exited()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def throughput(self, n, in_flight):
        start = time.perf_counter()
        sent_here = 0
        for _ in range(min(in_flight, n)):
            self.send()
            sent_here += 1
        for done in range(1, n + 1):
            self.exited()
            if sent_here < n:
                self.send()
                sent_here += 1
        return n / (time.perf_counter() - start)

    def own_cpu(self):
        """Seconds of CPU `cordon exec`'s own process (all its threads, not the sandboxes' or
        commands' processes) has used so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class Sustained(Exec):
    """Warm commands always going side by side for long: the rate over the last `n` of
    `before + n` runs, IN_FLIGHT in flight throughout. What each run leaves in cordon's guard
    journal while others overlap it shows here, if it piles up; a short burst hides it."""

    def __init__(self, cordon, cwd, env, before):
        super().__init__(cordon, cwd, env)
        self.first = before

    def latency(self, runs):
        return None

    def throughput(self, n, in_flight):
        total = self.first + n
        for _ in range(min(in_flight, total)):
            self.send()
        start = None
        for done in range(1, total + 1):
            self.exited()
            if done == self.first:
                start = time.perf_counter()
            if self.sent < total:
                self.send()
        return n / (time.perf_counter() - start)


class Processes:
    """A process per command: PREFIX + SHELL -c true (SHELL: /bin/sh, or bash as cordon starts
    it for a command line)."""

    def __init__(self, prefix, cwd, env, shell=("/bin/sh",)):
        self.argv = prefix + list(shell) + ["-c", "true"]
        self.cwd = cwd
        self.env = env
        self.failed = 0

    def one(self, check=True):
        done = subprocess.run(self.argv, cwd=self.cwd, env=self.env, check=check,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if done.returncode != 0:
            self.failed += 1

    def latency(self, runs):
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            self.one()
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    def throughput(self, n, in_flight):
        start = time.perf_counter()
        # Side by side, a peer's run may fail where one alone does not (srt's proxies):
        # counted and reported, not fatal; the rate counts only the runs that exited 0.
        with concurrent.futures.ThreadPoolExecutor(in_flight) as pool:
            for f in [pool.submit(self.one, False) for _ in range(n)]:
                f.result()
        return (n - self.failed) / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cordon", action="append",
                   help="a cordon binary (repeatable, to compare builds in one run) "
                        "[default: target/dist/cordon]")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("-n", type=int, default=500, help="runs per throughput measurement")
    p.add_argument("--latency", type=int, default=200, help="runs per latency measurement")
    p.add_argument("--in-flight", type=int, default=16)
    p.add_argument("--rebuild", action="store_true",
                   help="also time warm commands when the host replaces a protected .bashrc "
                        "before each (the sandbox is built again each time)")
    p.add_argument("--sustained", type=int, default=0, metavar="BEFORE",
                   help="also time warm throughput over the N runs that come after BEFORE runs "
                        "with IN_FLIGHT always going")
    p.add_argument("--tree", type=int, default=0, metavar="DIRS",
                   help="run every way in a git repository with DIRS directories of eight files "
                        "each, not an empty directory")
    p.add_argument("--peer-runs", type=int, default=20,
                   help="runs per measurement for srt and codex, which take 0.1-0.5 s each")
    args = p.parse_args()
    cordons = [os.path.realpath(c) for c in args.cordon or ["target/dist/cordon"]]
    scratch = tempfile.mkdtemp(prefix="cordon-bench-exec-", dir="/var/tmp")
    cwd = os.path.join(scratch, "work")
    os.mkdir(cwd)
    if args.tree:
        make_tree(cwd, args.tree)
    os.mkdir(os.path.join(scratch, "tmp"))
    env = dict(os.environ, TMPDIR=os.path.join(scratch, "tmp"))
    cold_env = dict(env, CORDON_NO_WARM="1")

    ways = []  # (name, make(), runs for latency, runs for throughput)
    for cordon in cordons:
        name = "cordon exec" if len(cordons) == 1 else f"{cordon} exec"
        ways.append((f"{name}, warm", lambda c=cordon: Exec(c, cwd, env), args.latency, args.n))
        ways.append((f"{name}, cold (CORDON_NO_WARM=1)", lambda c=cordon: Exec(c, cwd, cold_env),
                     args.latency, args.n))
        if args.sustained:
            ways.append((f"{name}, warm, after {args.sustained} side by side",
                         lambda c=cordon: Sustained(c, cwd, env, args.sustained), 0, args.n))
        if args.rebuild:
            edited = os.path.join(scratch, "edited")
            os.makedirs(edited, exist_ok=True)
            replace_bashrc(edited)
            ways.append((f"{name}, warm, .bashrc replaced before each",
                         lambda c=cordon: Exec(c, edited, env, lambda: replace_bashrc(edited)),
                         args.latency, args.n))
    ways.append(("bwrap --unshare-all, a process each",
                 lambda: Processes(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                                    "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                                    "--bind", cwd, cwd, "--chdir", cwd], cwd, env),
                 args.latency, args.n))
    skipped = []
    if shutil.which("srt"):
        settings = os.path.join(scratch, "srt-settings.json")
        with open(settings, "w") as f:
            json.dump({"network": {"allowedDomains": [], "deniedDomains": []},
                       "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}, f)
        ways.append(("srt, a process each", lambda: Processes(["srt", "--settings", settings, "--"], cwd, env),
                     args.peer_runs, args.peer_runs))
    else:
        skipped.append("srt: not installed (npm package @anthropic-ai/sandbox-runtime)")
    codex = os.environ.get("CORDON_CODEX") or shutil.which("codex")
    if codex:
        ways.append(("codex sandbox, a process each", lambda: Processes(
            [codex, "sandbox", "-c", "sandbox_mode=workspace-write",
             "-c", "sandbox_workspace_write.network_access=false", "--"], cwd, env),
            args.peer_runs, args.peer_runs))
    else:
        skipped.append("codex: not installed (npm package @openai/codex)")
    ways.append(("/bin/sh -c true, no sandbox", lambda: Processes([], cwd, env), args.latency, args.n))
    # cordon runs a command line with bash (since issue 29), which starts slower than dash.
    ways.append(("bash --noprofile --norc -c true, no sandbox",
                 lambda: Processes([], cwd, env, ("/bin/bash", "--noprofile", "--norc")),
                 args.latency, args.n))

    results = {name: ([], []) for name, *_ in ways}
    own_cpu = {name: [] for name, *_ in ways}
    failures = {name: 0 for name, *_ in ways}
    try:
        for r in range(args.rounds):
            for name, make, lat_runs, thr_runs in ways:
                way = make()
                # One first, so that no way pays for a cold cache (or a warm sandbox's start).
                way.latency(1)
                results[name][0].append(way.latency(lat_runs))
                if isinstance(way, Exec):
                    cpu, sent = way.own_cpu(), way.sent
                results[name][1].append(way.throughput(thr_runs, args.in_flight))
                if isinstance(way, Exec):
                    own_cpu[name].append((way.own_cpu() - cpu) * 1000 / (way.sent - sent))
                    way.close()
                else:
                    failures[name] += way.failed
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    where = f"a git repository of {args.tree} directories" if args.tree else "an empty directory"
    print(f"{args.rounds} rounds in {where}; latency: median of each round's runs, one after "
          f"another; throughput: {args.in_flight} in flight")
    print(f"{'way':45} {'latency p50 ms (rounds: low-high)':>36} {'commands/s (low-high)':>24}")
    for name, (lat, thr) in results.items():
        ms = [x * 1000 for x in lat if x is not None]
        shown = f"{statistics.median(ms):>13.2f} ({min(ms):.2f}-{max(ms):.2f})" if ms else f"{'-':>25}"
        print(f"{name:45} {shown}{'':>9} {statistics.median(thr):>8.0f} ({min(thr):.0f}-{max(thr):.0f})")
    print("CPU of `cordon exec`'s own process per command in the throughput runs, ms "
          "(rounds: low-high):")
    for name, cpu in own_cpu.items():
        if cpu:
            print(f"  {name:45} {statistics.median(cpu):.3f} ({min(cpu):.3f}-{max(cpu):.3f})")
    for name, count in failures.items():
        if count:
            print(f"{name}: {count} runs side by side failed (left out of its rate)")
    for s in skipped:
        print(f"skipped: {s}")


if __name__ == "__main__":
    main()
