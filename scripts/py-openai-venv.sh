#!/usr/bin/env bash
# Creates (once) the Python environment the GPT-Live tests check their traffic with: the official
# `openai` Python SDK (its `openai.types.live` types) in target/py-openai. The Rust test
# (crates/server/tests/api/live_sdk.rs) does the same on first use; CI runs this first so that an
# unreachable PyPI fails early and clearly. Prints the interpreter's path. Keep the pin and the
# marker in step with live_sdk.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
pin="openai>=3.51,<4"
venv="${CARGO_TARGET_DIR:-target}/py-openai"
marker="$venv/.installed-openai-3.51"
if [ ! -e "$marker" ]; then
  python3 -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$pin"; then
    echo "could not install $pin from PyPI into $venv: the GPT-Live SDK check needs it" >&2
    exit 1
  fi
  echo "$pin" > "$marker"
fi
echo "$venv/bin/python"
