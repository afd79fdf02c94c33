#!/usr/bin/env bash
# Builds what ships into target/dist: `cordon` (--profile dist) and, beside it, `cordon-hook`.
#
# On Linux the hook is linked statically against musl. An agent starts its hook on every tool
# call, so the hook's start-up is what a person waits for each time; glibc spends a third of
# the hook's time asking the processor for its cache layout (one `cpuid` after another, each a
# trap under a hypervisor), musl does not. docs/BENCHMARKS.md has the figures.
#
#     bash scripts/dist.sh
#
# The musl build needs Rust's musl target and a musl C compiler (ring, under the cluster
# client, has C in it). Where either is missing, this says how to add it and keeps the glibc
# hook that `cargo build` made, which answers the same, only slower to start. A later `cargo
# build --profile dist` may put that one back in target/dist: run this again before shipping.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --profile dist -p cordon --locked
out="${CARGO_TARGET_DIR:-target}"

if [ "$(uname -s)" != Linux ]; then
  echo "dist: $out/dist/cordon and $out/dist/cordon-hook built"
  exit 0
fi

musl="$(uname -m)-unknown-linux-musl"
missing=()
rustup target list --installed 2>/dev/null | grep -qx "$musl" ||
  missing+=("Rust's $musl target (rustup target add $musl)")
command -v musl-gcc >/dev/null 2>&1 || command -v "$(uname -m)-linux-musl-gcc" >/dev/null 2>&1 ||
  missing+=("a musl C compiler (Debian and Ubuntu: apt-get install musl-tools)")
if [ "${#missing[@]}" -gt 0 ]; then
  echo "dist: warning: $out/dist/cordon-hook is linked against glibc, which starts slower; for the static musl hook install:" >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 0
fi

cargo build --profile dist -p cordon --bin cordon-hook --target "$musl" --locked
# Replaced by a rename, so that an agent starting the hook meanwhile runs one whole program.
cp "$out/$musl/dist/cordon-hook" "$out/dist/.cordon-hook.new"
mv -f "$out/dist/.cordon-hook.new" "$out/dist/cordon-hook"
echo "dist: $out/dist/cordon and $out/dist/cordon-hook (static, musl) built"
