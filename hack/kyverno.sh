#!/usr/bin/env bash
# Builds the pinned Kyverno CLI from its own module (e2e/tools/kyverno/go.mod)
# into bin/kyverno-VERSION/kyverno, unless it is there already, for
# `make kyverno-parity`. Needs only Go: the sources come from the Go module
# proxy.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod=$root/e2e/tools/kyverno
version=$(awk '$1 == "require" && $2 == "github.com/kyverno/kyverno" { print $3; exit }' "$mod/go.mod")
out=${BIN:-$root/bin}/kyverno-${version#v}

export CGO_ENABLED=0 GOWORK=off GOFLAGS=-buildvcs=false

if [[ -x $out/kyverno ]]; then
	echo "$out/kyverno"
	exit 0
fi
mkdir -p "$out"
start=$SECONDS
(cd "$mod" && go build -trimpath -ldflags "-s -w" -o "$out/kyverno.tmp" github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno)
mv "$out/kyverno.tmp" "$out/kyverno"
printf '[kyverno] built %s in %ss\n' "$out/kyverno" $((SECONDS - start)) >&2
echo "$out/kyverno"
