#!/usr/bin/env bash
# Creates (once) the Python environment the MCP tests use as their real peer: the official MCP
# Python SDK in target/py-mcp. The Rust tests (crates/server/tests/mcp/python.rs) do the same on
# first use; CI runs this first so that an unreachable PyPI fails early and clearly. Prints the
# interpreter's path. Keep the pin and the marker in step with python.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
pin="mcp==2.3.*"
venv="${CARGO_TARGET_DIR:-target}/py-mcp"
marker="$venv/.installed-mcp-2.3"
if [ ! -e "$marker" ]; then
  python3 -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$pin"; then
    echo "could not install $pin from PyPI into $venv: the MCP tests need it (or set SWITCHBOARD_PYTHON to a Python with mcp installed)" >&2
    exit 1
  fi
  echo "$pin" > "$marker"
fi
echo "$venv/bin/python"
