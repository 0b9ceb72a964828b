#!/usr/bin/env bash
# The kernel-level leak experiment (make kernel-leak, docs/leak.md): churns
# sandbox pods' memory cgroups with a realistic uv cache (hack/kernelleak)
# on tmpfs (memory mode) and on an ext4 disk (leak mitigation), each run in
# a fresh boot of a Debian kernel in QEMU (software emulation), then on the
# machine's own kernel in a mount namespace of its own. Writes
# $OUT/results.csv (every sample), $OUT/summary.md (the table) and
# $OUT/dying.png. Needs root: apt-get (qemu-system-x86, gnuplot-nox) and,
# for the machine's own kernel, memory cgroups and tmpfs mounts.
#
# Settings (environment): KERNEL_LEAK_KERNELS (Debian packages, default
# linux-image-amd64 and linux-image-6.12-amd64: bookworm's 6.1 and 6.12),
# KERNEL_LEAK_PODS (100 per run), KERNEL_LEAK_FILES (1500 per pod's cache),
# KERNEL_LEAK_RUNS (3 per kernel and mode), KERNEL_LEAK_WAIT (60s),
# KERNEL_LEAK_HOST (1: also the machine's kernel), KERNEL_LEAK_OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${KERNEL_LEAK_OUT:-$root/_output/kernel-leak}
kernels=${KERNEL_LEAK_KERNELS:-linux-image-amd64 linux-image-6.12-amd64}
pods=${KERNEL_LEAK_PODS:-100}
files=${KERNEL_LEAK_FILES:-1500}
runs=${KERNEL_LEAK_RUNS:-3}
wait=${KERNEL_LEAK_WAIT:-60s}
host=${KERNEL_LEAK_HOST:-1}
every=$(( pods >= 20 ? pods / 10 : 1 ))

((EUID == 0)) || { echo "kernel-leak: run as root (apt-get, cgroups, mounts)" >&2; exit 1; }
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v xz >/dev/null || need+=(xz-utils)
if ((${#need[@]})); then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$out/debs" "$out/kernels"
bin=$out/kernelleak
(cd hack/kernelleak && CGO_ENABLED=0 go build -o "$bin" .)

# The kernels: the newest image each package names, unpacked once.
releases=()
for pkg in $kernels; do
	image=$pkg
	dep=$(apt-cache depends "$pkg" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
	[[ -n $dep ]] && image=$dep
	release=${image#linux-image-}
	if [[ ! -f $out/kernels/$release/boot/vmlinuz-$release ]]; then
		(cd "$out/debs" && apt-get download -q "$image" >/dev/null 2>&1)
		dpkg-deb -x "$out/debs/${image}"_*.deb "$out/kernels/$release"
	fi
	"$bin" initramfs --modules "$out/kernels/$release/lib/modules/$release" \
		--load virtio_pci,virtio_blk,crc32c_generic,ext4 --out "$out/kernels/$release/initrd.cpio"
	releases+=("$release")
done

csv=$out/results.csv
echo "kernel,mode,run,phase,pods,dying,num_cgroups,percpu_kib,slab_kib,sunreclaim_kib,shmem_kib,cached_kib" > "$csv"
start=$SECONDS
for run in $(seq 1 "$runs"); do
	for release in "${releases[@]}"; do
		for mode in memory disk; do
			disk=$out/disk.img
			rm -f "$disk"
			truncate -s 4G "$disk"
			mkfs.ext4 -q -F "$disk"
			t=$SECONDS
			log=$out/boot-$release-$mode-$run.log
			timeout 1800 qemu-system-x86_64 -accel tcg -m 1536 -smp 2 -nographic -no-reboot \
				-kernel "$out/kernels/$release/boot/vmlinuz-$release" \
				-initrd "$out/kernels/$release/initrd.cpio" \
				-append "console=ttyS0 quiet panic=-1 kl.mode=$mode kl.pods=$pods kl.files=$files kl.every=$every kl.wait=$wait kl.run=$run" \
				-drive "file=$disk,format=raw,if=virtio" > "$log" 2>&1 </dev/null || true
			tr -d '\r' < "$log" | grep -q '^kl-done,<nil>' || { echo "kernel-leak: $release $mode run $run failed, see $log" >&2; exit 1; }
			tr -d '\r' < "$log" | grep '^kl,' | cut -d, -f2- >> "$csv"
			echo "kernel-leak: $release $mode run $run: $((SECONDS - t)) s" >&2
			rm -f "$disk"
		done
	done
done
if [[ $host == 1 ]]; then
	node=$out/node
	for run in $(seq 1 "$runs"); do
		# Alternate the order: on a machine-wide count, what one mode's run
		# left is still being freed during the next.
		modes="memory disk"
		((run % 2 == 0)) && modes="disk memory"
		for mode in $modes; do
			mkdir -p "$node"
			t=$SECONDS
			"$bin" churn --mode "$mode" --pods "$pods" --files "$files" --every "$every" --wait "$wait" --run "$run" --node-dir "$node" |
				grep '^kl,' | cut -d, -f2- >> "$csv"
			rm -rf "$node"
			echo "kernel-leak: machine's kernel $mode run $run: $((SECONDS - t)) s" >&2
		done
	done
	# The same wait with no pods: how the machine-wide count drifts.
	b=$(awk '$1 == "memory" {print $3}' /proc/cgroups)
	sleep "${wait%s}"
	a=$(awk '$1 == "memory" {print $3}' /proc/cgroups)
	echo "idle drift of /proc/cgroups memory num_cgroups over $wait: $b -> $a" > "$out/host-idle.txt"
fi
echo "kernel-leak: all runs: $((SECONDS - start)) s" >&2

# The table: per kernel and mode, the dying memory cgroups after the churn,
# after the wait and after drop_caches (mean and range over the runs), and
# what percpu and slab memory grew by over the churn.
awk -F, -v pods="$pods" -v files="$files" -v runs="$runs" -v wait="$wait" '
NR == 1 { next }
{ k = $1 SUBSEP $2; key[k] = 1; r = k SUBSEP $3 }
$4 == "churn" && $5 == 0 { p0[r] = $8; s0[r] = $9 }
$4 == "churn" && $5 == pods { add(k, "churn", $6); dp = $8 - p0[r]; ds = $9 - s0[r]; add(k, "percpu", dp); add(k, "slab", ds) }
$4 == "waited" { add(k, "waited", $6) }
$4 == "dropped" { add(k, "dropped", $6) }
function add(k, what, v,   i) {
	i = k SUBSEP what
	n[i]++; sum[i] += v
	if (!(i in lo) || v < lo[i]) lo[i] = v
	if (!(i in hi) || v > hi[i]) hi[i] = v
}
function cell(k, what,   i) {
	i = k SUBSEP what
	if (!(i in n)) return "—"
	return sprintf("%.1f (%d–%d)", sum[i] / n[i], lo[i], hi[i])
}
END {
	printf "%d pods per run, %d files per uv cache, %s wait, %d runs per kernel and mode (each in a fresh boot for the QEMU kernels). Mean (min–max).\n\n", pods, files, wait, runs
	print "| kernel | mode | dying memcgs after the churn | after the wait | after drop_caches | percpu growth over the churn, KiB | slab growth, KiB |"
	print "|---|---|---:|---:|---:|---:|---:|"
	for (k in key) {
		split(k, kk, SUBSEP)
		printf "| %s | %s | %s | %s | %s | %s | %s |\n", kk[1], kk[2], cell(k, "churn"), cell(k, "waited"), cell(k, "dropped"), cell(k, "percpu"), cell(k, "slab")
	}
}' "$csv" > "$out/table.md"
{ head -4 "$out/table.md"; tail -n +5 "$out/table.md" | sort; } > "$out/summary.md"
rm "$out/table.md"
[[ -f $out/host-idle.txt ]] && { echo; cat "$out/host-idle.txt"; } >> "$out/summary.md"
cat "$out/summary.md"

# The plot: dying memory cgroups against pods churned, the mean of the runs
# per kernel and mode.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plot=""
while IFS=, read -r kernel mode; do
	f="$tmp/$kernel-$mode.dat"
	awk -F, -v k="$kernel" -v m="$mode" '$1 == k && $2 == m && $4 == "churn" { s[$5] += $6; n[$5]++ }
		END { for (p in s) print p, s[p] / n[p] }' "$csv" | sort -n > "$f"
	dt=1; [[ $mode == disk ]] && dt=2
	plot+="${plot:+, }\"$f\" with linespoints lw 2 dt $dt title \"$kernel, $mode mode\""
done < <(tail -n +2 "$csv" | cut -d, -f1,2 | sort -u)
gnuplot <<GP
set terminal pngcairo size 900,540 font ",11"
set output "$out/dying.png"
set title "Dying memory cgroups left by pod churn (uv cache of $files files per pod)"
set xlabel "pods churned"
set ylabel "dying memory cgroups (mean of $runs runs)"
set key top left
set grid
plot $plot
GP
echo "kernel-leak: wrote $csv, $out/summary.md, $out/dying.png" >&2
