#!/usr/bin/env bash
# Checks, before any long build, what `make test` needs from the machine
# beyond Go: a C compiler (the race detector, runc's nsenter) and
# libseccomp's development files, found through pkg-config exactly as
# runc's seccomp build looks for them (`#cgo pkg-config: libseccomp`).
# Prints one line naming what is missing and how to install it, and exits 1;
# prints nothing and exits 0 when all is there. It never installs anything.
# `make demo` needs none of this (its nodes run the fake runtime, not runc).
set -euo pipefail

missing() {
	echo "make test needs $1; install it with: apt-get install $2" >&2
	exit 1
}

CC=${CC:-gcc}
command -v "$CC" >/dev/null || missing "a C compiler ($CC, for the race detector and runc)" "gcc libc6-dev"
command -v pkg-config >/dev/null || missing "pkg-config and libseccomp (runc, the containerd nodes' runtime, is built with seccomp)" "pkg-config libseccomp-dev"
pkg-config --exists libseccomp || missing "libseccomp (runc, the containerd nodes' runtime, is built with seccomp; pkg-config finds no libseccomp.pc)" "libseccomp-dev"
