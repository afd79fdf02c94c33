#!/usr/bin/env python3
"""Download throughput through each sandbox's way out, against a direct download, in one run:
curl fetches a file from a server on 127.0.0.1 directly, through `cordon run`'s proxy and,
where installed, through sandbox-runtime's (`srt`). Each way is fetched once per round, the
rounds interleaved so that drift in the machine's state falls on all alike; the figure is
curl's own average download speed, which leaves out each sandbox's start-up. Results go in
docs/BENCHMARKS.md.

    scripts/bench-net.py [--cordon PATH] [--rounds N] [--mib SIZE]

Two kinds of request for each proxy: a CONNECT tunnel (`curl -p`, what HTTPS takes) and a plain
HTTP request in absolute form. `--noproxy ''` makes curl use the proxy for a name that
sandbox-runtime's NO_PROXY would otherwise send direct (and so nowhere, from its sandbox).
The server sends the file with sendfile(2), so that it is not the slowest part.
"""
import argparse
import http.server
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading

NAME = "bench.test"


class Sender(http.server.BaseHTTPRequestHandler):
    """Sends the one file, whatever the path; the file is given by the server."""

    def do_GET(self):
        with open(self.server.file, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            self.wfile.flush()
            self.connection.sendfile(f)

    def log_message(self, *args):
        pass


def serve(path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sender)
    server.file = path
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cordon", action="append",
                    help="a cordon binary (repeatable, to compare builds in one run) "
                         "[default: target/dist/cordon]")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mib", type=int, default=1024)
    a = ap.parse_args()
    a.cordon = a.cordon or ["target/dist/cordon"]
    for c in a.cordon:
        if not os.access(c, os.X_OK):
            sys.exit(f"--cordon {c}: not an executable (cargo build --profile dist -p cordon)")
    if not shutil.which("curl"):
        sys.exit("curl is missing (apt-get install curl)")

    scratch = tempfile.mkdtemp()
    try:
        big = os.path.join(scratch, "big")
        with open(big, "wb") as f:
            f.truncate(a.mib << 20)  # sparse: the page cache serves zeros, no disk involved
        port = serve(big)
        curl = ["curl", "--noproxy", "", "-s", "-o", "/dev/null", "-w", "%{http_code} %{speed_download} %{size_download}"]
        url = f"http://{NAME}:{port}/big"
        ways = {"direct": curl + [f"http://127.0.0.1:{port}/big"]}
        for c in a.cordon:
            name = "cordon" if len(a.cordon) == 1 else c
            cordon = [os.path.abspath(c), "run", "--allow-domain", NAME,
                      f"--resolve={NAME}=127.0.0.1", "--allow-private-ips", "--"]
            ways[f"{name}, CONNECT"] = cordon + curl + ["-p", url]
            ways[f"{name}, plain HTTP"] = cordon + curl + [url]
        skipped = []
        if shutil.which("srt"):
            # srt's proxy resolves names itself, so it gets one that needs no resolver: localhost.
            settings = os.path.join(scratch, "srt.json")
            with open(settings, "w") as f:
                json.dump({"network": {"allowedDomains": ["localhost"], "deniedDomains": []},
                           "filesystem": {"denyRead": [], "allowWrite": ["."], "denyWrite": []}}, f)
            srt = ["srt", "--settings", settings, "--"]
            local = f"http://localhost:{port}/big"
            ways["srt, CONNECT"] = srt + curl + ["-p", local]
            ways["srt, plain HTTP"] = srt + curl + [local]
        else:
            skipped.append("srt: not installed (npm package @anthropic-ai/sandbox-runtime)")

        speeds = {w: [] for w in ways}
        # CPU seconds per GiB: the way's own processes (curl, and cordon with its proxy and
        # sandbox, each reaped by its parent, so counted in this process's children), and the
        # server's, which is this process.
        cpu = {w: [] for w in ways}
        server_cpu = {w: [] for w in ways}
        failed = {w: [] for w in ways}
        used = lambda who: (lambda r: r.ru_utime + r.ru_stime)(resource.getrusage(who))
        for _ in range(a.rounds):
            for way, argv in ways.items():
                before = used(resource.RUSAGE_CHILDREN), used(resource.RUSAGE_SELF)
                out = subprocess.run(argv, cwd=scratch, capture_output=True, text=True,
                                     env=dict(os.environ, TMPDIR=scratch), timeout=600)
                gib = a.mib / 1024
                cpu[way].append((used(resource.RUSAGE_CHILDREN) - before[0]) / gib)
                server_cpu[way].append((used(resource.RUSAGE_SELF) - before[1]) / gib)
                code, speed, size = (out.stdout.split() + ["?", "?", "?"])[:3]
                if out.returncode != 0 or code != "200" or size != str(a.mib << 20):
                    # A download cut short is not a speed; it is said, and left out.
                    failed[way].append(f"curl exit {out.returncode}, HTTP {code}, {size} bytes")
                    continue
                speeds[way].append(float(speed) / (1 << 20))
        if not speeds["direct"]:
            sys.exit(f"direct downloads failed: {failed['direct']}")
        direct = statistics.median(speeds["direct"])
        print(f"{a.mib} MiB per download, {a.rounds} rounds; median (lowest-highest) MiB/s, "
              "and median CPU seconds per GiB of the way's processes (+ the server's):")
        for way, s in speeds.items():
            if s:
                m = statistics.median(s)
                print(f"  {way:32} {m:7.0f} ({min(s):.0f}-{max(s):.0f})  {100 * m / direct:3.0f} % of direct"
                      f"  CPU {statistics.median(cpu[way]):.2f} s/GiB"
                      f" (+ {statistics.median(server_cpu[way]):.2f})")
            for f in failed[way]:
                print(f"  {way:20} failed: {f}")
        for s in skipped:
            print(f"  skipped: {s}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
