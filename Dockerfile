# syntax=docker/dockerfile:1
# The sandbox-webhook image for Docker users: the static binary on an empty base, no
# shell, non-root. `make image` assembles the same files without a Docker engine
# (internal/image); build this one with `make docker-image` (docker build --build-arg
# VERSION=... .).

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
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/sandbox-webhook/sandbox-webhook/internal/version.Version=${VERSION}" -o /rootfs/sandbox-webhook ./cmd/webhook
# The rest of the runtime filesystem, as internal/image assembles it: /etc/passwd and
# /etc/group with the nonroot user (65532), its home, and a world-writable /tmp.
RUN cp -r internal/image/rootfs/etc /rootfs/etc \
 && mkdir -p -m 1777 /rootfs/tmp \
 && mkdir -p -m 700 /rootfs/home/nonroot \
 && chown 65532:65532 /rootfs/home/nonroot

# The runtime image: nothing pulled, the files above alone, run as uid/gid 65532.
FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
ENV PATH=/usr/local/bin:/usr/bin:/bin
ENTRYPOINT ["/sandbox-webhook"]
CMD ["serve"]
