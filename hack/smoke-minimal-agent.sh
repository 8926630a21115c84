#!/usr/bin/env bash
# Runs the README's first command for a while and checks that the sample pods
# run as real processes and reach the phases they should: hello Running and
# ready (an exec probe), batch Succeeded after its init containers, crashloop
# restarted after exiting 1. Then it restarts the agent and checks that it
# finds hello's process again, with no restart. Finally it kills the
# processes the run left (they outlive the agent by design).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
state=$work/nodekit-$(id -u)
cleanup() {
	# The containers' processes and monitors, by the PIDs they recorded.
	for f in "$state"/process/containers/*/process.json; do
		[ -f "$f" ] || continue
		pid=$(grep -o '"PID":[0-9]*' "$f" | cut -d: -f2)
		mon=$(grep -o '"MonitorPID":[0-9]*' "$f" | cut -d: -f2)
		kill -KILL "$mon" 2>/dev/null || true
		kill -KILL -- "-$pid" 2>/dev/null || true
	done
	# As root the pods had cgroups of their own: remove the (now empty) ones.
	if [ "$(id -u)" -eq 0 ] && [ -d "$state/logs" ]; then
		for d in "$state"/logs/*; do
			uid=${d##*_}
			find /sys/fs/cgroup -depth -type d -name "pod$uid" -exec rmdir {} \; 2>/dev/null || true
		done
	fi
	rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/minimal-agent" ./examples/minimal-agent

# run SECONDS OUT: the README's first command, stopped with SIGINT.
run() {
	local status=0
	TMPDIR=$work timeout -s INT "$1" "$work/minimal-agent" --manifests examples/manifests --node-name smoke >"$2" 2>&1 || status=$?
	cat "$2"
	if [ "$status" -ne 0 ] && [ "$status" -ne 124 ] && [ "$status" -ne 130 ]; then
		echo "minimal-agent exited with $status" >&2; exit 1
	fi
}
fail() { echo "smoke: $*" >&2; exit 1; }

run 25 "$work/out1"
grep -q '^default/hello-smoke .*Running hello=running(restarts:0,ready:true)' "$work/out1" || fail "hello never Running and ready"
grep -q '^default/batch-smoke .*Succeeded' "$work/out1" || fail "batch never Succeeded"
grep -q '^default/crashloop-smoke .*fail=exited:1' "$work/out1" || fail "crashloop never exited 1"
grep -q '^default/crashloop-smoke .*restarts:1' "$work/out1" || fail "crashloop never restarted"

# Real processes: hello's output in its CRI log file, its PID alive and
# running its command, crashloop's exit code as its monitor recorded it.
grep -q ' stdout F hello from nodekit$' "$state"/logs/default_hello-smoke_*/hello/0.log || fail "no CRI log line from hello"
hello_pid=
for f in "$state"/process/containers/*/process.json; do
	pid=$(grep -o '"PID":[0-9]*' "$f" | cut -d: -f2)
	if [ -r "/proc/$pid/cmdline" ] && [ "$(tr '\0' ' ' <"/proc/$pid/cmdline")" = "sleep 3600 " ]; then
		hello_pid=$pid
	fi
done
[ -n "$hello_pid" ] || fail "no running process of hello (sleep 3600) recorded"
grep -q '"ExitCode":1,' "$state"/process/containers/*/exit.json || fail "no container recorded exit code 1"
echo "smoke: hello runs as PID $hello_pid"

# The agent restarts; hello's process is found again, not restarted.
run 10 "$work/out2"
grep -q '^default/hello-smoke .*Running hello=running(restarts:0' "$work/out2" || fail "hello not found running after a restart"
if grep -q '^default/hello-smoke .*restarts:[1-9]' "$work/out2"; then fail "hello restarted after the agent restarted"; fi
kill -0 "$hello_pid" 2>/dev/null || fail "hello's process $hello_pid is gone after the agent restarted"
echo "minimal agent smoke run: ok"
