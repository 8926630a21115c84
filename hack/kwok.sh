#!/usr/bin/env bash
# KWOK, the simulated nodes nodekit's hollow nodes are measured against
# (test/scale), built from the Go module proxy.
#
#   hack/kwok.sh build     build kwok (cached), write its stages, print its path
#   hack/kwok.sh path      print the path kwok is (or would be) built at
#   hack/kwok.sh stages    print the path of its stages file (after build)
#
# kwok (sigs.k8s.io/kwok/cmd/kwok) is built like kubectl in hack/kubectl.sh:
# a scratch module under the cache directory
# (${NODEKIT_CACHE:-$HOME/.cache/nodekit}), outside the project's go.mod,
# built once, under a lock. The kwok binary has no stages of its own: kwokctl
# hands it its defaults in a config file. build writes that file, stages.yaml,
# from the same module: node-initialize, node-heartbeat-with-lease,
# pod-ready, pod-complete and pod-delete, kwokctl's default stages. It is run
# on an existing API server, managing only the nodes it is told to:
#
#   kwok --kubeconfig KUBECONFIG --config "$(hack/kwok.sh stages)" \
#     --manage-all-nodes=false \
#     --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
#     --node-lease-duration-seconds=40
#
# Without --node-lease-duration-seconds kwok holds no Lease for its Nodes
# (kwokctl passes 200, the kubelet's 40 times its heartbeat factor of 5).
set -euo pipefail

NAME_LOG=kwok.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KWOK_VERSION=v0.8.0
CACHE=${NODEKIT_CACHE:-$HOME/.cache/nodekit}
BUILD_DIR=$CACHE/kwok-$KWOK_VERSION
BIN=$BUILD_DIR/bin
STAGES=$BUILD_DIR/stages.yaml

built() { [ -x "$BIN/kwok" ] && [ -s "$STAGES" ]; }

# write_stages writes kwokctl's default stages, read from the module's
# kustomize/stage directory, as one multi-document config file.
write_stages() {
	local mod f first=1
	mod=$(cd "$BUILD_DIR" && GOFLAGS=-mod=mod GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
	[ -d "$mod/kustomize/stage" ] || die "sigs.k8s.io/kwok $KWOK_VERSION has no kustomize/stage in $mod"
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		[ -f "$mod/kustomize/stage/$f" ] || die "missing stage $f in $mod"
		[ $first = 1 ] || echo "---"
		first=0
		cat "$mod/kustomize/stage/$f"
	done >"$STAGES.tmp"
	mv "$STAGES.tmp" "$STAGES"
}

cmd_build() {
	if built; then echo "$BIN/kwok"; return 0; fi
	command -v flock >/dev/null || die "missing tool: install util-linux (flock)"
	mkdir -p "$BUILD_DIR"
	exec 9>"$CACHE/kwok-build.lock"
	flock 9
	if built; then exec 9>&-; echo "$BIN/kwok"; return 0; fi
	local start=$SECONDS
	log "building kwok $KWOK_VERSION"
	cat >"$BUILD_DIR/go.mod.new" <<EOM
module nodekit.local/kwok-build

go 1.26.0

require sigs.k8s.io/kwok $KWOK_VERSION

tool sigs.k8s.io/kwok/cmd/kwok
EOM
	if ! cmp -s "$BUILD_DIR/go.mod.new" "$BUILD_DIR/go.mod" 2>/dev/null; then
		mv "$BUILD_DIR/go.mod.new" "$BUILD_DIR/go.mod"
	else
		rm -f "$BUILD_DIR/go.mod.new"
	fi
	mkdir -p "$BIN"
	if [ ! -x "$BIN/kwok" ]; then
		(
			cd "$BUILD_DIR"
			export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOWORK=off
			go build -trimpath -ldflags "-s -w" -o "$BIN/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok
			mv "$BIN/kwok.tmp" "$BIN/kwok"
		)
	fi
	write_stages
	log "built in $((SECONDS - start)) s: $BIN/kwok"
	exec 9>&-
	echo "$BIN/kwok"
}

case ${1:-} in
build) cmd_build ;;
path) echo "$BIN/kwok" ;;
stages) echo "$STAGES" ;;
*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
