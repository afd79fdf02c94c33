#!/usr/bin/env bash
# What `cordon run --backend docker|podman` adds to starting a container: `cordon run … -- true`
# against the bare `ENGINE run --rm IMAGE true` of the same image, and against the engine
# command cordon builds (its --dry-run output) run by hand, which separates the cost of the
# flags (mounts, --init, user mapping, no network) from cordon's own (finding the engine,
# checking the image, the clean-up watcher), all in one hyperfine run; and before that cordon's
# own share alone, with a stand-in engine.
#
# Needs hyperfine and a running engine. No registry is needed: without IMAGE, the image is made
# here from the host's static busybox (Debian: apt-get install busybox-static), as the tests do.
#
#   ENGINE=docker|podman (default docker)  IMAGE=name (default: made here)
#   CORDON=/path/to/cordon (default: a `--profile dist` build)  RUNS=n (default 30)
# Further arguments go to hyperfine. Results go in docs/BENCHMARKS.md.
set -euo pipefail

engine="${ENGINE:-docker}"
runs="${RUNS:-30}"
cd "$(dirname "$0")/.."
if [[ -n "${CORDON:-}" ]]; then
  cordon="$(realpath "$CORDON")"
else
  cargo build --profile dist -p cordon >/dev/null
  cordon="$PWD/target/dist/cordon"
fi

image="${IMAGE:-cordon-bench-busybox:1}"
if ! "$engine" image inspect "$image" >/dev/null 2>&1; then
  [[ -z "${IMAGE:-}" ]] || { echo "image $IMAGE is not present under $engine" >&2; exit 1; }
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  mkdir -p "$root"/{bin,tmp,etc,root,proc,dev,sys}
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [[ "$applet" == busybox ]] || ln -s busybox "$root/bin/$applet"
  done
  echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
  tar -C "$root" -c . | "$engine" import - "$image" >/dev/null
fi

work=$(mktemp -d)
cd "$work"
# The command cordon would run, without its per-run name (hyperfine reruns it).
flags=$("$cordon" run --backend "$engine" --image "$image" --dry-run -- true \
  | sed -E 's/ --name [^ ]+//')
echo "cordon's engine command: $flags"

# cordon's own share, without the engine's noise: the same run with a stand-in engine that
# exits at once (the image is still checked on the real daemon's socket).
mkdir stand-in
printf '#!/bin/sh\nexit 0\n' >stand-in/"$engine"
chmod +x stand-in/"$engine"
hyperfine -N --warmup 10 --runs $((runs * 5)) \
  -n "stand-in engine alone" "$work/stand-in/$engine run --rm $image true" \
  -n "cordon run with the stand-in engine" \
  "env PATH=$work/stand-in:/usr/bin:/bin $cordon run --backend $engine --image $image -- true"

hyperfine -N --warmup 3 --runs "$runs" \
  -n "bare: $engine run --rm IMAGE true" "$engine run --rm $image true" \
  -n "cordon's flags, run by hand" "$flags" \
  -n "cordon run --backend $engine --image IMAGE -- true" \
  "$cordon run --backend $engine --image $image -- true" \
  "$@"
rm -rf "$work"
