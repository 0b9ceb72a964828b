# sandbox-webhook. `make help` lists the targets.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

BIN        := $(CURDIR)/bin
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -X github.com/sandbox-webhook/sandbox-webhook/cli.version=$(VERSION)
GO_TEST    ?= go test

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/sandbox-webhook.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/sandbox-webhook ./cmd/webhook

.PHONY: tools
tools: ## Build the e2e control plane (kube-apiserver, etcd) into bin/ unless present.
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

.PHONY: demo
demo: build tools ## Start a local apiserver with the webhook and show what it injects.
	go run ./e2e/demo

.PHONY: image
image: ## Build the container image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t sandbox-webhook:$(VERSION) .
