# lambdasaga: the entry point for humans and CI alike. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := bin

.PHONY: help demo test unit race bench bench-once build lint fmt

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

demo: ## run the order saga in process: one that succeeds, one whose payment is declined and compensates
	@$(GO) build -o $(BIN)/ordersaga ./examples/order/cmd/ordersaga
	@echo "== an order that goes through"
	@$(BIN)/ordersaga run examples/order/order.yaml --input @examples/order/testdata/ok.json
	@echo
	@echo "== an order whose card is declined: the stock reservation is released"
	@$(BIN)/ordersaga run examples/order/order.yaml --input @examples/order/testdata/declined.json || test $$? -eq 2
	@echo
	@echo "== what a shipping failure would undo (nothing runs)"
	@$(BIN)/ordersaga plan examples/order/order.yaml --fail ship

test: lint unit race bench-once ## everything CI runs: lint, tests (with allocation pins), race detector, each benchmark once

unit: ## go test ./... (fuzz seed corpora included)
	$(GO) test -count=1 ./...

race: ## the tests again under the race detector
	$(GO) test -race -count=1 ./...

bench-once: ## every benchmark once, so none can rot
	$(GO) test -run '^$$' -bench . -benchtime=1x ./...

bench: ## the benchmarks with allocation counts (figures go to bench/README.md)
	$(GO) test -run '^$$' -bench . -benchmem ./...

build: ## build sagactl and the example into bin/
	$(GO) build ./...
	$(GO) build -o $(BIN)/sagactl ./cmd/sagactl
	$(GO) build -o $(BIN)/ordersaga ./examples/order/cmd/ordersaga

lint: ## gofmt and go vet
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt: ## format the code
	gofmt -w .
