#!/usr/bin/env bash
# Installs Chromium from Debian's packages when it is missing: the playground's browser test drives it through
# Playwright (which cannot download its own browsers here), at /usr/bin/chromium.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "chromium is missing; install it (apt-get install chromium)" >&2; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
