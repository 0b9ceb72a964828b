# sandbox-webhook. `make help` lists the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

BIN        := $(CURDIR)/bin
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X github.com/sandbox-webhook/sandbox-webhook/cli.version=$(VERSION)
GO_TEST    ?= go test

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/sandbox-webhook.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/sandbox-webhook ./cmd/webhook

.PHONY: tools
tools: ## Build the e2e control plane (kube-apiserver, etcd) into bin/ unless already current.
	bash hack/tools.sh

.PHONY: test
test: tools ## Run every test: unit, golden, chart, fuzz seeds and e2e (race detector on).
	$(GO_TEST) -race -count=1 ./...

.PHONY: lint
lint: ## gofmt, go vet and golangci-lint.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	go tool -modfile=hack/lint/go.mod golangci-lint run ./...

.PHONY: bench
bench: ## Run the benchmarks.
	go test -run '^$$' -bench . -benchmem ./...

.PHONY: e2e
e2e: tools ## Run only the end-to-end suite and the demo's test (race detector on).
	$(GO_TEST) -race -count=1 ./e2e/...

.PHONY: demo
demo: build tools ## Start a local apiserver with the webhook and show what it injects; Ctrl-C stops it.
	@command -v kubectl >/dev/null || bash hack/tools.sh kubectl
	@echo "[demo] compiling the demo program"
	@go build -o $(BIN)/sandbox-webhook-demo ./e2e/demo
	@$(BIN)/sandbox-webhook-demo $(DEMO_FLAGS)

.PHONY: image
image: ## Build the container image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t sandbox-webhook:$(VERSION) .
