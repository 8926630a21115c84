#!/usr/bin/env bash
# Runs the README's first command for a while and checks that the sample pods
# reach the phases they should: hello Running, batch Succeeded, crashloop
# restarted.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go build -o /tmp/minimal-agent ./examples/minimal-agent
timeout -s INT 20 /tmp/minimal-agent --manifests examples/manifests --node-name smoke >"$out" 2>&1 || status=$?
if [ "${status:-0}" -ne 0 ] && [ "${status:-0}" -ne 124 ] && [ "${status:-0}" -ne 130 ]; then
	cat "$out"; echo "minimal-agent exited with $status" >&2; exit 1
fi
cat "$out"
grep -q '^default/hello-smoke .*Running' "$out" || { echo "hello never Running" >&2; exit 1; }
grep -q '^default/batch-smoke .*Succeeded' "$out" || { echo "batch never Succeeded" >&2; exit 1; }
grep -q '^default/crashloop-smoke .*restarts:1' "$out" || { echo "crashloop never restarted" >&2; exit 1; }
echo "minimal agent smoke run: ok"
