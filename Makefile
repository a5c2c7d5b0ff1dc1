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

.PHONY: all build test unit vet e2e e2e-containerd bench bench-prepare bench-scheduler dry-run clean \
	cluster-bins cluster-up cluster-down demo

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# test: vet, every unit test with the race detector (needs cgo), then the
# end-to-end suite in a local cluster.
test: vet unit e2e e2e-containerd

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
bench-prepare: build cluster-bins
	$(TEST_GO) run ./cluster/cmd/bench-prepare --repo=.. $(if $(REFERENCE),--reference=$(abspath $(REFERENCE))) $(BENCH_ARGS)

# bench-scheduler: the real kube-scheduler placing pods with claims on 100
# and 500 nodes that exist only as objects (static, dynamic, shared).
bench-scheduler: build cluster-bins
	$(TEST_GO) run ./cluster/cmd/bench-scheduler --repo=.. $(BENCH_ARGS)

# dry-run: print a simulated DGX H100's ResourceSlices.
dry-run: build
	$(BIN)/tessera-kubelet-plugin --backend=sim --sim-profile=dgx-h100 --node-name=node-1 --sim-state-dir=$$(mktemp -d) --dry-run

# The cluster binaries are built once and reused while their pins match.
cluster-bins:
	hack/build-cluster-bins.sh

# e2e: the test module's own unit tests, then test/e2e against a local
# cluster of fake-runtime nodes.
e2e: build cluster-bins
	$(TEST_GO) test -count=1 -timeout=40m $$($(GO) list ./... | grep -v /e2e/containerd)

# e2e-containerd: test/e2e/containerd against a local cluster of containerd
# nodes, the agents installed by the chart; after e2e, not beside it (two
# clusters at once would share two cores).
e2e-containerd: build cluster-bins
	$(TEST_GO) test -count=1 -timeout=20m ./e2e/containerd/

cluster-up: build cluster-bins
	$(TEST_GO) run ./cluster/cmd/localcluster up --repo=.. $(if $(NODES),--nodes=$(NODES)) $(if $(RUNTIME),--runtime=$(RUNTIME))

cluster-down:
	$(TEST_GO) run ./cluster/cmd/localcluster down --repo=..

# demo: the README's first command.
demo: build cluster-bins
	$(TEST_GO) run ./cluster/cmd/demo --repo=.. $(if $(KEEP),--keep-cluster) $(if $(NODES),--nodes=$(NODES))

clean:
	rm -rf $(BIN)
