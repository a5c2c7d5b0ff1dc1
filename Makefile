# Tessera. `make test` runs every test; `make build` puts binaries in bin/.
GO        ?= go
BIN       := bin
# The agent binary is built with cgo: the nvml backend loads libnvidia-ml.
# Everything but pkg/backend/nvml also builds with CGO_ENABLED=0 (vet checks).
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
# What each target builds of the cluster binaries (hack/build-cluster-bins.sh
# NAME...): a cluster of fake-runtime nodes needs the control plane, the
# kubelet, the fake runtime and helm (the webhook's configuration is the
# chart's, rendered); containerd nodes need all of them, the runtime too
# (runc: cgo and libseccomp, checked first by check-build-deps).
FAKE_BINS := etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl fake-runtime helm

.PHONY: all build test unit vet e2e e2e-containerd bench bench-prepare bench-scheduler dry-run clean \
	check-build-deps cluster-bins cluster-bins-fake cluster-up cluster-down demo

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

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
	$(GO) test -run='^$$' -bench=. -benchmem ./pkg/...

# bench-prepare: the agent's prepare and unprepare over its gRPC socket
# against a real API server; REFERENCE=path/to/dra-example-kubeletplugin
# measures that driver in the same run.
bench-prepare: build cluster-bins-fake
	$(TEST_GO) run ./cluster/cmd/bench-prepare --repo=.. $(if $(REFERENCE),--reference=$(abspath $(REFERENCE))) $(BENCH_ARGS)

# bench-scheduler: the real kube-scheduler placing pods with claims on 100
# and 500 nodes that exist only as objects (static, dynamic, shared).
bench-scheduler: build cluster-bins-fake
	$(TEST_GO) run ./cluster/cmd/bench-scheduler --repo=.. $(BENCH_ARGS)

# dry-run: print a simulated DGX H100's ResourceSlices.
dry-run: build
	$(BIN)/tessera-kubelet-plugin --backend=sim --sim-profile=dgx-h100 --node-name=node-1 --sim-state-dir=$$(mktemp -d) --dry-run

# The cluster binaries are built once and reused while their pins match:
# all of them, or only what fake-runtime nodes need.
cluster-bins: check-build-deps
	hack/build-cluster-bins.sh

cluster-bins-fake:
	hack/build-cluster-bins.sh $(FAKE_BINS)

# e2e: the test module's own unit tests, then test/e2e against a local
# cluster of fake-runtime nodes.
e2e: build cluster-bins-fake
	$(TEST_GO) test -count=1 -timeout=40m $$($(GO) list ./... | grep -v /e2e/containerd)

# e2e-containerd: test/e2e/containerd against a local cluster of containerd
# nodes, the agents installed by the chart; after e2e, not beside it (two
# clusters at once would share two cores).
e2e-containerd: build cluster-bins
	$(TEST_GO) test -count=1 -timeout=20m ./e2e/containerd/

cluster-up: build $(if $(filter containerd,$(RUNTIME)),cluster-bins,cluster-bins-fake)
	$(TEST_GO) run ./cluster/cmd/localcluster up --repo=.. $(if $(NODES),--nodes=$(NODES)) $(if $(RUNTIME),--runtime=$(RUNTIME))

cluster-down:
	$(TEST_GO) run ./cluster/cmd/localcluster down --repo=..

# demo: the README's first command.
demo: build cluster-bins-fake
	$(TEST_GO) run ./cluster/cmd/demo --repo=.. $(if $(KEEP),--keep-cluster) $(if $(NODES),--nodes=$(NODES))

clean:
	rm -rf $(BIN)
