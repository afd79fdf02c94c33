#!/usr/bin/env bash
# Whole-process start-up cost of a sandboxed command: `cordon run -- true` against plain `true`
# and bubblewrap with comparable isolation, measured in one hyperfine run so the figures share
# the machine's state. Needs hyperfine and bubblewrap (Debian: apt-get install hyperfine
# bubblewrap). Results go in docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p cordon >/dev/null
cordon="$PWD/target/release/cordon"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
bwrap_cmd="bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind $work $work --chdir $work true"
"$cordon" run -- true
$bwrap_cmd
hyperfine -N --warmup 10 --runs "${RUNS:-200}" \
  --command-name "true" "true" \
  --command-name "cordon run -- true" "$cordon run -- true" \
  --command-name "bwrap --unshare-all (ro root, dev, proc, tmp, workdir)" "$bwrap_cmd" \
  "$@"
