#!/usr/bin/env bash
# Builds Prometheus's promtool, which the chart's rules tests (test/chart,
# rules_test.go) run over deployments/helm/tessera/rules: `promtool check
# rules` and `promtool test rules`. The version is test/cluster/prometheus's
# pin of github.com/prometheus/prometheus, built from the Go module proxy
# into _output/cluster-bin/promtool.
#
# Reused while test/cluster/prometheus/go.mod and go.sum, this script and
# `go version` are the same (a few minutes on 2 cores otherwise: promtool
# links most of the Prometheus server).
#
# Usage: hack/build-promtool.sh [--check]
# Environment: PROMTOOL_DIR, GO, BUILD_PARALLELISM.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD=$ROOT/test/cluster/prometheus
OUT=${PROMTOOL_DIR:-$ROOT/_output/cluster-bin}
GO=${GO:-go}

want="$(cd "$MOD" && sha256sum go.mod go.sum)
script=$(sha256sum <"${BASH_SOURCE[0]}")
go=$("$GO" version)"
if [[ -x $OUT/promtool && "$(cat "$OUT/promtool.stamp" 2>/dev/null)" == "$want" ]]; then
	echo "promtool: up to date"
	exit 0
fi
[[ ${1:-} != --check ]] || { echo "promtool: not built (make promtool)"; exit 1; }

version=$(cd "$MOD" && GOWORK=off "$GO" list -m -f '{{.Version}}' github.com/prometheus/prometheus)
echo "building promtool (prometheus $version) into $OUT"
start=$SECONDS
mkdir -p "$OUT"
rm -f "$OUT/promtool.stamp"
(cd "$MOD" && CGO_ENABLED=0 GOWORK=off "$GO" build -p "${BUILD_PARALLELISM:-2}" \
	-trimpath -ldflags "-s -w" -o "$OUT/promtool" github.com/prometheus/prometheus/cmd/promtool)
printf '%s\n' "$want" >"$OUT/promtool.stamp"
echo "built promtool (prometheus $version) in $((SECONDS - start))s"
