#!/usr/bin/env bash
# Builds the e2e control plane from the tools module (e2e/tools/go.mod) into
# bin/, the directory the e2e suite and the demo hand to envtest as
# KUBEBUILDER_ASSETS:
#
#   bin/kube-apiserver   k8s.io/kubernetes/cmd/kube-apiserver, version stamped
#   bin/etcd             go.etcd.io/etcd/server/v3
#   bin/kubectl          only when asked for (the demo): hack/tools.sh kubectl
#   bin/kubelet          only when asked for (make node-e2e): hack/tools.sh kubelet
#   bin/kube-controller-manager, bin/kube-scheduler, bin/kube-proxy, bin/registry
#                        only when asked for (make cluster-e2e); the registry
#                        (the CNCF distribution registry) from its own module
#                        e2e/tools/registry
#   bin/k8s-1.NN/kube-apiserver
#                        kube-apiserver@1.NN: an older minor of the e2e version
#                        matrix, from its own module e2e/tools/k8s-1.NN (it
#                        shares bin/etcd), compiled without inlining
#                        (-gcflags=all=-l): a fifth less CPU for a cold build,
#                        and no slower at the four tests the matrix runs. The
#                        newest minor and etcd keep the compiler's defaults:
#                        the whole suite and make bench time requests through
#                        them.
#
# Usage: hack/tools.sh [NAME...]
#   default: kube-apiserver etcd, and kube-apiserver@1.NN for every
#   e2e/tools/k8s-1.NN module: what `make test` needs. MATRIX=newest builds
#   only the newest minor (kube-apiserver etcd).
#
# A binary that is already there and reports the version pinned in its module
# is kept, so a second run costs a second. Needs only Go: the sources come from
# the Go module proxy; the build is static (CGO_ENABLED=0).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${BIN:-$root/bin}
tools=$root/e2e/tools

export CGO_ENABLED=0 GOWORK=off GOFLAGS=-buildvcs=false

log() { printf '[tools] %s\n' "$*" >&2; }

# modversion MODULE [DIR] prints the version of MODULE that DIR/go.mod
# (default e2e/tools/go.mod) requires.
modversion() {
	awk -v m="$1" '
		$1 == "require" && $2 == m { print $3; exit }
		$1 == m && $2 ~ /^v/ { print $2; exit }
	' "${2:-$tools}/go.mod"
}

# kube_ldflags VERSION prints the linker flags that stamp VERSION into a
# Kubernetes binary (what `kube-apiserver --version` and /version report).
kube_ldflags() {
	local version=$1 minor major
	minor=${version#v*.}
	minor=${minor%%.*}
	major=${version#v}
	major=${major%%.*}
	printf '%s' "-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
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

# build NAME PACKAGE LDFLAGS [MODDIR [GCFLAGS]] builds PACKAGE of the tools
# module (or of MODDIR) into bin/NAME, printing how many of its packages have
# been compiled as it goes (go build -v names each package it compiles; cached
# ones are not counted).
build() {
	local name=$1 pkg=$2 ldflags=$3 dir=${4:-$tools} gcflags=${5:-} total start out
	start=$SECONDS
	out=$bin/$name
	log "$name: resolving $pkg (the first run downloads its modules)"
	total=$(cd "$dir" && go list -deps "$pkg" | wc -l)
	log "$name: compiling up to $total packages (a cold build takes a few minutes on two cores)"
	mkdir -p "$(dirname "$out")"
	(cd "$dir" && go build -v ${gcflags:+-gcflags "$gcflags"} -ldflags "$ldflags" -o "$out.tmp" "$pkg") 2>&1 |
		awk -v name="$name" -v total="$total" '
			/^[A-Za-z0-9_.\/~-]+$/ {
				n++
				if (n % 100 == 0) { printf "[tools] %s: %d/%d packages compiled\n", name, n, total; fflush() }
				next
			}
			{ print; fflush() }
			END { if (n) printf "[tools] %s: %d packages compiled\n", name, n }
		' >&2
	mv -f "$out.tmp" "$out"
	log "$name: built in $((SECONDS - start))s -> $out"
}

kube_version=$(modversion k8s.io/kubernetes)
etcd_version=$(modversion go.etcd.io/etcd/server/v3)
[[ -n $kube_version && -n $etcd_version ]] || {
	log "cannot read the k8s.io/kubernetes and go.etcd.io/etcd/server/v3 versions from $tools/go.mod"
	exit 1
}
kube_ldflags=$(kube_ldflags "$kube_version")
# The compiler flags of the matrix's older kube-apiservers (see the top).
older_gcflags=all=-l

names=("$@")
if ((!${#names[@]})); then
	names=(kube-apiserver etcd)
	if [[ ${MATRIX:-all} != newest ]]; then
		for dir in "$tools"/k8s-1.*/; do
			[[ -f $dir/go.mod ]] && names+=("kube-apiserver@$(basename "$dir" | sed 's/^k8s-//')")
		done
	fi
fi

for name in "${names[@]}"; do
	moddir=$tools out=$name gcflags=
	case $name in
	kube-apiserver@*)
		moddir=$tools/k8s-${name#kube-apiserver@} out=k8s-${name#kube-apiserver@}/kube-apiserver
		[[ -f $moddir/go.mod ]] || {
			log "$name: no module $moddir (the matrix has: $(cd "$tools" && echo k8s-1.*))"
			exit 2
		}
		version=$(modversion k8s.io/kubernetes "$moddir")
		want=("Kubernetes $version") pkg=k8s.io/kubernetes/cmd/kube-apiserver ldflags=$(kube_ldflags "$version")
		gcflags=$older_gcflags ;;
	kube-apiserver)
		want=("Kubernetes $kube_version") pkg=k8s.io/kubernetes/cmd/kube-apiserver ldflags=$kube_ldflags ;;
	kubectl)
		want=("$kube_version") pkg=k8s.io/kubernetes/cmd/kubectl ldflags=$kube_ldflags ;;
	kubelet | kube-controller-manager | kube-scheduler | kube-proxy)
		want=("Kubernetes $kube_version") pkg=k8s.io/kubernetes/cmd/$name ldflags=$kube_ldflags ;;
	etcd)
		want=("etcd Version: ${etcd_version#v}") pkg=go.etcd.io/etcd/server/v3 ldflags="-s -w" ;;
	registry)
		moddir=$tools/registry
		version=$(modversion github.com/distribution/distribution/v3 "$moddir")
		want=("$version") pkg=github.com/distribution/distribution/v3/cmd/registry
		ldflags="-s -w -X github.com/distribution/distribution/v3/version.version=$version" ;;
	*)
		log "unknown tool $name (known: kube-apiserver etcd kubectl kubelet kube-controller-manager kube-scheduler kube-proxy registry kube-apiserver@1.NN)"
		exit 2 ;;
	esac
	if reports "$bin/$out" "${want[@]}"; then
		log "$name: up to date ($bin/$out reports ${want[*]})"
		continue
	fi
	build "$out" "$pkg" "$ldflags" "$moddir" "$gcflags"
	reports "$bin/$out" "${want[@]}" || {
		log "$name: the new binary does not report ${want[*]}:"
		"$bin/$out" --version >&2 || true
		exit 1
	}
done
