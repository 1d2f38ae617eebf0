#!/usr/bin/env bash
# Creates (once) the Python environment the MCP tests use as their real peer: the official MCP
# Python SDK in target/py-mcp. The Rust tests do the same on first use (under a lock); CI runs
# this first so that an unreachable PyPI fails early and clearly. Prints the interpreter's path.
set -euo pipefail
cd "$(dirname "$0")/.."
pin="mcp==2.3.*"
venv="${CARGO_TARGET_DIR:-target}/py-mcp"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
  python3 -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$pin"; then
    echo "could not install $pin from PyPI into $venv: the MCP tests need it (or set SWITCHBOARD_PYTHON to a Python with mcp installed)" >&2
    exit 1
  fi
fi
echo "$venv/bin/python"
