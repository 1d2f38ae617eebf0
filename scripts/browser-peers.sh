#!/usr/bin/env bash
# Installs (once) what the console's browser test (crates/server/tests/api/console_browser.rs)
# needs: Debian's Chromium at /usr/bin/chromium, and playwright-core, pinned by
# crates/server/tests/browser/package-lock.json, in target/browser (never a browser download:
# Playwright drives the Debian Chromium). CI runs this first so that an unreachable registry fails
# the run here, clearly. Prints the node_modules directory.
set -euo pipefail
cd "$(dirname "$0")/.."
spec=crates/server/tests/browser
dir="${CARGO_TARGET_DIR:-target}/browser"

if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" != "0" ]; then
    echo "/usr/bin/chromium is missing and this is not root: install Debian's chromium package (apt-get install -y chromium)" >&2
    exit 1
  fi
  echo "installing Debian's chromium package" >&2
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >&2; then
    echo "could not install Debian's chromium package (apt-get failed: is the Debian mirror reachable?): the console's browser test needs /usr/bin/chromium" >&2
    exit 1
  fi
fi

marker="$dir/.installed-$(sha256sum "$spec/package-lock.json" | cut -c1-16)"
if [ ! -e "$marker" ]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$spec/package.json" "$spec/package-lock.json" "$dir/"
  if ! (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) >&2; then
    echo "could not install playwright-core from the npm registry (npm ci in $dir failed): the console's browser test needs it" >&2
    exit 1
  fi
  touch "$marker"
fi
echo "$dir/node_modules"
