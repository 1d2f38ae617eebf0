#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer) of what reads untrusted input: tool
# definitions, templates and expressions, a model's arguments, webhook deliveries and Realtime
# server events. The targets live in fuzz/, a Cargo workspace of its own.
#
# Each target runs for SWITCHBOARD_FUZZ_SECONDS (30) from its committed seeds (fuzz/seeds/) and
# the corpus earlier runs grew (fuzz/corpus/, not committed); a crash is saved under
# fuzz/artifacts/<target>/ and makes the script exit non-zero once every target has run.
# Arguments name targets to run (default: all of them).
#
# Uses the nightly toolchain with AddressSanitizer when one is installed; otherwise stable with
# RUSTC_BOOTSTRAP=1 and no sanitizer (a sanitizer needs nightly's -Zbuild-std to be reliable).
# Installs cargo-fuzz (`cargo install cargo-fuzz --locked`) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds="${SWITCHBOARD_FUZZ_SECONDS:-30}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  toolchain=(+nightly)
  sanitizer=address
else
  toolchain=()
  sanitizer=none
  export RUSTC_BOOTSTRAP=1
fi

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo "${toolchain[@]}" fuzz list)
fi

echo "== building ${targets[*]} (sanitizer: $sanitizer)"
cargo "${toolchain[@]}" fuzz build --sanitizer "$sanitizer"

failed=()
for target in "${targets[@]}"; do
  echo "== $target: $seconds s"
  mkdir -p "corpus/$target" "seeds/$target"
  # -rss_limit_mb and -malloc_limit_mb catch runaway memory; -timeout a runaway input.
  if ! cargo "${toolchain[@]}" fuzz run --sanitizer "$sanitizer" "$target" \
    "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -max_len=65536 -print_final_stats=1; then
    failed+=("$target")
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "== crashes in: ${failed[*]} (inputs under fuzz/artifacts/)"
  exit 1
fi
echo "== ${#targets[@]} targets, no crash"
