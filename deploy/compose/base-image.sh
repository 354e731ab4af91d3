#!/usr/bin/env bash
# A Debian trixie base with CPython 3.13 at /usr/bin/python3, made without an image registry: debootstrap
# from this machine's own Debian mirror, imported into Podman. The Dockerfile builds on it as on
# python:3.13-slim (`--build-arg PYTHON_IMAGE=localhost/maka-base:trixie`). It carries no pip: python3-venv
# brings ensurepip's wheel, from which the Dockerfile's build stage makes its venv.
#   deploy/compose/base-image.sh [IMAGE]      (default localhost/maka-base:trixie; kept when it exists,
#                                              MAKA_BASE_REBUILD=1 makes it again)
set -euo pipefail
image="${1:-localhost/maka-base:trixie}"
if [[ "${MAKA_BASE_REBUILD:-0}" != 1 ]] && podman image exists "$image"; then
  echo "base image $image exists (MAKA_BASE_REBUILD=1 makes it again)"
  exit 0
fi
# The mirror this machine's apt uses (deb822 .sources or one-line sources.list), else deb.debian.org.
mirror="$(
  { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}'
    grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}'
  } | grep -v security | head -n1 || true
)"
mirror="${mirror:-http://deb.debian.org/debian}"
rootfs="$(mktemp -d /tmp/maka-base.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap trixie from $mirror"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates trixie "$rootfs" "$mirror" > "$rootfs.log" 2>&1 \
  || { tail -n 30 "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
# Without PATH in the image, `podman kube play` finds no python3 (`podman run` supplies a default).
tar -C "$rootfs" -c . | podman import \
  --change "ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change 'CMD=["/bin/bash"]' - "$image"
