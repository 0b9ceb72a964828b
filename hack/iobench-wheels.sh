#!/usr/bin/env bash
# Writes e2e/node/uvinstall/wheels.txt, the shapes of the wheels the io-bench
# pods install (make io-bench, docs/io.md): for each package of a
# scientific Python task's requirements, every regular file Debian bookworm
# ships under /usr/lib/python3/dist-packages, grouped by directory, with its
# size. No package index is reachable from these machines; Debian's
# packages are, and their file lists are public package metadata of the
# same modules (Debian drops some test suites and vendored data, so the
# shapes are, if anything, smaller than PyPI's wheels).
#
# Usage: hack/iobench-wheels.sh (needs apt-get download; no root)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/e2e/node/uvinstall/wheels.txt
# numpy, pandas, scipy, matplotlib and sympy with what they pull in, and a
# test runner's: the requirements of a data-science repository's tasks.
packages=(
	python3-numpy python3-pandas python3-pandas-lib python3-scipy python3-matplotlib
	python3-sympy python3-mpmath python3-dateutil python3-tz python3-six
	python3-pytest python3-pluggy python3-iniconfig python3-packaging python3-attr
	python3-hypothesis python3-sortedcontainers python3-coverage python3-requests
	python3-urllib3 python3-idna python3-certifi python3-charset-normalizer
	python3-yaml python3-jinja2 python3-markupsafe python3-click python3-typing-extensions
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -qq "${packages[@]}" 2>/dev/null)
{
	echo "# Wheel shapes for make io-bench, written by hack/iobench-wheels.sh from Debian bookworm:"
	for deb in "$tmp"/*.deb; do
		echo "# $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
	done
	echo "# Each line: package, directory (under site-packages), then the size of each regular file in it."
	for deb in "$tmp"/*.deb; do
		pkg=$(dpkg-deb -f "$deb" Package)
		dpkg-deb -c "$deb" | awk -v pkg="${pkg#python3-}" '
			$1 ~ /^-/ && $6 ~ /^\.\/usr\/lib\/python3\/dist-packages\// {
				p = substr($6, length("./usr/lib/python3/dist-packages/") + 1)
				d = p; sub(/\/[^\/]*$/, "", d); if (d == p) d = "."
				if (!(d in sizes)) order[n++] = d
				sizes[d] = sizes[d] " " $3
			}
			END { for (i = 0; i < n; i++) print pkg "\t" order[i] "\t" substr(sizes[order[i]], 2) }'
	done
} >"$out"
echo "wrote $out: $(grep -vc '^#' "$out") directories" >&2
