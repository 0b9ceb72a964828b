#!/usr/bin/env bash
# Installs qemu-user-static from Debian's packages, for `make arm64-e2e`: it
# runs the image's arm64 server binary on this amd64 machine. Needs root for
# apt-get; installs only what is missing. Prints the emulator's path.
set -euo pipefail

qemu=/usr/bin/qemu-aarch64-static
if [[ ! -x $qemu ]]; then
	if ((EUID != 0)); then
		echo "[arm64-tools] qemu-user-static is missing: run as root (apt-get install)" >&2
		exit 1
	fi
	echo "[arm64-tools] installing qemu-user-static (apt-get)" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static >/dev/null
fi
echo "$qemu"
