#!/usr/bin/env bash
# kube-controller-manager for nodekit's integration tests (the CSR approver
# and signer of TLS bootstrap), built from the Go module proxy.
#
#   hack/controller-manager.sh build    build it (cached) and print its path
#   hack/controller-manager.sh path     print the path it is (or would be) built at
#
# It lives in k8s.io/kubernetes, so it is built like kube-apiserver in
# hack/apiserver.sh: a scratch module under the cache directory
# (${NODEKIT_CACHE:-$HOME/.cache/nodekit}), outside the project's go.mod, with
# every staging module replaced by its published version. It shares most of
# the Go build cache with kube-apiserver, and is rebuilt only when missing.
# The tests start it themselves, with the controllers and flags they need.
set -euo pipefail

NAME_LOG=controller-manager.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CACHE=${NODEKIT_CACHE:-$HOME/.cache/nodekit}
BUILD_DIR=$CACHE/kube-controller-manager-$KUBE_VERSION
BIN=$BUILD_DIR/bin

cmd_build() {
	if [ -x "$BIN/kube-controller-manager" ]; then echo "$BIN/kube-controller-manager"; return 0; fi
	command -v flock >/dev/null || die "missing tool: install util-linux (flock)"
	mkdir -p "$CACHE"
	exec 9>"$CACHE/kube-controller-manager-build.lock"
	flock 9
	if [ -x "$BIN/kube-controller-manager" ]; then exec 9>&-; echo "$BIN/kube-controller-manager"; return 0; fi
	local start=$SECONDS
	log "building kube-controller-manager $KUBE_VERSION (it shares most of kube-apiserver's build cache)"
	write_kube_module "$BUILD_DIR" <<EOM
module nodekit.local/kube-controller-manager-build

go 1.26.0

require k8s.io/kubernetes $KUBE_VERSION

tool k8s.io/kubernetes/cmd/kube-controller-manager
EOM
	mkdir -p "$BIN"
	kube_build "$BUILD_DIR" "$BIN/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager
	log "built in $((SECONDS - start)) s: $BIN/kube-controller-manager"
	exec 9>&-
	echo "$BIN/kube-controller-manager"
}

case ${1:-} in
build) cmd_build ;;
path) echo "$BIN/kube-controller-manager" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
