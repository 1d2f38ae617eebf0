#!/usr/bin/env bash
# Creates (once) the Python environment of the Python client's tests (clients/python): the
# client itself (editable, so the tests see the working tree), pytest, and the voice frameworks
# its adapters are tested against, at the versions they are tested with, and mypy (CI checks
# the package with --strict), in target/py-client.
# crates/cli/tests/python.rs runs it on first use; CI runs it first so that an unreachable
# PyPI fails early and clearly. Prints the interpreter's path. Keep the pins in step with
# clients/python/README.md.
#
# `--livekit2` makes a second, small environment instead, target/py-client-lk2: the client with
# the LiveKit Agents 2.0 pre-release (and pytest), for the tests of the LiveKit adapter on 2.0
# (clients/python/tests/livekit2); the default environment stays on LiveKit 1.8.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--livekit2" ]; then
  pins=(
    "httpx==0.28.1"
    "pytest==9.2.0"
    "pytest-asyncio==1.5.0"
    "livekit-agents==2.0.0b1"
  )
  venv="${CARGO_TARGET_DIR:-target}/py-client-lk2"
elif [ -n "${1:-}" ]; then
  echo "usage: $0 [--livekit2]" >&2
  exit 2
else
  pins=(
    "httpx==0.28.1"
    "pytest==9.2.0"
    "pytest-asyncio==1.5.0"
    "livekit-agents==1.8.9"
    "pipecat-ai[daily]==1.14.0"
    "openai-agents==0.24.0"
    "mcp==2.3.0"
    "mypy==2.4.1"
  )
  venv="${CARGO_TARGET_DIR:-target}/py-client"
fi
marker="$venv/.installed-$(printf '%s\n' "${pins[@]}" | cksum | cut -d' ' -f1)"
if [ ! -e "$marker" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"; then
    echo "could not install ${pins[*]} from PyPI into $venv: the Python client's tests need them" >&2
    exit 1
  fi
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e ./clients/python; then
    echo "could not install clients/python into $venv (pip install -e ./clients/python)" >&2
    exit 1
  fi
  touch "$marker"
fi
echo "$venv/bin/python"
