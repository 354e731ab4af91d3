#!/usr/bin/env bash
# Podman on a Debian 12 machine for `make compose-smoke` (deploy/README.md "Podman"): apt podman, runc,
# debootstrap (and openssl, chromium for the smoke's browser check); and, only when the file is absent,
# /etc/containers/containers.conf with the runc runtime, cgroupfs, a file event log and explicit ulimits
# (crun and the systemd cgroup manager fail on these machines; without default ulimits a container fails
# with "error setting rlimit type 7"). An existing containers.conf is left as it is.
set -euo pipefail
need=()
for tool in podman:podman runc:runc debootstrap:debootstrap openssl:openssl; do
  command -v "${tool%%:*}" > /dev/null || need+=("${tool#*:}")
done
if ((${#need[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # With its recommends: netavark and aardvark-dns (the compose network's DNS, service names), catatonit,
  # uidmap, slirp4netns, fuse-overlayfs.
  apt-get install -y -qq "${need[@]}" > /dev/null
fi
if [[ ! -e /etc/containers/containers.conf ]]; then
  mkdir -p /etc/containers
  cat > /etc/containers/containers.conf <<'CONF'
# Written by deploy/compose/podman-setup.sh (make compose-smoke) because no containers.conf existed.
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
fi
podman --version
