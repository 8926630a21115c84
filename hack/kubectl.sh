#!/usr/bin/env bash
# kubectl for nodekit's end-to-end tests, built from the Go module proxy.
#
#   hack/kubectl.sh build    build kubectl (cached) and print its path
#   hack/kubectl.sh path     print the path kubectl is (or would be) built at
#
# kubectl lives in k8s.io/kubernetes, so it is built like kube-apiserver in
# hack/apiserver.sh: a scratch module under the cache directory
# (${NODEKIT_CACHE:-$HOME/.cache/nodekit}), outside the project's go.mod, with
# every staging module replaced by its published version. It shares most of
# the Go build cache with kube-apiserver, and is rebuilt only when missing.
set -euo pipefail

NAME_LOG=kubectl.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CACHE=${NODEKIT_CACHE:-$HOME/.cache/nodekit}
BUILD_DIR=$CACHE/kubectl-$KUBE_VERSION
BIN=$BUILD_DIR/bin

cmd_build() {
	if [ -x "$BIN/kubectl" ]; then echo "$BIN/kubectl"; return 0; fi
	command -v flock >/dev/null || die "missing tool: install util-linux (flock)"
	mkdir -p "$CACHE"
	exec 9>"$CACHE/kubectl-build.lock"
	flock 9
	if [ -x "$BIN/kubectl" ]; then exec 9>&-; echo "$BIN/kubectl"; return 0; fi
	local start=$SECONDS
	log "building kubectl $KUBE_VERSION (cold: about 5 minutes of CPU)"
	write_kube_module "$BUILD_DIR" <<EOM
module nodekit.local/kubectl-build

go 1.26.0

require k8s.io/kubernetes $KUBE_VERSION

tool k8s.io/kubernetes/cmd/kubectl
EOM
	mkdir -p "$BIN"
	kube_build "$BUILD_DIR" "$BIN/kubectl" k8s.io/kubernetes/cmd/kubectl
	log "built in $((SECONDS - start)) s: $BIN/kubectl"
	exec 9>&-
	echo "$BIN/kubectl"
}

case ${1:-} in
build) cmd_build ;;
path) echo "$BIN/kubectl" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
