# Tessera. `make test` runs every test; `make build` puts binaries in bin/.
GO        ?= go
BIN       := bin
# The product builds without cgo; only the NVML backend (a later issue) needs it.
export CGO_ENABLED ?= 0

.PHONY: all build test unit vet fmt bench dry-run clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# test: vet, then every unit test with the race detector (needs cgo).
test: vet unit

unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./pkg/...

# dry-run: print a simulated DGX H100's ResourceSlices.
dry-run: build
	$(BIN)/tessera-kubelet-plugin --backend=sim --sim-profile=dgx-h100 --node-name=node-1 --sim-state-dir=$$(mktemp -d) --dry-run

clean:
	rm -rf $(BIN)
