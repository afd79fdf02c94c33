#!/usr/bin/env bash
# A newcomer's first hour, timed: ROUNDS fresh clones of this checkout's HEAD, each running the
# README's two set-up commands in turn (the first answer, then the whole test suite), with the
# wall time and the size of target/ after each. Prints one line per round, then the median and
# the range. Crates come from ~/.cargo/registry as they are (download not timed).
#
#     scripts/bench-fresh-clone.sh [ROUNDS]     # default 5
set -euo pipefail
# Started as a background job of a non-interactive shell, this would inherit SIGINT and SIGQUIT
# ignored, and the tests that interrupt a run would wait for ever: start again with the
# default dispositions, as a terminal gives them.
if [ -z "${CORDON_BENCH_SIGNALS_RESET:-}" ]; then
  CORDON_BENCH_SIGNALS_RESET=1 exec env --default-signal=INT,QUIT,HUP "$0" "$@"
fi
rounds=${1:-5}
case $rounds in '' | *[!0-9]* | 0) echo "usage: $0 [ROUNDS], ROUNDS a number from 1" >&2; exit 2 ;; esac
src=$(git rev-parse --show-toplevel)
head=$(git -C "$src" rev-parse --short HEAD)
results=$(mktemp)
now() { date +%s.%N; }
for i in $(seq 1 "$rounds"); do
  # Not under /tmp: the tests' sandboxes have a private /tmp.
  dir=$(mktemp -d -p /var/tmp cordon-fresh.XXXXXX)
  git clone -q "$src" "$dir/cordon"
  cd "$dir/cordon"
  start=$(now)
  cargo run -q -p cordon -- check 'git status && rm -rf ~' >/dev/null
  first=$(now)
  first_mb=$(du -sm target | cut -f1)
  status=passed
  cargo test --workspace >"$dir/tests.log" 2>&1 || status="FAILED (log: $dir/tests.log)"
  done_at=$(now)
  all_mb=$(du -sm target | cut -f1)
  summary=$(grep -E '^test result' "$dir/tests.log" |
    awk '{p+=$4; f+=$6; ig+=$8} END {printf "%d passed, %d failed, %d ignored", p, f, ig}')
  line=$(python3 -c "import sys; s,f,d=map(float,sys.argv[1:4]); print(f'{f-s:.0f} {d-f:.0f} {d-s:.0f}')" \
    "$start" "$first" "$done_at")
  echo "$line" >>"$results"
  read -r a b c <<<"$line"
  echo "round $i ($head): first answer ${a} s (target/ ${first_mb} MB), tests ${b} s more (${all_mb} MB), clone to tests ${c} s; tests $status: $summary"
  cd /
  [ "$status" = passed ] && rm -rf "$dir"
done
python3 - "$results" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
for name, col in [("first answer", 0), ("tests after it", 1), ("clone to tests passed", 2)]:
    v = [r[col] for r in rows]
    print(f"{name}: median {statistics.median(v):.0f} s, range {min(v):.0f}-{max(v):.0f} s over {len(v)} rounds")
EOF
rm -f "$results"
