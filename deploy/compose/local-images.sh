#!/usr/bin/env bash
# Local equivalents of docker-compose.yml's Redis and nginx images, from Debian's packages on the same base as
# the Maka image (deploy/compose/base-image.sh), for machines that cannot pull from an image registry:
#   deploy/compose/local-images.sh [BASE_IMAGE]
#   MAKA_REDIS_IMAGE=localhost/maka-redis:local MAKA_NGINX_IMAGE=localhost/maka-nginx:local podman-compose up
# Same config files (the compose file's command, nginx.conf and health check run unchanged), same ports (6379,
# 8443 from nginx.conf), same users (redis 999:1000; nginx's master root, workers 101:101) as
# redis:7.4-alpine and nginx:1.27-alpine. MAKA_BUILD_CA=/path/to/ca-bundle.crt mounts a CA bundle for apt
# during the build only (default: the host's, when present); it never lands in a layer.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
base="${1:-localhost/maka-base:trixie}"
ca="${MAKA_BUILD_CA:-/etc/ssl/certs/ca-certificates.crt}"
mount=()
[[ -f "$ca" ]] && mount=(-v "$ca:/etc/ssl/certs/ca-certificates.crt:ro")
for name in redis nginx; do
  podman build -q "${mount[@]}" --build-arg "BASE_IMAGE=$base" -f "$here/images/$name.Containerfile" \
    -t "localhost/maka-$name:local" "$here/images"
done
