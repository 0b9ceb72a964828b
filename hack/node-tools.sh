#!/usr/bin/env bash
# Installs what `make node-e2e` runs besides the control plane: containerd,
# runc and a static busybox (the one image's only binary) from Debian's
# packages, and builds bin/kubelet from e2e/tools like kube-apiserver
# (hack/tools.sh kubelet). With "cluster" (make cluster-e2e) also the pod
# network's CNI plugins, iptables and conntrack for kube-proxy, and builds
# kube-controller-manager, kube-scheduler, kube-proxy and the registry the
# image and chart are pushed to. With "io" (make io-bench) also iostat
# (sysstat) and gnuplot for the plot. Needs root for
# apt-get; installs only what is missing, so a second run costs a second.
#
# Usage: hack/node-tools.sh [cluster|io]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf '[node-tools] %s\n' "$*" >&2; }

packages=(containerd runc busybox-static)
tools=(kubelet)
if [[ ${1:-} == cluster ]]; then
	packages+=(containernetworking-plugins iptables conntrack)
	tools+=(kube-controller-manager kube-scheduler kube-proxy registry)
fi
if [[ ${1:-} == io ]]; then
	packages+=(sysstat gnuplot-nox)
fi
missing=()
for pkg in "${packages[@]}"; do
	[[ $(dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null) == *" installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
	if ((EUID != 0)); then
		log "missing ${missing[*]}: run as root (apt-get install)"
		exit 1
	fi
	log "installing ${missing[*]} (apt-get)"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
	log "${packages[*]}: installed"
fi
# Debian's package starts no daemon in a container without systemd; the node
# e2e runs its own containerd with its own configuration and socket.
bash "$root/hack/tools.sh" "${tools[@]}"
