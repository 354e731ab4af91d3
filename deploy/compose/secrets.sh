#!/usr/bin/env bash
# The secrets docker-compose.yml reads, written into deploy/compose/secrets/ (git-ignored), each 0600 in a
# 0700 directory: the Redis password, the web replicas' CSRF secret, the OAuth token key, the answer key and
# nginx's self-signed TLS certificate for 127.0.0.1 / localhost (30 days).
#   deploy/compose/secrets.sh [DIR]      an existing file is kept (MAKA_SECRETS_FORCE=1 writes them all again)
# The services read them as the image's uid 10001 (Redis as 999, nginx's master as root): with rootful Podman
# or Docker a bind-mounted or `secrets:` file keeps its host owner and mode, so the files the containers read
# are made readable (0644) inside the 0700 directory, which only root can enter.
set -euo pipefail
dir="${1:-$(cd "$(dirname "$0")" && pwd)/secrets}"
force="${MAKA_SECRETS_FORCE:-0}"
mkdir -p "$dir" && chmod 0700 "$dir"
cd "$dir"
write() {  # write NAME COMMAND...: the command's output into NAME, unless NAME exists
  local name="$1"; shift
  if [[ "$force" == 1 || ! -s "$name" ]]; then
    (umask 077 && "$@" > "$name.tmp" && mv "$name.tmp" "$name")
  fi
}
write redis_password openssl rand -hex 32
write web_secret openssl rand -hex 32
write oauth_key sh -c 'head -c 32 /dev/urandom | base64'
write answer_key sh -c 'head -c 32 /dev/urandom | base64'
if [[ "$force" == 1 || ! -s tls.key || ! -s tls.crt ]]; then
  (umask 077 && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout tls.key -out tls.crt 2> /dev/null)
fi
chmod 0644 redis_password web_secret oauth_key answer_key tls.key tls.crt
echo "secrets in $dir"
