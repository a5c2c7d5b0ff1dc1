# Tessera. `make test` runs every test; `make build` puts binaries in bin/.
GO        ?= go
BIN       := bin
# The agent binary is built with cgo: the nvml backend loads libnvidia-ml.
# Everything but internal/backend/nvml and internal/memlimit/nvmllimit (go-nvml) also
# builds with CGO_ENABLED=0 (vet checks).
export CGO_ENABLED ?= 1
# go-nvml's headers use deprecated declarations; the warnings are noise.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

# The local cluster (test/ is a Go module of its own; see README).
CLUSTER_BIN := _output/cluster-bin
TEST_GO      = cd test && CGO_ENABLED=0 $(GO)
NODES       ?=
KEEP        ?=
# RUNTIME=containerd: nodes run containerd and the agents run as the chart's
# DaemonSet (cluster-up); the default, fake, is a fake CRI (see README).
RUNTIME     ?=
# WORKLOADS=1: the cluster serves the Workload API and gang-schedules pod
# groups, with pod-group claims (docs/training.md, "Gangs"); the e2e suite
# and the demo always turn it on.
WORKLOADS   ?=
# What each target builds of the cluster binaries (hack/build-cluster-bins.sh
# NAME...): a cluster of fake-runtime nodes needs the control plane, the
# kubelet, the fake runtime and helm (the webhook's configuration is the
# chart's, rendered); containerd nodes need all of them, the runtime too
# (runc: cgo and libseccomp, checked first by check-build-deps).
FAKE_BINS := etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl fake-runtime helm

# Versions (internal/version): every binary is stamped with BUILD_VERSION
# (VERSION when given, else `git describe` of the newest v* tag, else
# v0.0.0-dev-g<commit>; -dirty for a changed tree), the commit, and
# BUILD_DATE, by default the commit's time in UTC, so that building the same
# commit twice gives the same binaries and image digests.
GIT_COMMIT    := $(shell git rev-parse HEAD 2>/dev/null)
GIT_DESCRIBE  := $(shell git describe --tags --match 'v[0-9]*' --dirty --always 2>/dev/null)
BUILD_VERSION ?= $(or $(VERSION),$(if $(filter v%,$(GIT_DESCRIBE)),$(GIT_DESCRIBE),v0.0.0-dev-g$(GIT_DESCRIBE)))
BUILD_DATE    ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
VERSION_PKG   := github.com/tessera-gpu/tessera/internal/version
VERSION_LDFLAGS = -X $(VERSION_PKG).version=$(BUILD_VERSION) -X $(VERSION_PKG).commit=$(GIT_COMMIT) -X $(VERSION_PKG).buildDate=$(BUILD_DATE)

.PHONY: all build test unit vet e2e e2e-containerd bench bench-prepare bench-scheduler dry-run clean \
	check-build-deps cluster-bins cluster-bins-fake previous-agent prometheus cluster-up cluster-down demo \
	release-pin-images release-krew release-check images images-all release release-chart chart-package release-check-dockerfile helm

all: build

# build: the five binaries of cmd/ (agent, CDI hook, webhook, simulator,
# kubectl plugin), stamped with their version.
build:
	$(GO) build -ldflags='$(VERSION_LDFLAGS)' -o $(BIN)/ ./cmd/...

# test: what the machine must have first (one line if something is
# missing), then vet, every unit test with the race detector (needs cgo),
# then the end-to-end suites in local clusters.
test: check-build-deps vet unit e2e e2e-containerd

# One line when something is missing: make's own error, carrying the
# script's message, and nothing after it.
check-build-deps:
	$(eval BUILD_DEPS_MISSING := $(shell hack/check-build-deps.sh 2>&1))
	$(if $(BUILD_DEPS_MISSING),$(error $(BUILD_DEPS_MISSING)))

unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) build ./...
	$(TEST_GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/...

# bench-prepare: the agent's prepare and unprepare over its gRPC socket
# against a real API server; REFERENCE=path/to/dra-example-kubeletplugin
# measures that driver in the same run.
bench-prepare: build cluster-bins-fake
	$(TEST_GO) run ./cluster/cmd/bench-prepare --repo=.. $(if $(REFERENCE),--reference=$(abspath $(REFERENCE))) $(BENCH_ARGS)

# bench-scheduler: the real kube-scheduler placing pods with claims on 100
# and 500 nodes that exist only as objects (static, dynamic, shared).
bench-scheduler: build cluster-bins-fake
	$(TEST_GO) run ./cluster/cmd/bench-scheduler --repo=.. $(BENCH_ARGS)

# images: the production images (test/cluster/cmd/images, without Docker)
# for linux/amd64, each an OCI image layout under $(IMAGES_DIR)/<image>/,
# tagged BUILD_VERSION; images-all: the same for linux/amd64 and
# linux/arm64 (cgo cross-build: gcc-aarch64-linux-gnu, libc6-dev-arm64-cross).
IMAGES_DIR := _output/images
IMAGES_GO   = $(TEST_GO) run ./cluster/cmd/images --repo=.. --version=$(BUILD_VERSION) --commit=$(GIT_COMMIT) --date=$(BUILD_DATE)

images:
	$(IMAGES_GO) --platforms=linux/amd64 --out=$(IMAGES_DIR)

images-all:
	$(IMAGES_GO) --platforms=linux/amd64,linux/arm64 --out=$(IMAGES_DIR)

# dry-run: print a simulated DGX H100's ResourceSlices.
dry-run: build
	$(BIN)/tessera-kubelet-plugin --backend=sim --sim-profile=dgx-h100 --node-name=node-1 --sim-state-dir=$$(mktemp -d) --dry-run

# The cluster binaries are built once and reused while their pins match:
# all of them, or only what fake-runtime nodes need.
cluster-bins: check-build-deps
	hack/build-cluster-bins.sh

cluster-bins-fake:
	hack/build-cluster-bins.sh $(FAKE_BINS)

# e2e: the test module's own unit tests (test/chart's rules tests run
# promtool), then test/e2e against a local cluster of fake-runtime nodes
# (one test scrapes its agents with a real Prometheus), then test/e2e/rack
# against a rack of GB200 trays: after, never beside it (one cluster at a
# time).
e2e: build cluster-bins-fake prometheus
	$(TEST_GO) test -count=1 -timeout=40m $$($(GO) list ./... | grep -v -e /e2e/containerd -e /e2e/rack)
	$(TEST_GO) test -count=1 -timeout=15m ./e2e/rack/

# e2e-containerd: test/e2e/containerd against a local cluster of containerd
# nodes: they import the images of `make images` (amd64) and install the
# chart package of chart-package, as a user does; after e2e, not beside it
# (two clusters at once would share two cores).
e2e-containerd: build cluster-bins previous-agent images chart-package
	$(TEST_GO) test -count=1 -timeout=20m ./e2e/containerd/

# previous-agent: the agent, stand-in and chart of the commit the downgrade
# test rolls back to (hack/build-previous-agent.sh), reused while unchanged.
previous-agent:
	hack/build-previous-agent.sh

# prometheus: Prometheus's server and promtool of test/cluster/prometheus's
# pin (hack/build-prometheus.sh), for the chart's rules and dashboard tests
# and the e2e test that scrapes the agents; reused while unchanged.
prometheus:
	hack/build-prometheus.sh

cluster-up: build $(if $(filter containerd,$(RUNTIME)),cluster-bins images chart-package,cluster-bins-fake)
	$(TEST_GO) run ./cluster/cmd/localcluster up --repo=.. $(if $(NODES),--nodes=$(NODES)) $(if $(RUNTIME),--runtime=$(RUNTIME)) $(if $(WORKLOADS),--workloads)

cluster-down:
	$(TEST_GO) run ./cluster/cmd/localcluster down --repo=..

# demo: the README's first command.
demo: build cluster-bins-fake
	$(TEST_GO) run ./cluster/cmd/demo --repo=.. $(if $(KEEP),--keep-cluster) $(if $(NODES),--nodes=$(NODES))

# Release (docs/development.md, Release). VERSION is the release tag
# (vX.Y.Z); DIST a directory of kubectl-tessera_<os>_<arch>.tar.gz, built
# by release-krew when unset; RESOLVER prints an image's digest.
VERSION        ?=
DIST           ?=
RESOLVER       ?=
RELEASE_DIR    := _output/release
KREW_DIST       = $(or $(DIST),$(RELEASE_DIR)/dist)
KREW_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_GO      = $(TEST_GO) run ./cluster/cmd/release

# release-pin-images: pin deployments/Dockerfile's base images by digest,
# in place (RESOLVER, default `crane digest`, asks their registries).
release-pin-images:
	$(RELEASE_GO) pin-images --repo=.. $(if $(RESOLVER),--resolver='$(RESOLVER)')

# release-krew VERSION=vX.Y.Z [DIST=dir]: $(RELEASE_DIR)/tessera.yaml, the
# krew manifest filled with VERSION's URIs and the archives' sha256.
# Without DIST, the archives are built first: a static kubectl-tessera per
# platform, alone in a reproducible tarball (no owner, time or gzip name).
release-krew:
	$(if $(VERSION),,$(error release-krew: VERSION=vX.Y.Z is required))
ifeq ($(DIST),)
	rm -rf $(KREW_DIST) && mkdir -p $(KREW_DIST)
	set -e; for p in $(KREW_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; dir=$(KREW_DIST)/$${os}_$${arch}; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags='-s -w $(VERSION_LDFLAGS)' -o $$dir/kubectl-tessera ./cmd/kubectl-tessera; \
	  tar -C $$dir --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - kubectl-tessera | gzip -n9 > $(KREW_DIST)/kubectl-tessera_$${os}_$${arch}.tar.gz; \
	  rm -rf $$dir; \
	done
endif
	$(RELEASE_GO) krew --repo=.. --version=$(VERSION) --dist=$(abspath $(KREW_DIST))

# release VERSION=vX.Y.Z: everything a release publishes, under
# $(RELEASE_DIR) (docs/release.md): images/<image>/ (OCI layouts, amd64 and
# arm64, tagged VERSION), tessera-X.Y.Z.tgz (the chart, version X.Y.Z,
# appVersion VERSION), dist/ and tessera.yaml (release-krew), SHA256SUMS;
# then release-check.
release:
	$(if $(VERSION),,$(error release: VERSION=vX.Y.Z is required))
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	$(IMAGES_GO) --platforms=linux/amd64,linux/arm64 --out=$(RELEASE_DIR)/images
	$(MAKE) release-chart release-krew
	$(RELEASE_GO) sums --repo=.. --release-dir=$(RELEASE_DIR)
	$(MAKE) release-check

# release-chart VERSION=vX.Y.Z: helm package of the chart, its version
# VERSION without the v, its appVersion (the images' default tag) VERSION.
release-chart: helm
	$(if $(VERSION),,$(error release-chart: VERSION=vX.Y.Z is required))
	$(CLUSTER_BIN)/helm package deployments/helm/tessera --version=$(patsubst v%,%,$(VERSION)) --app-version=$(VERSION) --destination=$(RELEASE_DIR)

helm:
	hack/build-cluster-bins.sh helm

# chart-package: release-chart of BUILD_VERSION, the images' tag
# ($(RELEASE_DIR)/tessera-<version>.tgz): what a containerd cluster installs.
chart-package:
	$(MAKE) release-chart VERSION=$(BUILD_VERSION)

# release-check VERSION=vX.Y.Z: refuses a release directory (make
# release's) whose chart is not VERSION's, whose krew manifest is not
# filled for VERSION, whose image layouts are not both platforms tagged
# VERSION with every blob matching its digest, or whose SHA256SUMS does
# not verify or leaves an artifact out.
release-check:
	$(if $(VERSION),,$(error release-check: VERSION=vX.Y.Z is required))
	$(RELEASE_GO) check --repo=.. --dockerfile= --release-dir=$(RELEASE_DIR) --version=$(VERSION)

# release-check-dockerfile: for those who build deployments/Dockerfile:
# refuses a FROM not pinned by digest (release-pin-images pins them).
release-check-dockerfile:
	$(RELEASE_GO) check --repo=.. --dockerfile=deployments/Dockerfile

clean:
	rm -rf $(BIN)
