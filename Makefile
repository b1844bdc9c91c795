# lambdasaga: the entry point for humans and CI alike. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := bin
EMU := tools/emulators
# Runs a command with dynalite and fauxqs started on free 127.0.0.1 ports
# (LAMBDASAGA_DYNAMODB_ENDPOINT, LAMBDASAGA_SQS_ENDPOINT), stopped afterwards.
WITH_EMULATORS := $(GO) run ./tools/withemulators -dir $(EMU) -log $(BIN)/emulators.log --

.PHONY: help demo test unit race bench bench-once build lint fmt emulators

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

unit: emulators ## go test ./... with the emulators started (fuzz seed corpora included)
	@mkdir -p $(BIN)
	$(WITH_EMULATORS) $(GO) test -count=1 ./...

race: emulators ## the tests again under the race detector
	@mkdir -p $(BIN)
	$(WITH_EMULATORS) $(GO) test -race -count=1 ./...

emulators: $(EMU)/node_modules/.installed ## install the DynamoDB and SQS emulators (npm dynalite, fauxqs)

$(EMU)/node_modules/.installed: $(EMU)/package.json $(EMU)/package-lock.json
	cd $(EMU) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

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
