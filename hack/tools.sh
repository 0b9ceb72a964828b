#!/usr/bin/env bash
# Builds the e2e control plane from the tools module (e2e/tools/go.mod) into
# bin/, the directory the e2e suite and the demo hand to envtest as
# KUBEBUILDER_ASSETS:
#
#   bin/kube-apiserver   k8s.io/kubernetes/cmd/kube-apiserver, version stamped
#   bin/etcd             go.etcd.io/etcd/server/v3
#   bin/kubectl          only when asked for (the demo): hack/tools.sh kubectl
#   bin/kubelet          only when asked for (make node-e2e): hack/tools.sh kubelet
#
# Usage: hack/tools.sh [NAME...]   (default: kube-apiserver etcd)
#
# A binary that is already there and reports the version pinned in
# e2e/tools/go.mod is kept, so a second run costs a second. Needs only Go: the
# sources come from the Go module proxy; the build is static (CGO_ENABLED=0).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${BIN:-$root/bin}
tools=$root/e2e/tools

export CGO_ENABLED=0 GOWORK=off GOFLAGS=-buildvcs=false

log() { printf '[tools] %s\n' "$*" >&2; }

# modversion MODULE prints the version of MODULE that e2e/tools/go.mod requires.
modversion() {
	awk -v m="$1" '
		$1 == "require" && $2 == m { print $3; exit }
		$1 == m && $2 ~ /^v/ { print $2; exit }
	' "$tools/go.mod"
}

# reports BINARY WANT... succeeds when BINARY exists and its --version output
# contains every WANT.
reports() {
	local binary=$1 out want
	shift
	[[ -x $binary ]] || return 1
	out=$("$binary" --version 2>&1) || out=$("$binary" version --client 2>&1) || return 1
	for want in "$@"; do
		[[ $out == *"$want"* ]] || return 1
	done
}

# build NAME PACKAGE LDFLAGS builds PACKAGE of the tools module into bin/NAME,
# printing how many of its packages have been compiled as it goes (go build -v
# names each package it compiles; cached ones are not counted).
build() {
	local name=$1 pkg=$2 ldflags=$3 total start
	start=$SECONDS
	log "$name: resolving $pkg (the first run downloads its modules)"
	total=$(cd "$tools" && go list -deps "$pkg" | wc -l)
	log "$name: compiling up to $total packages (a cold build takes a few minutes on two cores)"
	mkdir -p "$bin"
	(cd "$tools" && go build -v -ldflags "$ldflags" -o "$bin/.$name.tmp" "$pkg") 2>&1 |
		awk -v name="$name" -v total="$total" '
			/^[A-Za-z0-9_.\/~-]+$/ {
				n++
				if (n % 100 == 0) { printf "[tools] %s: %d/%d packages compiled\n", name, n, total; fflush() }
				next
			}
			{ print; fflush() }
			END { if (n) printf "[tools] %s: %d packages compiled\n", name, n }
		' >&2
	mv -f "$bin/.$name.tmp" "$bin/$name"
	log "$name: built in $((SECONDS - start))s -> $bin/$name"
}

kube_version=$(modversion k8s.io/kubernetes)
etcd_version=$(modversion go.etcd.io/etcd/server/v3)
[[ -n $kube_version && -n $etcd_version ]] || {
	log "cannot read the k8s.io/kubernetes and go.etcd.io/etcd/server/v3 versions from $tools/go.mod"
	exit 1
}
kube_minor=${kube_version#v*.}
kube_minor=${kube_minor%%.*}
kube_major=${kube_version#v}
kube_major=${kube_major%%.*}
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=$kube_major -X k8s.io/component-base/version.gitMinor=$kube_minor -X k8s.io/component-base/version.gitTreeState=clean"

names=("$@")
((${#names[@]})) || names=(kube-apiserver etcd)

for name in "${names[@]}"; do
	case $name in
	kube-apiserver)
		want=("Kubernetes $kube_version") pkg=k8s.io/kubernetes/cmd/kube-apiserver ldflags=$kube_ldflags ;;
	kubectl)
		want=("$kube_version") pkg=k8s.io/kubernetes/cmd/kubectl ldflags=$kube_ldflags ;;
	kubelet)
		want=("Kubernetes $kube_version") pkg=k8s.io/kubernetes/cmd/kubelet ldflags=$kube_ldflags ;;
	etcd)
		want=("etcd Version: ${etcd_version#v}") pkg=go.etcd.io/etcd/server/v3 ldflags="-s -w" ;;
	*)
		log "unknown tool $name (known: kube-apiserver etcd kubectl kubelet)"
		exit 2 ;;
	esac
	if reports "$bin/$name" "${want[@]}"; then
		log "$name: up to date ($bin/$name reports ${want[*]})"
		continue
	fi
	build "$name" "$pkg" "$ldflags"
	reports "$bin/$name" "${want[@]}" || {
		log "$name: the new binary does not report ${want[*]}:"
		"$bin/$name" --version >&2 || true
		exit 1
	}
done
