#!/usr/bin/env bash
# Builds the agent of an earlier commit, for the containerd e2e's downgrade
# test (TestDowngradeUnderChurn): tessera-kubelet-plugin and tessera-sim of
# that commit, and its Helm chart, from `git archive` of this repository,
# into _output/previous-agent/. The local containerd cluster imports them as
# the image tag "previous" (test/cluster/pkg/localcluster/images.go).
#
# The commit is the one before the agents learned to hand a node over
# (internal/handover) and to run MPS daemons as pods: the last agent an operator
# can be running when they upgrade to this one, and so the one they would
# go back to. Move it forward when a change breaks compatibility again
# (docs/operating.md, "Upgrades").
#
# Reused while the commit and `go version` are the same (about a minute
# on 2 cores otherwise: the modules are this repository's, already built).
#
# Usage: hack/build-previous-agent.sh [--check]
# Environment: PREVIOUS_AGENT_COMMIT, PREVIOUS_AGENT_DIR, GO.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
COMMIT=${PREVIOUS_AGENT_COMMIT:-baca22cebd9e7c0ed074019ae13789d58a2d0c61}
OUT=${PREVIOUS_AGENT_DIR:-$ROOT/_output/previous-agent}
GO=${GO:-go}

want="commit=$COMMIT
go=$("$GO" version)"
if [[ -x $OUT/tessera-kubelet-plugin && -x $OUT/tessera-sim && -f $OUT/chart/Chart.yaml && "$(cat "$OUT/STAMP" 2>/dev/null)" == "$want" ]]; then
	echo "previous agent ${COMMIT:0:12}: up to date"
	exit 0
fi
[[ ${1:-} != --check ]] || { echo "previous agent ${COMMIT:0:12}: not built"; exit 1; }

if ! git -C "$ROOT" cat-file -e "$COMMIT^{commit}" 2>/dev/null; then
	if [[ $(git -C "$ROOT" rev-parse --is-shallow-repository 2>/dev/null) == true ]]; then
		git -C "$ROOT" fetch --unshallow --quiet || true
	fi
	git -C "$ROOT" cat-file -e "$COMMIT^{commit}" 2>/dev/null || {
		echo "build-previous-agent: commit $COMMIT is not in this clone's history; the downgrade test builds the agent of that commit (clone without --depth, or set PREVIOUS_AGENT_COMMIT)" >&2
		exit 1
	}
fi

echo "building the agent of ${COMMIT:0:12} into $OUT"
start=$SECONDS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$ROOT" archive "$COMMIT" | tar -x -C "$tmp"
rm -rf "$OUT"
mkdir -p "$OUT"
(cd "$tmp" && GOWORK=off "$GO" build -buildvcs=false -o "$OUT/" ./cmd/tessera-kubelet-plugin ./cmd/tessera-sim)
cp -r "$tmp/deployments/helm/tessera" "$OUT/chart"
printf '%s\n' "$want" >"$OUT/STAMP"
echo "built the agent of ${COMMIT:0:12} in $((SECONDS - start))s"
