# syntax=docker/dockerfile:1
# Written by `make dockerfile` from hack/image, the image's one definition, which
# `make image` builds without a Docker engine: change it there, not here.
#
# The sandbox-webhook image for Docker users: the static binary on an empty base, no
# shell, non-root. Build it with `make docker-image` (docker build --build-arg
# VERSION=... .).

# build compiles the static binary exactly as `make build-server` builds bin/sandbox-webhook.
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
# The rest of the runtime filesystem: its directories with their modes and owners,
# then its files.
RUN mkdir -p -m 755 /rootfs/etc \
 && mkdir -p -m 755 /rootfs/home \
 && mkdir -p -m 700 /rootfs/home/nonroot \
 && chown 65532:65532 /rootfs/home/nonroot \
 && mkdir -p -m 1777 /rootfs/tmp
COPY <<'EOF' /rootfs/etc/group
root:x:0:
nonroot:x:65532:
EOF
COPY <<'EOF' /rootfs/etc/passwd
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF

# The runtime image: nothing pulled, the files above alone, run as 65532:65532.
FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
ENV PATH=/usr/local/bin:/usr/bin:/bin
ENTRYPOINT ["/sandbox-webhook"]
CMD ["serve"]
