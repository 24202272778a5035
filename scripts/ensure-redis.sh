#!/usr/bin/env bash
# Installs redis-server from Debian's packages when it is missing (the tests start their own instances).
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "redis-server is missing; install it (apt-get install redis-server)" >&2; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq redis-server >/dev/null
systemctl disable --now redis-server >/dev/null 2>&1 || true   # tests start their own on free ports
