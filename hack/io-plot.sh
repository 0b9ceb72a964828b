#!/usr/bin/env bash
# Plots the summary CSV of TestIOBench (make io-bench): per setup, against
# the number of pods installing at once, what reached the device per pod (the
# writeback after the installs included), its queue (iostat's aqu-sz,
# averaged over the installs' window) and the pods' install time (p50).
# Needs gnuplot (hack/node-tools.sh io installs it).
#
# Usage: hack/io-plot.sh SUMMARY_CSV PNG
set -euo pipefail
csv=$1 png=$2
command -v gnuplot >/dev/null || { echo "gnuplot missing: hack/node-tools.sh io installs it" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
setups=(io-plain io-plain-copy io-memory io-disk)
titles=("no webhook, hardlinks" "no webhook, UV\\\\_LINK\\\\_MODE=copy" "memory mode (tmpfs)" "disk mode")
# Columns of summary.csv: setup (1), pods (2), aqu-sz (5), mib_total (11),
# install_p50 (12).
for s in "${setups[@]}"; do
	awk -F, -v s="$s" '$1 == s { print $2, $11 / $2, $5, $12 }' "$csv" >"$tmp/$s.dat"
done
plot() { # column, then the plot's lines
	local col=$1 sep="" i
	for i in "${!setups[@]}"; do
		printf '%s"%s" using 1:%s with linespoints lw 2 title "%s"' "$sep" "$tmp/${setups[$i]}.dat" "$col" "${titles[$i]}"
		sep=", "
	done
}
gnuplot <<GP
set terminal pngcairo size 1500,560 font ",11"
set output "$png"
set multiplot layout 1,3 title "A cold uv install of 6,194 files (173 MiB) per pod, N pods at once on one node's disk (make io-bench)"
set xlabel "pods installing at once"
set grid
set key below maxrows 2
set yrange [0:*]
set title "MiB written to the device per pod (writeback included)"
plot $(plot 2)
set title "device queue (iostat aqu-sz, window mean)"
plot $(plot 3)
set title "install time p50 (s)"
plot $(plot 4)
unset multiplot
GP
echo "wrote $png" >&2
