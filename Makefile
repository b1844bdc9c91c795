# lambdasaga: the entry point for humans and CI alike. `make help` lists the targets.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := bin
EMU := tools/emulators
# The developer tools (aws-lambda-rie, staticcheck) are pinned in a module of their own,
# tools/mod, not in go.mod: a program importing the library then inherits only what the
# library needs. tools/mod holds no Go package, so it takes none from the main module.
# `go tool $(TOOLS) NAME` runs one, `go build $(TOOLS) PKG` builds one; to change a
# version: go -C tools/mod get -tool PKG@VERSION.
TOOLS := -modfile=tools/mod/go.mod
# Runs a command with dynalite and fauxqs started on free 127.0.0.1 ports
# (LAMBDASAGA_DYNAMODB_ENDPOINT, LAMBDASAGA_SQS_ENDPOINT), stopped afterwards.
WITH_EMULATORS := $(GO) run ./tools/withemulators -dir $(EMU) -log $(BIN)/emulators.log --
# The same, with every AWS call a principal makes through the emulators
# recorded to $(CALLS)/TARGET.jsonl for the IAM check (make iam).
CALLS := $(BIN)/aws-calls
# A target that records removes its last recording first ($(NEW_RECORDING)).
RECORDING_EMULATORS = $(GO) run ./tools/withemulators -dir $(EMU) -log $(BIN)/emulators.log -calls $(CALLS)/$@.jsonl --
NEW_RECORDING = mkdir -p $(CALLS) && rm -f $(CALLS)/$@.jsonl
IAMSIM := tools/iamsim
# The SAM CLI, from PyPI into a virtual environment of the project's own.
SAM_VERSION := 1.170.0
SAM_VENV := .tools/sam-$(SAM_VERSION)
SAM := SAM_CLI_TELEMETRY=0 $(SAM_VENV)/bin/sam
# Lambda functions: logical id in infra/template.yaml = Go package (its CodeUri).
FUNCTIONS := AdvanceFunction=./functions/advance CompensateFunction=./functions/compensate SweepFunction=./functions/sweep
ORDER_FN := ./examples/order/cmd/orderfn
# aws-lambda-rie, as internal/local's tests build it (the same flags: one compile serves both).
BUILD_RIE = $(GO) build $(TOOLS) -o $(BIN)/aws-lambda-rie github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie

.PHONY: help demo check test lint-and-tools builds e2e-bench-chaos-sam bench-tests tools unit norace chaos-long fuzz iam iamsim browser console-screenshot bench bench-once bench-e2e build lint fmt emulators e2e local sam-check sim sim-long chaos proptest-long soak

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

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

check: ## the fast tier, before each commit: lint, the tests with -short and no services (those on the emulators skip), the race detector on the pure core
	@$(MAKE) --no-print-directory lint
	$(GO) test -short ./...
	$(GO) test -short -race ./durable/... ./internal/lang/... ./internal/saga/...

test: lint-and-tools unit norace builds e2e-bench-chaos-sam iam ## everything CI runs: lint, every test once under the race detector with the emulators (bench's measurements without it), what the race detector skips with each benchmark once, the builds, e2e and kill tests through the real binaries beside bench's measurements and the SAM checks, the IAM check of their calls

# lint keeps the processors busy while the installs wait on the network;
# the end-to-end test, the kill test and bench's measurements wait on
# queues, timers and rates more than on the processors, each on emulators
# of its own, beside the SAM checks. What they build is built before them
# (builds): on a cold build cache the arm64 bootstraps and aws-lambda-rie
# take minutes of both processors, and a kill test starved of them sees its
# workers time out until messages reach the dead-letter queues.
lint-and-tools:
	@$(MAKE) --no-print-directory -j2 lint tools
builds: build
	$(BUILD_RIE)
e2e-bench-chaos-sam:
	@$(MAKE) --no-print-directory -j4 --output-sync=target e2e bench-tests chaos sam-check

# The installs wait on the network and the disk, not the processors: four at once.
tools: ## install what the tests need, in parallel: the emulators, the IAM policy engine, Chromium (as root), the SAM CLI
	@$(MAKE) --no-print-directory -j4 emulators iamsim browser $(SAM_VENV)/bin/sam

# The packages whose tests run longest start first, so that the last to
# finish is not a long one started late. bench holds measurements bound by
# rates and timers (85 s with or without the race detector, which guards
# nothing in them: the engine, stores and queues they drive are
# race-tested in their own packages); bench-tests runs them beside the
# e2e and kill tests instead of holding one of go test's two slots here.
RACE_FIRST := sagactl internal/engine store/dynamo internal/saga internal/sim internal/proptest internal/console
unit: emulators iamsim browser ## every test once, under the race detector (bench's measurements aside: bench-tests), with the emulators started (fuzz seed corpora included) and Chromium for the console's browser test; AWS calls recorded for make iam
	@$(NEW_RECORDING)
	@mod=$$($(GO) list -m); first=$$(for p in $(RACE_FIRST); do echo "$$mod/$$p"; done); \
	rest=$$($(GO) list ./... | grep -vxF -e "$$mod/bench" $$(for p in $$first; do echo "-e $$p"; done)); \
	echo "$(GO) test -race -count=1 ./... (bench aside; first: $(RACE_FIRST))"; \
	$(RECORDING_EMULATORS) $(GO) test -race -count=1 $$first $$rest

# One build of every package's tests without the race detector serves both.
norace: ## what the race detector skips or shrinks, in the normal build: the allocation pins, the simulation and the property test at CI size, the simulation's checks that sabotage is caught, the foreach of 10,000; and every benchmark once (bench-once)
	$(GO) test -count=1 -run 'Allocs|AllocatesNothing|^TestSimulation|^TestProperty$$|^TestForeachOfMaxItems' -bench . -benchtime=1x ./...

bench-tests: emulators ## bench's measurements on the emulators, once, at CI size (the tables' sizes: make bench), AWS calls recorded for make iam
	@$(NEW_RECORDING)
	$(RECORDING_EMULATORS) $(GO) test -count=1 ./bench

# The console's browser test drives Debian's chromium (internal/console/browser_test.go).
# As root (CI) a missing one is installed, and a failed install fails; a developer
# without root is told, and the test skips saying so (in CI, CI=true, it fails).
browser: ## install Debian's chromium for the console's browser test when it is missing (apt-get, as root)
	@if command -v chromium >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "browser: chromium is missing and this is not root: the console's browser test will be skipped (sudo make browser installs it)"; exit 0; \
	fi; \
	echo "browser: apt-get install chromium"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	command -v chromium

console-screenshot: browser ## the console's screenshot for the README (docs/console.png), taken by its browser test
	LAMBDASAGA_CONSOLE_SCREENSHOT=$(CURDIR)/docs/console.png $(GO) test -count=1 -run 'TestBrowser$$' ./internal/console

emulators: $(EMU)/node_modules/.installed ## install the DynamoDB and SQS emulators (npm dynalite, fauxqs)

iamsim: $(IAMSIM)/node_modules/.installed ## install the IAM policy engine the IAM check runs offline (npm @cloud-copilot/iam-simulate)

$(IAMSIM)/node_modules/.installed: $(IAMSIM)/package.json $(IAMSIM)/package-lock.json
	cd $(IAMSIM) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

iam: iamsim ## the IAM check: every AWS call that make unit and e2e recorded, evaluated against infra/template.yaml's policies by a policy engine
	LAMBDASAGA_AWS_CALLS_DIR=$(CURDIR)/$(CALLS) $(GO) test -count=1 -v -run 'TestTemplateGrantsEveryRecordedCall' ./internal/iamcheck

$(EMU)/node_modules/.installed: $(EMU)/package.json $(EMU)/package-lock.json
	cd $(EMU) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# 100 sagas (16 of them forks, 10 with large values in S3, about 70 workers
# killed) take about a minute here; make chaos-long runs 2,000.
CHAOS_SAGAS ?= 100
# The test waits in proportion to its size (internal/chaos, scale): 30 min
# covers up to 200 sagas; chaos-long gives its 2,000 more.
CHAOS_TIMEOUT ?= 30m
chaos: emulators ## kill test: the real binaries under aws-lambda-rie, workers SIGKILLed while CHAOS_SAGAS sagas (100) run and a driver signals them and completes their callbacks, then the invariants
	@mkdir -p $(BIN)
	LAMBDASAGA_CHAOS=1 CHAOS_SAGAS=$(CHAOS_SAGAS) $(GO) run ./tools/withemulators -dir $(EMU) -log $(BIN)/emulators-chaos.log -- $(GO) test -count=1 -timeout $(CHAOS_TIMEOUT) -v -run TestChaos ./internal/chaos 2>&1 | grep -vE '^\s+(AdvanceFunction|CompensateFunction|SweepFunction)/' 

chaos-long: ## the kill test at size: 2,000 sagas
	@$(MAKE) --no-print-directory chaos CHAOS_SAGAS=2000 CHAOS_TIMEOUT=3h

SEED ?= 1
sim: ## the fault-injection simulation for one seed, with its report (make sim SEED=n replays a failure)
	$(GO) test -count=1 ./internal/sim -run 'TestSimulation$$' -seed $(SEED) -v

SIM_JOBS ?= 2
sim-long: ## the simulation at size: 100 seeds of 10,000 sagas, in SIM_JOBS processes (2), each logging to bin/sim-long-N.log
	$(GO) test -c -o bin/sim.test ./internal/sim
	@cd internal/sim && per=$$(( (100 + $(SIM_JOBS) - 1) / $(SIM_JOBS) )); pids=""; \
	for j in $$(seq 1 $(SIM_JOBS)); do \
		first=$$(( (j - 1) * per + 1 )); n=$$(( 101 - first < per ? 101 - first : per )); \
		../../bin/sim.test -test.run 'TestSimulation$$' -test.timeout 6h -test.v -from $$first -seeds $$n -sagas 10000 > ../../bin/sim-long-$$j.log 2>&1 & pids="$$pids $$!"; \
	done; ok=0; for p in $$pids; do wait $$p || ok=1; done; \
	for j in $$(seq 1 $(SIM_JOBS)); do grep -E "seeds, .* sagas|violated [1-9]|^(--- |ok|FAIL)" ../../bin/sim-long-$$j.log; done; exit $$ok

DEFS ?= 100000
proptest-long: ## "what validation accepts must run" at size: DEFS generated definitions (100,000) in SIM_JOBS processes, each logging to bin/proptest-long-N.log; go test ./internal/proptest -run TestProperty -seed N -v replays one
	$(GO) test -c -o bin/proptest.test ./internal/proptest
	@cd internal/proptest && per=$$(( ($(DEFS) + $(SIM_JOBS) - 1) / $(SIM_JOBS) )); pids=""; \
	for j in $$(seq 1 $(SIM_JOBS)); do \
		first=$$(( (j - 1) * per + 1 )); n=$$(( $(DEFS) + 1 - first < per ? $(DEFS) + 1 - first : per )); \
		../../bin/proptest.test -test.run 'TestProperty$$' -test.timeout 3h -test.v -first $$first -defs $$n > ../../bin/proptest-long-$$j.log 2>&1 & pids="$$pids $$!"; \
	done; ok=0; for p in $$pids; do wait $$p || ok=1; done; \
	for j in $$(seq 1 $(SIM_JOBS)); do grep -E "definitions, |cases: |^(--- |ok|FAIL)" ../../bin/proptest-long-$$j.log; done; exit $$ok

FUZZTIME ?= 2m
# go test -fuzz takes one target of one package at a time.
FUZZ_TARGETS := FuzzListPosition=./durable FuzzDecodeMessage=./durable FuzzCompile=./internal/saga FuzzCheckCompensation=./internal/saga FuzzCallbackToken=./internal/saga FuzzRedactorText=./internal/saga FuzzStateDecode=./internal/saga FuzzDefinitionsRun=./internal/proptest FuzzParse=./internal/schedule
fuzz: ## each fuzz target for FUZZTIME (2m); what it finds lands in the package's testdata/fuzz and fails go test until fixed
	@for f in $(FUZZ_TARGETS); do \
		name=$${f%%=*}; pkg=$${f#*=}; echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

soak: sim-long proptest-long chaos-long fuzz ## the long proofs at full size: sim-long, proptest-long, chaos-long and fuzz (hours on two cores)

bench-once: ## every benchmark once, so none can rot
	$(GO) test -run '^$$' -bench . -benchtime=1x ./...

# The chained-steps measurement at the size of bench/README.md's figures;
# make unit runs it at CI size (a few seconds).
BENCH_CHAIN_ROUNDS ?= 5
BENCH_CHAIN_SAGAS ?= 20
BENCH_CHAIN_THROUGHPUT_SAGAS ?= 300
bench: emulators ## the benchmarks with allocation counts, then the request economy, payload, large-value and chained-steps tables on the emulators (figures go to bench/README.md)
	$(GO) test -run '^$$' -bench . -benchmem ./...
	@mkdir -p $(BIN)
	$(WITH_EMULATORS) $(GO) test -count=1 -v -run 'TestRequestEconomy|TestPayloadSize|TestLargeValueCost' ./bench | grep -E '^\s+\w+_test.go:[0-9]+: \||^(ok|FAIL|---)'
	BENCH_CHAIN_ROUNDS=$(BENCH_CHAIN_ROUNDS) BENCH_CHAIN_SAGAS=$(BENCH_CHAIN_SAGAS) BENCH_CHAIN_THROUGHPUT_SAGAS=$(BENCH_CHAIN_THROUGHPUT_SAGAS) $(WITH_EMULATORS) $(GO) test -count=1 -v -run 'TestChainStepLatency' ./bench | grep -E '^\s+chain_test.go:[0-9]+: |^(ok|FAIL|---)'
	@$(GO) run ./cmd/sagactl cost examples/order/order.yaml --input @examples/order/testdata/ok.json

BENCH_E2E_SAGAS ?= 100
bench-e2e: emulators ## sagas per second and step latency on the emulators with 1, 2 and 4 workers, next to the raw-call floor
	@mkdir -p $(BIN)
	LAMBDASAGA_BENCH_E2E=1 BENCH_E2E_SAGAS=$(BENCH_E2E_SAGAS) $(WITH_EMULATORS) $(GO) test -count=1 -v -timeout 20m -run TestE2EThroughput ./bench | grep -E '^\s+\w+_test.go:[0-9]+: \||^(ok|FAIL|---)' 

build: ## the Lambda bootstraps for provided.al2023 arm64 (as sam build makes them, into .aws-sam/build), sagactl and the example
	@for f in $(FUNCTIONS); do \
		fn=$${f%%=*}; pkg=$${f#*=}; \
		echo "$$fn: $$pkg -> .aws-sam/build/$$fn/bootstrap (linux/arm64)"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -o .aws-sam/build/$$fn/bootstrap $$pkg; \
	done
	$(GO) build -o $(BIN)/sagactl ./cmd/sagactl
	$(GO) build -o $(BIN)/ordersaga ./examples/order/cmd/ordersaga

e2e: emulators $(SAM_VENV)/bin/sam ## the order saga, and the travel saga (parallel, a child saga, foreach), through the real Lambda binaries under aws-lambda-rie, on the emulators; start queue requests from Python (boto3, from the SAM CLI's environment)
	@$(NEW_RECORDING)
	LAMBDASAGA_E2E=1 LAMBDASAGA_PYTHON=$(CURDIR)/$(SAM_VENV)/bin/python $(RECORDING_EMULATORS) $(GO) test -count=1 -run TestE2E ./internal/local

local: emulators ## run the deployed shape here (emulators, real bootstraps under aws-lambda-rie, pollers) with the order example's actions
	$(GO) build -o $(BIN)/sagactl ./cmd/sagactl
	$(BUILD_RIE)
	$(BIN)/sagactl local --main AdvanceFunction=$(ORDER_FN) --main CompensateFunction=$(ORDER_FN) --visibility 5s

$(SAM_VENV)/bin/sam:
	python3 -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --no-compile --disable-pip-version-check aws-sam-cli==$(SAM_VERSION)

sam-check: $(SAM_VENV)/bin/sam build ## sam validate --lint and sam build on the template; make build must build what sam build builds
	$(SAM) validate --lint --template infra/template.yaml
	$(SAM) build --template infra/template.yaml --build-dir .aws-sam/sam-build
	@for f in $(FUNCTIONS); do \
		fn=$${f%%=*}; \
		diff <($(GO) version -m .aws-sam/sam-build/$$fn/bootstrap | grep -vE '^\S|\sdep\s|\s(mod|path)\s') \
		     <($(GO) version -m .aws-sam/build/$$fn/bootstrap | grep -vE '^\S|\sdep\s|\s(mod|path)\s') \
		  || { echo "$$fn: make build and sam build differ in build settings"; exit 1; }; \
		echo "$$fn: make build matches sam build (build settings from go version -m)"; \
	done

lint: ## gofmt, go vet, go.mod/go.sum tidy (the module's and the tools'), staticcheck, commit subjects
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@tools/commit-subjects
	$(GO) vet ./...
	$(GO) mod tidy -diff
	$(GO) -C tools/mod mod tidy -diff
	$(GO) tool $(TOOLS) staticcheck ./...

fmt: ## format the code
	gofmt -w .
