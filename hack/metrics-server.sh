#!/usr/bin/env bash
# metrics-server for nodekit's end-to-end tests, built from the Go module
# proxy.
#
#   hack/metrics-server.sh build    build metrics-server (cached) and print its path
#   hack/metrics-server.sh path     print the path it is (or would be) built at
#
# It is built with go install at NODEKIT_METRICS_SERVER_VERSION (default
# v0.8.0: the Go module proxy also serves v0.9.0, which is not an approved
# release) into the cache directory (${NODEKIT_CACHE:-$HOME/.cache/nodekit}),
# outside the project's go.mod, and rebuilt only when missing.
set -euo pipefail

NAME_LOG=metrics-server.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CACHE=${NODEKIT_CACHE:-$HOME/.cache/nodekit}
MS_VERSION=${NODEKIT_METRICS_SERVER_VERSION:-v0.8.0}
BIN=$CACHE/metrics-server-$MS_VERSION/bin

cmd_build() {
	if [ -x "$BIN/metrics-server" ]; then echo "$BIN/metrics-server"; return 0; fi
	command -v flock >/dev/null || die "missing tool: install util-linux (flock)"
	command -v go >/dev/null || die "missing tool: go"
	mkdir -p "$CACHE"
	exec 9>"$CACHE/metrics-server-build.lock"
	flock 9
	if [ -x "$BIN/metrics-server" ]; then exec 9>&-; echo "$BIN/metrics-server"; return 0; fi
	local start=$SECONDS tmp
	log "building metrics-server $MS_VERSION from the Go module proxy"
	tmp=$(mktemp -d "$CACHE/metrics-server-build.XXXXXX")
	(cd "$tmp" && GOBIN=$tmp GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
		"sigs.k8s.io/metrics-server/cmd/metrics-server@$MS_VERSION") || { rm -rf "$tmp"; die "build of metrics-server $MS_VERSION failed"; }
	mkdir -p "$BIN"
	mv "$tmp/metrics-server" "$BIN/metrics-server"
	rm -rf "$tmp"
	log "built in $((SECONDS - start)) s: $BIN/metrics-server"
	exec 9>&-
	echo "$BIN/metrics-server"
}

case ${1:-} in
build) cmd_build ;;
path) echo "$BIN/metrics-server" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
