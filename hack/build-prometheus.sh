#!/usr/bin/env bash
# Builds Prometheus's promtool and server, of test/cluster/prometheus's pin
# of github.com/prometheus/prometheus, from the Go module proxy into
# _output/cluster-bin/: promtool for the chart's rules and dashboard tests
# (test/chart: `promtool check rules`, `promtool test rules`), the server
# for the end-to-end test that scrapes every agent of the local cluster
# (test/e2e/prometheus_test.go).
#
# Reused while test/cluster/prometheus/go.mod and go.sum, this script and
# `go version` are the same (about 6 minutes on 2 cores otherwise: both
# link most of the Prometheus server).
#
# Usage: hack/build-prometheus.sh [--check]
# Environment: PROMETHEUS_DIR, GO, BUILD_PARALLELISM.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD=$ROOT/test/cluster/prometheus
OUT=${PROMETHEUS_DIR:-$ROOT/_output/cluster-bin}
GO=${GO:-go}
STAMP=$OUT/prometheus.stamp

want="$(cd "$MOD" && sha256sum go.mod go.sum)
script=$(sha256sum <"${BASH_SOURCE[0]}")
go=$("$GO" version)"
if [[ -x $OUT/promtool && -x $OUT/prometheus && "$(cat "$STAMP" 2>/dev/null)" == "$want" ]]; then
	echo "prometheus, promtool: up to date"
	exit 0
fi
[[ ${1:-} != --check ]] || { echo "prometheus, promtool: not built (make prometheus)"; exit 1; }

version=$(cd "$MOD" && GOWORK=off "$GO" list -m -f '{{.Version}}' github.com/prometheus/prometheus)
echo "building prometheus and promtool (prometheus $version) into $OUT"
start=$SECONDS
mkdir -p "$OUT"
rm -f "$STAMP"
# A cold build takes minutes on 2 cores: say what is being built, and every
# 30 s that it still is, instead of minutes of silence.
ticker=
trap '[[ -z $ticker ]] || kill "$ticker" 2>/dev/null || true' EXIT
for cmd in promtool prometheus; do
	echo "building $cmd ($version)"
	cmd_start=$SECONDS
	(while sleep 30; do echo "  $cmd: still building, $((SECONDS - cmd_start))s"; done) &
	ticker=$!
	(cd "$MOD" && CGO_ENABLED=0 GOWORK=off "$GO" build -p "${BUILD_PARALLELISM:-2}" \
		-trimpath -ldflags "-s -w" -o "$OUT/$cmd" "github.com/prometheus/prometheus/cmd/$cmd")
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	ticker=
	echo "built $cmd in $((SECONDS - cmd_start))s"
done
printf '%s\n' "$want" >"$STAMP"
echo "built prometheus and promtool (prometheus $version) in $((SECONDS - start))s"
