#!/usr/bin/env bash
# Builds the binaries of the local test cluster (see "The local cluster" in
# docs/design.md) into _output/cluster-bin/, and reuses them while nothing they
# are built from has changed:
#
#   kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl
#       k8s.io/kubernetes/cmd/..., pinned by test/go.mod + go.sum
#   etcd
#       go.etcd.io/etcd/server/v3 (etcd's own main), pinned by
#       test/cluster/etcd/go.mod + go.sum
#   fake-runtime
#       test/cluster/cmd/fake-runtime, from its sources in the test module
#   helm
#       helm.sh/helm/v4/cmd/helm, pinned by test/cluster/helm/go.mod + go.sum
#       (the chart tests lint and render deployments/helm/tessera with it)
#   containerd containerd-shim-runc-v2 ctr runc cni/bridge cni/host-local
#   cni/loopback
#       the containerd nodes' runtime (github.com/containerd/containerd/v2,
#       github.com/opencontainers/runc, github.com/containernetworking/plugins),
#       pinned by test/cluster/runtime/go.mod + go.sum; runc is the one cgo
#       build (its nsenter is C), with seccomp (containerd gives every
#       sandbox a seccomp profile): it needs gcc and libseccomp-dev
#   oci-image
#       test/cluster/runtime/cmd/oci-image, which builds the containerd
#       nodes' images from these binaries, from its sources
#   probe pause
#       test/cluster/cmd/{probe,pause}, the workload and sandbox programs of
#       those images, from their sources in the test module
#
# Each binary has a stamp (_output/cluster-bin/.stamps/NAME) recording the
# hashes of its pins, of this script, of `go version` and, for the programs
# built from this repository (fake-runtime, probe, pause, oci-image), of
# their sources. A binary is rebuilt when it is missing or its stamp
# differs, and the script says why. A cold build takes about 20 minutes on
# 2 cores (helm alone about 4.5, from an empty build cache), the runtime
# about 5 more; a warm run, under a second.
#
# Usage: hack/build-cluster-bins.sh [--check] [--force] [NAME...]
#   --check   build nothing; exit 0 when every binary (or each NAME) is up
#             to date, 1 otherwise, saying why
#   --force   rebuild even what is up to date
#   NAME...   only these binaries (default: all)
#
# Environment: CLUSTER_BIN_DIR (default _output/cluster-bin), GO (default
# go), BUILD_PARALLELISM (go build -p, default 2).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCRIPT="$ROOT/hack/build-cluster-bins.sh"
MOD="$ROOT/test"
ETCD_MOD="$MOD/cluster/etcd"
HELM_MOD="$MOD/cluster/helm"
RT_MOD="$MOD/cluster/runtime"
OUT=${CLUSTER_BIN_DIR:-$ROOT/_output/cluster-bin}
GO=${GO:-go}
PAR=${BUILD_PARALLELISM:-2}

KUBE_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
RT_BINS=(containerd containerd-shim-runc-v2 ctr runc cni/bridge cni/host-local cni/loopback oci-image)
ALL_BINS=(etcd "${KUBE_BINS[@]}" fake-runtime helm probe pause "${RT_BINS[@]}")

check=0
force=0
want=()
for arg in "$@"; do
	case "$arg" in
	--check) check=1 ;;
	--force) force=1 ;;
	-h | --help)
		sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$SCRIPT"
		exit 0
		;;
	-*)
		echo "unknown flag $arg (see --help)" >&2
		exit 2
		;;
	*)
		case " ${ALL_BINS[*]} " in
		*" $arg "*) want+=("$arg") ;;
		*)
			echo "unknown binary $arg; known: ${ALL_BINS[*]}" >&2
			exit 2
			;;
		esac
		;;
	esac
done
[[ ${#want[@]} -gt 0 ]] || want=("${ALL_BINS[@]}")

hash_file() { sha256sum "$1" | cut -c1-64; }

# hash_sources DIR PKG: the Go files of this repository that PKG (of the
# module in DIR) is built from (names and contents), as the go command lists
# them: the module's own and those of modules replaced by a local directory
# (the product module, whose packages the probe imports); "unlistable" when
# it cannot (which never matches a stamp).
hash_sources() {
	local dir=$1 pkg=$2 files
	# shellcheck disable=SC2016 # a Go template, not shell
	if ! files=$(cd "$dir" && GOWORK=off "$GO" list -deps \
		-f '{{if and .Module (or .Module.Main (and .Module.Replace (not .Module.Replace.Version)))}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}' \
		"$pkg" 2>/dev/null); then
		echo unlistable
		return
	fi
	(cd "$dir" && LC_ALL=C sort <<<"${files//"$dir/"/}" | xargs sha256sum) | sha256sum | cut -c1-64
}

# source_pkg NAME: "DIR PKG" of a binary built from this repository's
# sources (stamped with their hash); nothing for the others.
source_pkg() {
	case "$1" in
	fake-runtime | probe | pause) echo "$MOD ./cluster/cmd/$1" ;;
	oci-image) echo "$RT_MOD ./cmd/oci-image" ;;
	esac
}

is_runtime() { case " ${RT_BINS[*]} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

GO_VERSION=$("$GO" version)
SCRIPT_HASH=$(hash_file "$SCRIPT")

# stamp NAME: the key the binary NAME must have been built with, one
# "what=value" line each.
stamp() {
	case "$1" in
	etcd)
		printf 'etcd/go.mod=%s\netcd/go.sum=%s\n' "$(hash_file "$ETCD_MOD/go.mod")" "$(hash_file "$ETCD_MOD/go.sum")"
		;;
	helm)
		printf 'helm/go.mod=%s\nhelm/go.sum=%s\n' "$(hash_file "$HELM_MOD/go.mod")" "$(hash_file "$HELM_MOD/go.sum")"
		;;
	*)
		if is_runtime "$1"; then
			printf 'runtime/go.mod=%s\nruntime/go.sum=%s\n' "$(hash_file "$RT_MOD/go.mod")" "$(hash_file "$RT_MOD/go.sum")"
		else
			printf 'go.mod=%s\ngo.sum=%s\n' "$(hash_file "$MOD/go.mod")" "$(hash_file "$MOD/go.sum")"
		fi
		;;
	esac
	local src
	src=$(source_pkg "$1")
	# shellcheck disable=SC2086 # two words: DIR PKG
	[[ -z $src ]] || printf 'sources=%s\n' "$(hash_sources $src)"
	printf 'script=%s\ngo=%s\n' "$SCRIPT_HASH" "$GO_VERSION"
}

# why_stale NAME: prints why NAME must be built; nothing when it is fresh.
why_stale() {
	local name=$1 bin="$OUT/$1" st="$OUT/.stamps/${1//\//-}"
	if [[ ! -x $bin ]]; then
		echo "not cached"
		return
	fi
	if [[ ! -f $st ]]; then
		echo "no stamp"
		return
	fi
	local want have reasons=() line key
	want=$(stamp "$name")
	have=$(cat "$st")
	[[ $want != "$have" ]] || return 0
	while IFS= read -r line; do
		key=${line%%=*}
		if ! grep -qxF -- "$line" <<<"$have"; then
			case "$key" in
			go.mod | go.sum | */go.mod | */go.sum) reasons+=("pins changed: $key hash differs") ;;
			sources) reasons+=("sources changed") ;;
			script) reasons+=("build script changed") ;;
			go) reasons+=("go version changed (now: ${line#go=})") ;;
			*) reasons+=("$key differs") ;;
			esac
		fi
	done <<<"$want"
	[[ ${#reasons[@]} -gt 0 ]] || reasons=("stamp differs")
	local out="" r
	for r in "${reasons[@]}"; do out+="${out:+; }$r"; done
	echo "$out"
}

stale=()
for name in "${want[@]}"; do
	reason=$(why_stale "$name")
	if [[ -n $reason ]]; then
		echo "$name: $reason"
		stale+=("$name")
	elif [[ $force == 1 ]]; then
		echo "$name: up to date, rebuilding (--force)"
		stale+=("$name")
	else
		echo "$name: up to date"
	fi
done

if [[ $check == 1 ]]; then
	[[ ${#stale[@]} -eq 0 ]] && exit 0 || exit 1
fi
[[ ${#stale[@]} -gt 0 ]] || exit 0

mkdir -p "$OUT/.stamps"
# One build at a time into $OUT.
exec 9>"$OUT/.lock"
if command -v flock >/dev/null; then flock 9; fi

export GOWORK=off GOFLAGS="${GOFLAGS:-} -buildvcs=false"

# Versions come from the module graph, so the pins live only in go.mod.

# mod_version DIR MODULE: the version of MODULE that the module in DIR uses.
mod_version() { (cd "$1" && "$GO" list -m -f '{{.Version}}' "$2"); }

kube_ldflags() {
	local v t major minor rest
	read -r v t < <(cd "$MOD" && "$GO" list -m -f '{{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
	major=${v#v}
	major=${major%%.*}
	rest=${v#v*.}
	minor=${rest%%.*}
	local flags="-s -w" pkg
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
		flags+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit= -X $pkg.buildDate=$t"
	done
	echo "$flags"
}

etcd_ldflags() {
	local v
	v=$(mod_version "$ETCD_MOD" go.etcd.io/etcd/server/v3)
	# etcd's version is a constant of go.etcd.io/etcd/api/v3/version; only
	# the git SHA is set at build time.
	echo "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=go.etcd.io/etcd/server/v3@$v"
}

helm_ldflags() {
	local v
	v=$(mod_version "$HELM_MOD" helm.sh/helm/v4)
	# What helm's own Makefile sets from its git tag.
	echo "-s -w -X helm.sh/helm/v4/internal/version.version=$v -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
}

KUBE_LDFLAGS=
total_start=$SECONDS
for name in "${stale[@]}"; do
	cgo=0 tags=
	case "$name" in
	etcd)
		dir=$ETCD_MOD pkg=go.etcd.io/etcd/server/v3 ldflags=$(etcd_ldflags)
		;;
	fake-runtime | probe | pause | oci-image)
		read -r dir pkg < <(source_pkg "$name")
		ldflags="-s -w"
		;;
	containerd | containerd-shim-runc-v2 | ctr)
		dir=$RT_MOD pkg=github.com/containerd/containerd/v2/cmd/$name
		ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$(mod_version "$RT_MOD" github.com/containerd/containerd/v2)"
		;;
	runc)
		dir=$RT_MOD pkg=github.com/opencontainers/runc cgo=1 tags=seccomp
		ldflags="-s -w -X main.version=$(mod_version "$RT_MOD" github.com/opencontainers/runc)"
		;;
	cni/bridge | cni/loopback)
		dir=$RT_MOD pkg=github.com/containernetworking/plugins/plugins/main/${name#cni/} ldflags="-s -w"
		;;
	cni/host-local)
		dir=$RT_MOD pkg=github.com/containernetworking/plugins/plugins/ipam/host-local ldflags="-s -w"
		;;
	helm)
		dir=$HELM_MOD pkg=helm.sh/helm/v4/cmd/helm ldflags=$(helm_ldflags)
		;;
	*)
		[[ -n $KUBE_LDFLAGS ]] || KUBE_LDFLAGS=$(kube_ldflags)
		dir=$MOD pkg=k8s.io/kubernetes/cmd/$name ldflags=$KUBE_LDFLAGS
		;;
	esac
	echo "building $name ($pkg)"
	start=$SECONDS
	st="$OUT/.stamps/${name//\//-}"
	rm -f "$st"
	mkdir -p "$(dirname "$OUT/$name")"
	# Static, like upstream's release builds of all of these but the
	# kubelet, which also builds and runs without cgo, and runc.
	(cd "$dir" && CGO_ENABLED=$cgo "$GO" build -p "$PAR" -trimpath -tags "$tags" -ldflags "$ldflags" -o "$OUT/$name.tmp" "$pkg")
	mv -f "$OUT/$name.tmp" "$OUT/$name"
	stamp "$name" >"$st"
	echo "built $name in $((SECONDS - start))s ($(du -h "$OUT/$name" | cut -f1))"
done
echo "done in $((SECONDS - total_start))s: $OUT"
