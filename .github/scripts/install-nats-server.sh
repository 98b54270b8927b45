#!/usr/bin/env bash
# Puts nats-server on PATH: the distribution package when there is one, else the pinned release binary.
set -euo pipefail
if command -v nats-server >/dev/null; then nats-server --version; exit 0; fi
if sudo apt-get update -qq && sudo apt-get install -y --no-install-recommends nats-server >/dev/null 2>&1; then nats-server --version; exit 0; fi
version="${NATS_SERVER_VERSION:-2.10.22}"
arch="$(dpkg --print-architecture)"
url="https://github.com/nats-io/nats-server/releases/download/v${version}/nats-server-v${version}-linux-${arch}.tar.gz"
curl -sSfL "$url" | tar -xz -C /tmp
sudo install -m 0755 "/tmp/nats-server-v${version}-linux-${arch}/nats-server" /usr/local/bin/nats-server
nats-server --version
