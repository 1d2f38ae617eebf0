#!/usr/bin/env bash
# Creates (once) the Python environment the toolkit tests use as real peers: Radicale (a CalDAV
# server) and aiosmtpd (an SMTP server) in target/py-toolkits. The server's API tests (crates/server/tests/api/peers.rs) run
# this on first use; CI runs it first so that an unreachable PyPI fails early and clearly.
# Prints the interpreter's path. Keep the pins and the marker in step with peers.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
pins=("radicale==3.*" "aiosmtpd==1.4.*")
venv="${CARGO_TARGET_DIR:-target}/py-toolkits"
marker="$venv/.installed-v2"
if [ ! -e "$marker" ]; then
  python3 -m venv "$venv" >&2
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2; then
    echo "could not install ${pins[*]} from PyPI into $venv: the toolkit tests need them" >&2
    exit 1
  fi
  printf '%s\n' "${pins[@]}" > "$marker"
fi
echo "$venv/bin/python"
