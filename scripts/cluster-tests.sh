#!/usr/bin/env bash
# The cluster tests (crates/cordon/tests/cluster.rs) against a real Kubernetes on this machine:
# the 1.20 that ../shared/k8s/test-cluster builds from Debian's archive (once, into $W; 5 to
# 15 minutes the first time) and runs on 127.0.0.1, started twice:
#
#   1. API server only (pods never start): permission errors with a user who has no rights,
#      a wait bounded by --timeout, and every --dry-run manifest applied with kubectl;
#   2. with a kubelet (pods run): runs end to end with --k8s-kind pod, SIGTERM mid-run, and
#      `cordon mcp` from an image with this cordon in it.
#
# agent-sandbox's CRDs are installed in both, but its controller cannot be built here, so
# Sandbox objects never get a pod: the runs use plain pods. While the cluster runs, this
# machine's docker0 bridge is gone (see stop below).
#
#     scripts/cluster-tests.sh          # W=/var/tmp/k8s-test by default
set -euo pipefail
cd "$(dirname "$0")/.."
export W=${W:-/var/tmp/k8s-test}
tc=
for d in ${CORDON_K8S_CRDS:+"$CORDON_K8S_CRDS"} "$PWD/../shared/k8s" /work/shared/k8s; do
  if [ -f "$d/test-cluster/start-k8s-1.20.sh" ]; then
    crds=$d
    tc=$d/test-cluster
    break
  fi
done
[ -n "$tc" ] || { echo "cluster-tests: no ../shared/k8s/test-cluster beside the project" >&2; exit 1; }
command -v kubectl >/dev/null || { echo "cluster-tests: needs kubectl" >&2; exit 1; }

if [ ! -x "$W/bin/kubelet" ]; then
  # The build script finds Debian's archive in the apt sources and fails (set -e, pipefail)
  # where /etc/apt/sources.list is missing, as on machines that have only deb822 sources.
  [ -e /etc/apt/sources.list ] || touch /etc/apt/sources.list
  echo "== building Kubernetes 1.20 into $W (once)"
  bash "$tc/build-k8s-1.20.sh" > "$W.build.log" 2>&1 || {
    tail -30 "$W.build.log" >&2
    exit 1
  }
fi

# The cluster's own dockerd runs with --bridge=none, and a dockerd started so removes this
# machine's docker0 bridge, without which the machine's own dockerd cannot start a container.
# While the cluster runs it is gone; when the cluster stops it is put back as it was.
bridge=$(ip -4 -o addr show dev docker0 2>/dev/null | awk '{print $4; exit}')
stop() {
  bash "$tc/stop-k8s-1.20.sh" >/dev/null 2>&1 || true
  rm -rf "$W/run" 2>/dev/null || true
  if [ -n "$bridge" ] && ! ip link show docker0 >/dev/null 2>&1; then
    ip link add docker0 type bridge && ip addr add "$bridge" dev docker0 && ip link set docker0 up ||
      echo "cluster-tests: could not put docker0 back ($bridge): restart dockerd" >&2
  fi
}
trap stop EXIT
cargo build -p cordon --locked -q
cargo test -p cordon --test cluster --locked --no-run -q 2>/dev/null

# Runs the cluster tests with "$@" in their environment; fails unless the summary says so.
run_tests() {
  local want=$1 out
  shift
  out=$(env "$@" CORDON_TEST_KUBECONFIG="$W/run/admin.kubeconfig" \
    CORDON_TEST_K8S_LIMITED_KUBECONFIG="$W/run/limited.kubeconfig" CORDON_TEST_K8S_KIND=pod \
    cargo test -p cordon --test cluster --locked 2>&1) || {
    echo "$out" >&2
    return 1
  }
  echo "$out" | grep -E '^test |test result'
  grep -qE "test result: ok\. $want" <<<"$out" || {
    echo "$out" >&2
    echo "cluster-tests: expected \"$want\" in the summary" >&2
    return 1
  }
}

start() {
  stop
  MODE=$1 bash "$tc/start-k8s-1.20.sh" > "$W.start.log" 2>&1 || {
    tail -30 "$W.start.log" >&2
    return 1
  }
  # Its schemas' CEL rules are newer than 1.20, which drops them (--validate=false).
  kubectl --kubeconfig "$W/run/admin.kubeconfig" create --validate=false -f "$crds" >/dev/null
  kubectl --kubeconfig "$W/run/admin.kubeconfig" version 2>/dev/null | sed "s/^/   /" || true
}

echo "== the API server alone: errors, permissions, bounded waits, manifests"
start apiserver
# The two that need running pods, and the one that needs a cordon image, are ignored here.
run_tests "4 passed; 0 failed; 3 ignored" CORDON_TEST_K8S_PODS_RUN=0

echo "== with a kubelet: runs end to end"
start full
# An image with this cordon in it, for `cordon mcp --backend kubernetes`: the binary, bash
# (cordon runs shell commands only with bash), the libraries both load, and busybox for the
# pod's other tools.
img=$(mktemp -d -p /var/tmp cordon-image.XXXXXX)
mkdir -p "$img/usr/local/bin" "$img/bin" "$img/tmp"
cp /bin/busybox "$img/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$img/bin/$a"; done
cp target/debug/cordon "$img/usr/local/bin/cordon"
cp /bin/bash "$img/bin/bash"
for lib in $(ldd target/debug/cordon /bin/bash | grep -oE '/[^ ]+\.so[^ ]*' | sort -u); do
  mkdir -p "$img$(dirname "$lib")"
  cp -L "$lib" "$img$lib"
done
chmod 1777 "$img/tmp"
tar -C "$img" -c . | docker -H "unix://$W/run/docker.sock" import - cordon-test:1 >/dev/null
rm -rf "$img"
run_tests "7 passed; 0 failed; 0 ignored" CORDON_TEST_K8S_CORDON_IMAGE=cordon-test:1
