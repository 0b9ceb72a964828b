#!/usr/bin/env bash
# Builds a pinned Kyverno binary from its own module (e2e/tools/kyverno/go.mod)
# into bin/kyverno-VERSION/, unless it is there already, and prints its path.
# Needs only Go: the sources come from the Go module proxy.
#
#   hack/kyverno.sh [cli]   the Kyverno CLI, for `make kyverno-parity`
#   hack/kyverno.sh admission
#                           the admission controller and, beside it in crds/,
#                           the CRDs it needs, for `make kyverno-cutover`
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod=$root/e2e/tools/kyverno
version=$(awk '$1 == "require" && $2 == "github.com/kyverno/kyverno" { print $3; exit }' "$mod/go.mod")
out=${BIN:-$root/bin}/kyverno-${version#v}

export CGO_ENABLED=0 GOWORK=off GOFLAGS=-buildvcs=false

case ${1:-cli} in
cli) name=kyverno pkg=github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno ;;
admission) name=kyverno-admission-controller pkg=github.com/kyverno/kyverno/cmd/kyverno ;;
*)
	echo "usage: $0 [cli|admission]" >&2
	exit 2
	;;
esac

mkdir -p "$out"
if [[ ! -x $out/$name ]]; then
	start=$SECONDS
	(cd "$mod" && go build -trimpath -ldflags "-s -w" -o "$out/$name.tmp" "$pkg")
	mv "$out/$name.tmp" "$out/$name"
	printf '[kyverno] built %s in %ss\n' "$out/$name" $((SECONDS - start)) >&2
fi
if [[ $name == kyverno-admission-controller && ! -d $out/crds ]]; then
	src=$(cd "$mod" && go list -m -f '{{.Dir}}' github.com/kyverno/kyverno)
	rm -rf "$out/crds.tmp"
	cp -r "$src/config/crds" "$out/crds.tmp"
	chmod -R u+w "$out/crds.tmp"
	mv "$out/crds.tmp" "$out/crds"
fi
echo "$out/$name"
