#!/usr/bin/env bash
# Whole-process start-up cost of a sandboxed command: `cordon run -- true` against plain `true`,
# bubblewrap with comparable isolation and, where installed, the sandboxes of other coding agents:
# Anthropic's sandbox-runtime (`srt`) and OpenAI's Codex (`codex sandbox`). All are measured in
# one hyperfine run so the figures share the machine's state. Every sandbox runs `true` with no
# network, its working directory writable and the rest of the file system read-only.
#
# Needs hyperfine and bubblewrap (Debian: apt-get install hyperfine bubblewrap). The peers are
# optional and only measured here, never project dependencies:
#   npm install -g @anthropic-ai/sandbox-runtime @openai/codex
#   apt-get install ripgrep socat     # srt refuses to start without them
# CORDON=/path/to/cordon times that binary instead of building one; CORDON_STATIC=/path times a
# statically linked build beside it (see docs/BENCHMARKS.md for the command that makes one); RUNS
# sets hyperfine's run count and further arguments go to hyperfine. Results go in
# docs/BENCHMARKS.md.
set -euo pipefail

# Both made absolute before the cd below, so paths given relative to the caller still work.
static_build="${CORDON_STATIC:+$(realpath "$CORDON_STATIC")}"
if [[ -n "${CORDON:-}" ]]; then
  [[ -x "$CORDON" ]] || { echo "CORDON=$CORDON is not an executable file" >&2; exit 1; }
  cordon="$(realpath "$CORDON")"
  cd "$(dirname "$0")/.."
else
  cd "$(dirname "$0")/.."
  cargo build --profile dist -p cordon >/dev/null
  cordon="$PWD/target/dist/cordon"
fi

# The sandboxed commands run in $work, the one directory they may write. The rest of $scratch is
# a host directory outside it, where the confinement check below tries to write.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
work="$scratch/work"
mkdir "$work" "$scratch/tmp"
cd "$work"
# srt (0.0.78) leaves a socket file in $TMPDIR after every run; keep those in $scratch, which goes away on
# exit, rather than piling hundreds into /tmp. cordon sets its own TMPDIR inside, bwrap and codex
# (told to exclude it below) ignore it.
export TMPDIR="$scratch/tmp"

# Each sandbox is a command prefix that runs the command after it. names[i] labels prefixes[i].
names=() prefixes=() skipped=()
add() { names+=("$1"); prefixes+=("$2"); }

add "cordon run -- true" "$cordon run --"
if [[ -n "$static_build" ]]; then
  add "cordon run -- true (static build)" "$static_build run --"
fi
add "bwrap --unshare-all (ro root, dev, proc, tmp, workdir)" \
  "bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind $work $work --chdir $work"

if command -v srt >/dev/null; then
  # srt wraps bubblewrap: a new user, PID, mount and network namespace, read-only root, writes
  # only where allowWrite says (plus a few of its own: /tmp/claude, ~/.npm/_logs). Network goes
  # only through the HTTP/SOCKS proxies it starts on the host for each command, and an empty
  # allowedDomains makes them refuse everything. The settings file sits outside $work so the
  # sandboxed command cannot rewrite it.
  cat >"$scratch/srt-settings.json" <<'EOF'
{
  "network": { "allowedDomains": [], "deniedDomains": [] },
  "filesystem": { "denyRead": [], "allowWrite": ["."], "denyWrite": [] }
}
EOF
  add "srt (sandbox-runtime: bwrap, proxies, no domains, workdir)" \
    "srt --settings $scratch/srt-settings.json --"
else
  skipped+=("srt: not installed (npm package @anthropic-ai/sandbox-runtime)")
fi

if command -v codex >/dev/null; then
  # `codex sandbox` (0.169) alone is read-only everywhere; workspace-write makes the working directory
  # writable but by default also /tmp and $TMPDIR, which the two excludes take back so it matches
  # the others. network_access=false is the default, spelled out so a user's
  # ~/.codex/config.toml cannot turn it on. The mode is left unquoted: codex takes a value that
  # is not TOML as a plain string, and quotes would read differently to bash and to hyperfine.
  add "codex sandbox (workspace-write, no network, no /tmp)" \
    "codex sandbox -c sandbox_mode=workspace-write -c sandbox_workspace_write.network_access=false -c sandbox_workspace_write.exclude_slash_tmp=true -c sandbox_workspace_write.exclude_tmpdir_env_var=true --"
else
  skipped+=("codex: not installed (npm package @openai/codex)")
fi

if ((${#skipped[@]})); then
  # On stdout, so a saved copy of the results says which peers are missing from it.
  printf 'Skipped peers:\n'
  printf '  %s\n' "${skipped[@]}"
fi

# Run each sandbox once with `true` exactly as it will be timed, so a broken one fails loudly here
# instead of being timed while it errors. Then check that its confinement applies: a file made in
# the working directory shows up on the host, one made in a host directory outside it does not
# (inside, that write may fail, or land in a private /tmp), and the only network interface inside
# is loopback.
probe='touch in-workdir; touch "$1/outside" 2>/dev/null; [ "$(grep -c : /proc/net/dev)" = 1 ]'
for i in "${!names[@]}"; do
  # The prefixes are word-split on purpose, as hyperfine splits them; no path here has spaces.
  ${prefixes[i]} true
  if ! ${prefixes[i]} sh -c "$probe" sh "$scratch" || [[ ! -e in-workdir || -e $scratch/outside ]]; then
    echo "${names[i]}: confinement check failed (workdir not writable, a write outside it" \
      "landed on the host, or a network interface besides loopback)" >&2
    exit 1
  fi
  rm -f in-workdir
done

args=(--command-name "true" "true")
for i in "${!names[@]}"; do
  args+=(--command-name "${names[i]}" "${prefixes[i]} true")
done
hyperfine -N --warmup 10 --runs "${RUNS:-200}" "${args[@]}" "$@"
