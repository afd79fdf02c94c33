#!/usr/bin/env python3
"""What the `connect` supervisor costs: inside `cordon run`, a loop of loopback connects
(blocking TCP, non-blocking TCP, and a Unix socket the command binds in its TMPDIR), each
accepted and closed, with and without `--allow-unix-socket` (only with it does PID 1 settle
every `connect`), and with it and without namespaces (there the fallback's supervisor finds
the command's own socket by scanning its processes' descriptors). The two runs alternate, round after round; prints the median (and range) of microseconds per
connect and accept of each kind.

    scripts/bench-unix-connect.py [--cordon PATH] [--rounds N] [--connects N]

Works under /var/tmp (not /tmp: the sandbox has a private /tmp) and removes it at the end.
"""
import argparse
import os
import socket
import statistics
import subprocess
import tempfile

INNER = r'''
import os, socket, sys, time
n = int(sys.argv[1])
kinds = []
try:
    tcp = socket.socket()
    tcp.bind(('127.0.0.1', 0))
    tcp.listen(4096)
    kinds.append(('tcp blocking', socket.AF_INET, tcp.getsockname(), True, tcp))
    kinds.append(('tcp non-blocking', socket.AF_INET, tcp.getsockname(), False, tcp))
except OSError:
    pass
try:
    unix = socket.socket(socket.AF_UNIX)
    path = os.path.join(os.environ['TMPDIR'], 'bench.sock')
    unix.bind(path)
    unix.listen(4096)
    kinds.append(('unix in TMPDIR', socket.AF_UNIX, path, True, unix))
except OSError:
    pass
for name, family, address, blocking, server in kinds:
    start = time.perf_counter()
    for _ in range(n):
        c = socket.socket(family)
        c.setblocking(blocking)
        try:
            c.connect(address)
        except BlockingIOError:
            pass
        server.accept()[0].close()
        c.close()
    print('%s\t%.1f' % (name, (time.perf_counter() - start) / n * 1e6))
'''


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cordon", default="target/dist/cordon")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--connects", type=int, default=2000)
    args = parser.parse_args()
    cordon = os.path.abspath(args.cordon)
    with tempfile.TemporaryDirectory(prefix="cordon-bench-", dir="/var/tmp") as ws:
        inner = os.path.join(ws, "inner.py")
        with open(inner, "w") as f:
            f.write(INNER)
        agent = socket.socket(socket.AF_UNIX)
        agent.bind(os.path.join(ws, "agent.sock"))
        agent.listen()
        allow = ["--allow-unix-socket", os.path.join(ws, "agent.sock")]
        runs = {
            "no Unix socket allowed": ([], {}),
            "--allow-unix-socket (supervised)": (allow, {}),
            "without namespaces, supervised": (allow, {"CORDON_SANDBOX_LANDLOCK_ONLY": "1"}),
        }
        results = {label: {} for label in runs}
        for _ in range(args.rounds):
            for label, (flags, env) in runs.items():
                out = subprocess.run(
                    [cordon, "run", *flags, "--", "python3", inner, str(args.connects)],
                    cwd=ws, capture_output=True, text=True, check=True,
                    env={**os.environ, **env},
                ).stdout
                for line in out.splitlines():
                    name, micros = line.split("\t")
                    results[label].setdefault(name, []).append(float(micros))
        for label, kinds in results.items():
            for name, values in kinds.items():
                print(
                    f"{label:34} {name:18} {statistics.median(values):7.1f} us"
                    f"  (range {min(values):.1f}-{max(values):.1f}, {len(values)} rounds)"
                )


if __name__ == "__main__":
    main()
