#!/usr/bin/env bash
# Installs (once) the TypeScript client's dependencies (clients/typescript: the voice frameworks
# its adapters are tested against, TypeScript and openapi-typescript, pinned exactly by
# package-lock.json) with `npm ci` into target/ts-client, and links
# clients/typescript/node_modules to it (ignored by git) so the compiler and node resolve them.
# crates/cli/tests/typescript.rs runs it on first use; CI runs it first so that an unreachable
# npm registry fails early and clearly. Prints the install directory.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir="${CARGO_TARGET_DIR:-target}/ts-client"
case "$dir" in /*) ;; *) dir="$root/$dir" ;; esac
marker="$dir/.installed-$(cat clients/typescript/package.json clients/typescript/package-lock.json | cksum | cut -d' ' -f1)"
if [ ! -e "$marker" ]; then
  rm -rf "$dir/node_modules" "$dir"/.installed-*
  mkdir -p "$dir"
  cp clients/typescript/package.json clients/typescript/package-lock.json "$dir/"
  if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null); then
    echo "could not install clients/typescript's dependencies from the npm registry into $dir (npm ci): the TypeScript client's tests need them" >&2
    exit 1
  fi
  touch "$marker"
fi
link=clients/typescript/node_modules
if [ "$(readlink "$link" 2>/dev/null)" != "$dir/node_modules" ]; then
  rm -rf "$link"
  ln -s "$dir/node_modules" "$link"
fi
echo "$dir"
