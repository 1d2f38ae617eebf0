#!/usr/bin/env bash
# Schema-driven fuzzing of the REST API: schemathesis (from PyPI, in a virtual environment under
# target/) generates requests from GET /openapi.json and fails on any 5xx answer.
#
# Starts `switchboard serve` on a fresh SQLite file, makes a tenant with a tool and an agent,
# fuzzes every operation with the tenant's key (and the tenant operations with the admin key),
# then stops the server. Exits non-zero when schemathesis reports a failure.
#
# One worker: with several, CPython 3.11 can fail inside hypothesis (`SystemError: AST
# constructor recursion depth mismatch`), a schemathesis run error that is not a finding.
#
# Knobs: SWITCHBOARD_FUZZ_EXAMPLES (examples per operation, 30), SWITCHBOARD_FUZZ_TIME (seconds
# for the tenant-key run, 90; the admin run gets a third of it), SWITCHBOARD_FUZZ_VENV.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

venv="${SWITCHBOARD_FUZZ_VENV:-$root/target/fuzz-venv}"
examples="${SWITCHBOARD_FUZZ_EXAMPLES:-30}"
max_time="${SWITCHBOARD_FUZZ_TIME:-90}"
checks="${SWITCHBOARD_FUZZ_CHECKS:-all}"

if [ ! -x "$venv/bin/schemathesis" ]; then
  echo "== installing schemathesis into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis>=4,<5"
fi
"$venv/bin/schemathesis" --version

cargo build --quiet --locked -p switchboard-cli
bin="$root/target/debug/switchboard"

work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# A free port; if another process takes it before the server binds, try another.
for _ in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  base="http://127.0.0.1:$port"
  rm -f "$work"/fuzz.db* "$work/serve.log"
  "$bin" serve --database "sqlite://$work/fuzz.db" --listen "127.0.0.1:$port" \
    --key-file "$work/master.key" --log-format text 2>"$work/serve.log" &
  pid=$!
  for _ in $(seq 1 100); do
    if curl -fsS -m 2 "$base/readyz" >/dev/null 2>&1 || ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.1
  done
  if curl -fsS -m 2 "$base/readyz" >/dev/null 2>&1; then break; fi
  wait "$pid" 2>/dev/null || true
  pid=""
  grep -q "cannot listen" "$work/serve.log" || { cat "$work/serve.log"; exit 1; }
done
[ -n "$pid" ] || { echo "the server did not start"; cat "$work/serve.log"; exit 1; }
echo "== switchboard serve on $base"

admin=$(sed -n 's/.*created the admin key[^:]*: //p' "$work/serve.log")
[ -n "$admin" ] || { echo "no admin key in the server's log"; cat "$work/serve.log"; exit 1; }

api() { # method path key [body]
  curl -fsS -m 10 -X "$1" -H "Authorization: Bearer $3" -H 'Content-Type: application/json' \
    ${4:+-d "$4"} "$base$2"
}
api POST /v1/tenants "$admin" '{"id": "acme"}' >/dev/null
key=$(api POST /v1/tenants/acme/api-keys "$admin" '{}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
# Some data for the operations on one resource to find.
api POST /v1/tools "$key" '{"name": "save_meal", "description": "Log a meal",
  "parameters": [{"name": "meal_type", "type": "string", "required": true}],
  "actions": [{"type": "context.set", "data": {"logged_meals[+]": "{{params}}"}}],
  "on_success": [{"type": "respond", "message": "Logged."}]}' >/dev/null
api PUT /v1/agents/assistant "$key" '{"instructions": "Help.", "default": true, "tools": [{"tool": "save_meal"}]}' >/dev/null
api POST /v1/calls "$key" '{"call_id": "call_fuzz"}' >/dev/null

status=0
run() { # key max-time extra-args...
  local auth=$1 time=$2
  shift 2
  # From the work directory: schemathesis keeps its state (.hypothesis) in the current one.
  (cd "$work" && "$venv/bin/schemathesis" --no-color --config-file "$root/schemathesis.toml" \
    run "$base/openapi.json" \
    -H "Authorization: Bearer $auth" \
    --checks "$checks" \
    --max-examples "$examples" --max-time "$time" \
    --workers 1 --request-timeout 30 --seed 1 \
    --suppress-health-check all --warnings off "$@") || status=1
}
echo "== schemathesis: the tenant API"
run "$key" "$max_time" --exclude-tag tenants
echo "== schemathesis: tenants (admin key)"
run "$admin" "$((max_time / 3 + 1))" --include-tag tenants

if grep -E -q "panicked|\bERROR\b" "$work/serve.log"; then
  echo "== the server logged errors:"
  grep -E "panicked|\bERROR\b" "$work/serve.log" | head -20
  status=1
fi
exit "$status"
