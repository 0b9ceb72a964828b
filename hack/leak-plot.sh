#!/usr/bin/env bash
# Plots the CSV of TestLeak (make node-leak): memory cgroups of the machine
# (/proc/cgroups num_cgroups, dying ones included) against pods churned, in
# memory mode, disk (leak-mitigation) mode and an idle phase of the same
# length. Installs gnuplot-nox (apt-get) when it is missing and run as root.
#
# Usage: hack/leak-plot.sh CSV PNG
set -euo pipefail
csv=$1 png=$2
if ! command -v gnuplot >/dev/null; then
	((EUID == 0)) || { echo "gnuplot missing: apt-get install gnuplot-nox" >&2; exit 1; }
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
fi
title=$(head -1 "$csv" | sed 's/^# //')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One file per mode, num_cgroups relative to the mode's first sample.
for mode in memory disk idle; do
	awk -F, -v m="$mode" '$1 == m { if (base == "") base = $3; print $2, $3 - base }' "$csv" > "$tmp/$mode.dat"
done
gnuplot <<GP
set terminal pngcairo size 900,540 font ",11"
set output "$png"
set title "Memory cgroups left behind by sandbox-pod churn\n{/*0.8 $title}"
set xlabel "pods churned (created, a uv cache of 1,488 small files written, deleted)"
set ylabel "memory cgroups added (/proc/cgroups num\\\\_cgroups)"
set key top left
set grid
plot "$tmp/memory.dat" with linespoints lw 2 title "memory mode (tmpfs uv cache)", \
     "$tmp/disk.dat" with linespoints lw 2 title "disk mode (leak mitigation)", \
     "$tmp/idle.dat" with linespoints lw 1 dt 2 title "no pods, same duration"
GP
echo "wrote $png" >&2
