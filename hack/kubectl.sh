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

KUBE_VERSION=v1.37.2
STAGING_VERSION=v0.37.2

CACHE=${NODEKIT_CACHE:-$HOME/.cache/nodekit}
BUILD_DIR=$CACHE/kubectl-$KUBE_VERSION
BIN=$BUILD_DIR/bin

STAGING=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
	cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
	cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt
	kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
	mount-utils pod-security-admission sample-apiserver streaming)

log() { echo "kubectl.sh: $*" >&2; }

write_module() {
	mkdir -p "$BUILD_DIR"
	{
		echo "module nodekit.local/kubectl-build"
		echo
		echo "go 1.26.0"
		echo
		echo "require k8s.io/kubernetes $KUBE_VERSION"
		echo
		echo "tool k8s.io/kubernetes/cmd/kubectl"
		echo
		echo "replace ("
		for m in "${STAGING[@]}"; do
			echo "	k8s.io/$m => k8s.io/$m $STAGING_VERSION"
		done
		echo ")"
	} >"$BUILD_DIR/go.mod.new"
	if ! cmp -s "$BUILD_DIR/go.mod.new" "$BUILD_DIR/go.mod" 2>/dev/null; then
		mv "$BUILD_DIR/go.mod.new" "$BUILD_DIR/go.mod"
	else
		rm -f "$BUILD_DIR/go.mod.new"
	fi
}

cmd_build() {
	if [ -x "$BIN/kubectl" ]; then echo "$BIN/kubectl"; return 0; fi
	command -v flock >/dev/null || { log "missing tool: install util-linux (flock)"; exit 1; }
	mkdir -p "$CACHE"
	exec 9>"$CACHE/kubectl-build.lock"
	flock 9
	if [ -x "$BIN/kubectl" ]; then exec 9>&-; echo "$BIN/kubectl"; return 0; fi
	local start=$SECONDS
	log "building kubectl $KUBE_VERSION (cold: about 5 minutes of CPU)"
	write_module
	mkdir -p "$BIN"
	local ldflags="-s -w \
-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=37 \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
	(
		cd "$BUILD_DIR"
		export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOWORK=off
		go build -trimpath -ldflags "$ldflags" -o "$BIN/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl
		mv "$BIN/kubectl.tmp" "$BIN/kubectl"
	)
	log "built in $((SECONDS - start)) s: $BIN/kubectl"
	exec 9>&-
	echo "$BIN/kubectl"
}

case ${1:-} in
build) cmd_build ;;
path) echo "$BIN/kubectl" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
