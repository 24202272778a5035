#!/usr/bin/env bash
# Installs Azurite (the Azure Storage emulator, npm's `azurite`) under $1 for the object-storage tests; they
# start its Blob service on loopback (tests/object_stores.py) and skip Azure when npm is missing.
set -euo pipefail
prefix="${1:-.venv/azurite}"
if [ -x "$prefix/node_modules/.bin/azurite-blob" ]; then exit 0; fi
if ! command -v npm >/dev/null 2>&1; then echo "npm is missing: the Azure repository tests will skip" >&2; exit 0; fi
npm install --no-audit --no-fund --prefix "$prefix" 'azurite@^3' >/dev/null
