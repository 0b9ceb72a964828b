# syntax=docker/dockerfile:1
# The sandbox-webhook image: a static binary on distroless, no shell, non-root.
# Build it with `make image` (docker build --build-arg VERSION=... .).

# build compiles the static binary exactly as `make build-server` does.
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, in their own layer: it is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# -tags nomap leaves out dry-run --map and the kube-apiserver code it runs: the image runs
# serve, which then starts faster and needs less memory. The full CLI is `make build`.
RUN CGO_ENABLED=0 go build -trimpath -tags nomap -ldflags "-X github.com/sandbox-webhook/sandbox-webhook/cli.version=${VERSION}" -o /out/sandbox-webhook ./cmd/webhook

# The runtime image: the binary alone, as uid/gid 65532.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/sandbox-webhook /sandbox-webhook
USER 65532:65532
ENTRYPOINT ["/sandbox-webhook"]
CMD ["serve"]
