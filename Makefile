# sandbox-webhook. `make help` lists the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

BIN        := $(CURDIR)/bin
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X github.com/sandbox-webhook/sandbox-webhook/internal/version.Version=$(VERSION)
GO_TEST    ?= go test

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Two binaries: the server, the container image's (serve, certs), and the
# command line and kubectl plugin (dry-run, validate, test, check,
# export-map), which alone links kube-apiserver's code for dry-run --map.
.PHONY: build build-server build-cli
build: build-server build-cli ## Build both binaries into bin/.

build-server: ## Build bin/sandbox-webhook: the server, the container image's binary.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/sandbox-webhook ./cmd/webhook

build-cli: ## Build bin/kubectl-sandbox_webhook: the command line and kubectl plugin.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-sandbox_webhook ./cmd/kubectl-sandbox_webhook

.PHONY: tools
tools: ## Build the e2e control plane (kube-apiserver, etcd, and the matrix's older kube-apiservers) into bin/ unless already current.
	bash hack/tools.sh

# The e2e version matrix: the newest minor runs the whole suite; every older
# minor with a module e2e/tools/k8s-1.NN, and the newest with pod-level
# resources switched off, run the tests whose outcome depends on the apiserver.
# Older minors from MAP_MINOR on (MutatingAdmissionPolicy v1, GA in 1.36) also
# prove the exported MAP equals the webhook. TestGuard: the guard rests on how
# each apiserver evaluates match conditions and reinvokes a webhook that failed open.
MATRIX_TESTS  := ^(TestCorpus|TestReinvocation|TestPodSecurity|TestMemoryLevels|TestGuard|TestRuntimeClassPlugin)$$
MAP_TESTS     := ^(TestCorpus|TestReinvocation|TestPodSecurity|TestMemoryLevels|TestMAPEquivalence|TestGuard|TestRuntimeClassPlugin)$$
MAP_MINOR     := 36
MATRIX_MINORS := $(patsubst e2e/tools/k8s-%,%,$(wildcard e2e/tools/k8s-1.*))
# 1.37 adds two gates that depend on PodLevelResources and refuse to start
# without it, so they go off with it.
MATRIX_GATES  := PodLevelResources=false,InPlacePodLevelResourcesVerticalScaling=false,PodLevelResourcesFixDefaulting=false,PodLevelResourcesFixKubeletQOSClass=false

.PHONY: test
# The modules besides the main one: the e2e suite, the chart's tests (with
# Helm), the image and its Dockerfile (with go-containerregistry), the bench
# tools, the kernel leak experiment. Each has its own go.mod, so that their
# dependencies stay out of the main one.
TEST_MODULES := e2e charts hack/image hack/bench hack/kernelleak

test: tools ## Run every test: unit, golden, chart, fuzz seeds and e2e (race detector on), the chart's alert and dashboard queries, the e2e version matrix, and as root the node tier.
	$(GO_TEST) -race -count=1 ./...
	@set -e; for m in $(TEST_MODULES); do (cd $$m && echo "[test] module $$m" && $(GO_TEST) -race -count=1 -timeout 20m ./...); done
	cd charts/monitoringtest && $(GO_TEST) -count=1 ./...
	$(MAKE) --no-print-directory e2e-matrix
	$(MAKE) --no-print-directory test-node

# The node tier needs root (containerd, the kubelet, apt-get): make test runs
# it as root, as CI is, and says so when it cannot.
.PHONY: test-node
test-node:
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory node-e2e; \
	else echo "[test] the node tier (make node-e2e) needs root: not run"; fi

# The tiers too long for make test's budget, one after the other; each is
# also a target of its own. docs/architecture.md gives their times.
.PHONY: test-tiers
test-tiers: ## Run the tiers make test leaves out (root, apt): cluster-e2e, kyverno-parity, kyverno-cutover, arm64-e2e, io-bench.
	$(MAKE) --no-print-directory cluster-e2e
	$(MAKE) --no-print-directory kyverno-parity
	$(MAKE) --no-print-directory kyverno-cutover
	$(MAKE) --no-print-directory arm64-e2e
	$(MAKE) --no-print-directory io-bench

.PHONY: e2e-matrix
e2e-matrix: tools ## Run the version-dependent e2e tests on every older minor (and the MAP equivalence from 1.36) and with PodLevelResources off.
	@set -e; for m in $(MATRIX_MINORS); do \
	  tests='$(MATRIX_TESTS)'; \
	  if [ "$${m#1.}" -ge $(MAP_MINOR) ]; then tests='$(MAP_TESTS)'; fi; \
	  echo "[matrix] kube-apiserver $$m: $$tests"; \
	  (cd e2e && E2E_KUBE_MINOR=$$m $(GO_TEST) -race -count=1 -run "$$tests" .); \
	done
	@echo "[matrix] newest kube-apiserver, --feature-gates=$(MATRIX_GATES)"
	cd e2e && E2E_FEATURE_GATES=$(MATRIX_GATES) $(GO_TEST) -race -count=1 -run '$(MATRIX_TESTS)' .

.PHONY: lint
lint: ## gofmt, go mod tidy, go vet and golangci-lint, in every module; actionlint on the release workflow.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	@set -e; for m in . $(TEST_MODULES); do (cd $$m && go mod tidy -diff) || { echo "go.mod of $$m is not tidy: cd $$m && go mod tidy"; exit 1; }; done
	go vet ./...
	@set -e; for m in $(TEST_MODULES) charts/monitoringtest; do (cd $$m && echo "[lint] go vet in $$m" && go vet ./...); done
	cd e2e && go vet -tags nodee2e ./node/ ./cluster/ ./harness/
	cd e2e && go vet -tags nodee2e,iobench ./node/
	cd e2e && go vet -tags kyvernoparity ./kyvernoparity/
	cd e2e && go vet -tags kyvernocutover .
	cd e2e && go vet -tags arm64e2e .
	go tool -modfile=hack/lint/go.mod golangci-lint run ./...
	go tool -modfile=hack/actionlint/go.mod actionlint .github/workflows/*.yaml
	@set -e; for m in $(TEST_MODULES); do (cd $$m && echo "[lint] golangci-lint in $$m" && go tool -modfile=$(CURDIR)/hack/lint/go.mod golangci-lint run ./...); done
	cd e2e && go tool -modfile=$(CURDIR)/hack/lint/go.mod golangci-lint run --build-tags nodee2e,iobench ./node/ ./cluster/ ./harness/
	cd e2e && go tool -modfile=$(CURDIR)/hack/lint/go.mod golangci-lint run --build-tags kyvernocutover,arm64e2e,kyvernoparity . ./kyvernoparity/

BENCH_OUT   ?= $(CURDIR)/_output/bench
BENCH_COUNT ?= 3
BENCH_TIME  ?= 500ms

.PHONY: bench
bench: build tools ## Run the benchmarks (core vs floor, server load, start-up, e2e bursts of 100, 500 and 1,000, dry-run on 10,000 objects); report in _output/bench/report.md.
	@mkdir -p $(BENCH_OUT)
	@echo "[bench] 1/4 go test -bench (every package, and hack/bench's: the core, the handler against its floor)"
	go test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) ./... | tee $(BENCH_OUT)/go-bench.txt
	cd hack/bench && go test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -benchtime $(BENCH_TIME) ./... | tee -a $(BENCH_OUT)/go-bench.txt
	cd hack/bench && go run ./benchratio < $(BENCH_OUT)/go-bench.txt > $(BENCH_OUT)/core.md
	@echo "[bench] 2/4 hack/bench/loadgen: the serve process and the floor under load, and start-up"
	@# The Go runtime settings the chart's defaults give the server (resources.limits.memory 256Mi, server.gcPercent).
	cd hack/bench && GOMEMLIMIT=230MiB GOGC=200 go run ./loadgen --binary $(BIN)/sandbox-webhook --assets $(BIN) --out $(BENCH_OUT)/load.md > /dev/null
	@echo "[bench] 3/4 e2e: bursts of 100, 500 and 1,000 pod creates with the webhook, the floor webhooks (no patch, the same patch) and none"
	cd e2e && BENCH_E2E_REPORT=$(BENCH_OUT)/e2e-burst.md go test -tags e2ebench -count=1 -run '^(TestBurstBench|TestAPIServerSendsTypedEncoding)$$' -timeout 20m .
	@echo "[bench] 4/4 hack/bench/fleetbench: dry-run on Lists of 1,000 and 10,000 pods and workloads, per output format"
	cd hack/bench && go run ./fleetbench --binary $(BIN)/kubectl-sandbox_webhook --out $(BENCH_OUT)/fleet.md > /dev/null
	@{ echo "# sandbox-webhook benchmarks"; echo; \
	  echo "$$(git describe --tags --always --dirty 2>/dev/null || echo dev), $$(date -u +%Y-%m-%dT%H:%M:%SZ), $$(nproc) CPUs, $$(uname -sm), load average $$(cut -d' ' -f1-3 /proc/loadavg). Ratios compare numbers of one run."; \
	  echo; echo "## Handler against its floor (go test -bench BenchmarkReview ./gobench in hack/bench)"; echo; cat $(BENCH_OUT)/core.md; \
	  echo; cat $(BENCH_OUT)/load.md; echo; cat $(BENCH_OUT)/e2e-burst.md; echo; cat $(BENCH_OUT)/fleet.md; } > $(BENCH_OUT)/report.md
	@echo "[bench] report: $(BENCH_OUT)/report.md"

.PHONY: e2e
e2e: tools ## Run only the end-to-end suite and the demo's test (race detector on).
	cd e2e && $(GO_TEST) -race -count=1 ./...

.PHONY: demo
demo: build ## Start a local apiserver with the webhook, show what it injects and the command lines to explore it; Ctrl-C stops it.
	@MATRIX=newest bash hack/tools.sh # the demo runs on the newest minor only
	@command -v kubectl >/dev/null || bash hack/tools.sh kubectl
	@echo "[demo] compiling the demo program"
	@cd e2e && go build -o $(BIN)/sandbox-webhook-demo ./demo
	@$(BIN)/sandbox-webhook-demo $(DEMO_FLAGS)

.PHONY: helm
helm: ## Build bin/helm: the Helm the chart is tested with (pinned in charts/go.mod).
	cd charts && go build -o $(BIN)/helm helm.sh/helm/v4/cmd/helm

# The server's image, built with go-containerregistry (hack/image, a module
# of its own): no Docker engine, no base image pulled. Created is the commit's
# time, so that two builds of one commit have one digest. The Dockerfile is
# written from the same definition.
IMAGE      ?= sandbox-webhook:$(VERSION)
IMAGE_OUT  ?= $(CURDIR)/_output/image
PLATFORMS  := linux/amd64 linux/arm64
REVISION   := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
CREATED    := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
SOURCE_URL := https://github.com/sandbox-webhook/sandbox-webhook

.PHONY: image push dockerfile docker-image
image: ## Build the server's image for linux/amd64 and linux/arm64 into _output/image (OCI layout, archive, SPDX SBOMs), without a Docker engine; prints the digest.
	@set -e; for p in $(PLATFORMS); do \
		echo "[image] go build ./cmd/webhook for $$p"; \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath -ldflags "$(LDFLAGS)" -o $(IMAGE_OUT)/bin/$${p/\//-}/sandbox-webhook ./cmd/webhook; \
	done
	cd hack/image && go run ./cmd/image build -out $(abspath $(IMAGE_OUT)) -ref $(IMAGE) -version $(VERSION) -revision $(REVISION) -created $(CREATED) -source $(SOURCE_URL) \
		$(foreach p,$(PLATFORMS),-binary $(p)=$(abspath $(IMAGE_OUT))/bin/$(subst /,-,$(p))/sandbox-webhook)

push: image ## Push the image to IMAGE with the credentials the Docker CLI and crane read (PUSH_FLAGS=-insecure for a plain-HTTP registry).
	cd hack/image && go run ./cmd/image push $(PUSH_FLAGS) -layout $(abspath $(IMAGE_OUT))/oci $(IMAGE)

# The chart carries the release's version: CHART_VERSION is VERSION without its v
# (0.0.0-VERSION between tags, where VERSION is no SemVer), appVersion is VERSION,
# and the chart's default image tag is its appVersion.
CHART_VERSION ?= $(shell v='$(VERSION)'; if [[ $$v =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then echo "$${v#v}"; else echo "0.0.0-$$v"; fi)
CHART_OUT     ?= $(CURDIR)/_output/chart

.PHONY: chart push-chart
chart: helm ## Package the chart as _output/chart/sandbox-webhook-CHART_VERSION.tgz, version and appVersion from VERSION.
	$(BIN)/helm package charts/sandbox-webhook --version $(CHART_VERSION) --app-version $(VERSION) -d $(CHART_OUT)

push-chart: chart ## Push the chart as an OCI artifact to CHART_REPO (oci://host/path; PUSH_CHART_FLAGS=--plain-http for a plain-HTTP registry).
	@test -n "$(CHART_REPO)" || { echo "CHART_REPO=oci://host/path is required"; exit 2; }
	$(BIN)/helm push $(CHART_OUT)/sandbox-webhook-$(CHART_VERSION).tgz $(CHART_REPO) $(PUSH_CHART_FLAGS)

dockerfile: ## Write the Dockerfile from the image's definition in hack/image (its tests fail while the two differ).
	cd hack/image && go run ./cmd/image dockerfile -out $(CURDIR)/Dockerfile

docker-image: ## The same image from the Dockerfile, with a Docker engine.
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

.PHONY: node-tools
node-tools: tools ## Install containerd, runc and busybox-static (apt-get, as root) and build bin/kubelet.
	bash hack/node-tools.sh

NODE_E2E_TIMEOUT ?= 20m

.PHONY: node-e2e
node-e2e: node-tools ## Run sandbox pods on a real node (containerd + kubelet, as root) and check what they get.
	cd e2e && go test -tags nodee2e -count=1 -v -timeout $(NODE_E2E_TIMEOUT) ./node/

CLUSTER_E2E_TIMEOUT ?= 40m

.PHONY: cluster-e2e
cluster-e2e: ## A two-node cluster in its own network and mount namespaces: the chart's webhook as pods on both nodes, sandbox pods, creates through upgrades, a drain, a node's power loss and other failures (root; docs/cluster.md).
	MATRIX=newest bash hack/tools.sh
	bash hack/node-tools.sh cluster
	cd e2e && go test -tags nodee2e -count=1 -v -timeout $(CLUSTER_E2E_TIMEOUT) ./cluster/

.PHONY: kyverno-parity
kyverno-parity: build-cli ## Kyverno's own engine (its CLI, built into bin/ once) against dry-run of the import, on the golden pods (docs/migrate-from-kyverno.md).
	KYVERNO=$$(bash hack/kyverno.sh) && cd e2e && KYVERNO=$$KYVERNO SANDBOX_WEBHOOK_CLI=$(BIN)/kubectl-sandbox_webhook go test -tags kyvernoparity -count=1 -v ./kyvernoparity/

.PHONY: arm64-e2e
arm64-e2e: tools image ## The golden corpus through the API server against the image's arm64 server binary, run under qemu-user-static (root, apt).
	QEMU=$$(bash hack/arm64-tools.sh) && cd e2e && ARM64_IMAGE=$(IMAGE_OUT)/oci QEMU_AARCH64=$$QEMU go test -tags arm64e2e -count=1 -v -timeout 20m -run '^TestArm64Corpus$$' .

.PHONY: kyverno-cutover
kyverno-cutover: ## The cutover from Kyverno, walked with its admission controller (built into bin/ once) under a stream of sandbox pod creates, in both webhook orders (docs/migrate-from-kyverno.md).
	MATRIX=newest bash hack/tools.sh
	KYVERNO_ADMISSION=$$(bash hack/kyverno.sh admission) && cd e2e && KYVERNO_ADMISSION=$$KYVERNO_ADMISSION go test -tags kyvernocutover -count=1 -v -timeout 30m -run '^TestKyvernoCutover$$' .

IO_BENCH_PODS ?= 4 8 16
IO_BENCH_OUT  ?= $(CURDIR)/_output/io-bench

.PHONY: io-bench
io-bench: ## The uv-install write storm on a node whose containerd and kubelet keep their files on a block device of their own: iostat per setup, CSV and plot (root, apt; docs/io.md).
	bash hack/node-tools.sh io
	cd e2e && IO_BENCH_PODS="$(IO_BENCH_PODS)" IO_BENCH_OUT=$(IO_BENCH_OUT) go test -tags nodee2e,iobench -count=1 -v -timeout 90m -run '^TestIOBench$$' ./node/
	bash hack/io-plot.sh $(IO_BENCH_OUT)/summary.csv $(IO_BENCH_OUT)/io.png

NODE_LEAK_PODS ?= 100
NODE_LEAK_OUT  ?= $(CURDIR)/_output/node-leak/leak.csv
# memory (memory mode first) or disk.
NODE_LEAK_ORDER ?= memory

.PHONY: node-leak
node-leak: node-tools ## Churn NODE_LEAK_PODS sandbox pods per mode on a real node; CSV and plot of the memory cgroups left (docs/node.md).
	cd e2e && NODE_LEAK_PODS=$(NODE_LEAK_PODS) NODE_LEAK_OUT=$(NODE_LEAK_OUT) NODE_LEAK_ORDER=$(NODE_LEAK_ORDER) go test -tags nodee2e -count=1 -v -timeout 60m -run '^TestLeak$$' ./node/
	bash hack/leak-plot.sh $(NODE_LEAK_OUT) $(dir $(NODE_LEAK_OUT))leak.png

.PHONY: kernel-leak
kernel-leak: ## The leak per kernel: pod-cgroup churn with a uv cache on tmpfs and on disk, in QEMU (Debian 6.1, 6.12) and on this kernel (root; docs/leak.md).
	bash hack/kernel-leak.sh
