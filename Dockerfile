# syntax=docker/dockerfile:1
# The sandbox-webhook image: a static binary on distroless, no shell, non-root.
# Build it with `make image` (docker build --build-arg VERSION=... .).

# build compiles the static binary exactly as `make build` builds bin/sandbox-webhook.
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, in their own layer: it is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# ./cmd/webhook is the server alone (serve, certs): the command line tools, and the
# kube-apiserver code dry-run --map runs, are the other binary, kubectl-sandbox_webhook.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/sandbox-webhook/sandbox-webhook/internal/version.Version=${VERSION}" -o /out/sandbox-webhook ./cmd/webhook

# The runtime image: the binary alone, as uid/gid 65532.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/sandbox-webhook /sandbox-webhook
USER 65532:65532
ENTRYPOINT ["/sandbox-webhook"]
CMD ["serve"]
