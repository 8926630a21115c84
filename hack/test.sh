#!/usr/bin/env bash
# The project's full test command: `go test -race ./...` (extra arguments are
# passed through, e.g. hack/test.sh -v -run TestStaticPod ./test/e2e/).
#
# As root on Linux it first starts two private containerds of its own with
# hack/containerd.sh (Debian's 1.6, and 2.x built from the Go module proxy
# and cached), exports NODEKIT_CRI_ENDPOINT and NODEKIT_CRI2_ENDPOINT for the
# end-to-end tests in test/e2e, and stops and removes both when it exits.
# Otherwise the end-to-end tests skip and say why.
#
# It also builds (once, cached: about 10 minutes cold) and starts a real
# kube-apiserver and etcd with hack/apiserver.sh and exports
# NODEKIT_KUBECONFIG for the integration tests in test/integration, and
# builds (cached) kube-controller-manager, which the TLS bootstrap test
# (TestJoinAsNode) starts with an API server of its own.
#
# NODEKIT_E2E=0 skips the containerds and the API server even as root;
# NODEKIT_CONTAINERD2=0 skips only the 2.x containerd (its first build takes
# minutes), NODEKIT_APISERVER=0 only the API server.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

now() { date +%s.%N; }
step() { awk -v a="$1" -v b="$(now)" -v s="$2" 'BEGIN { printf "test.sh: %-28s %6.1fs\n", s, b - a }' >&2; }

t_all=$(now)
if [ "$(id -u)" -eq 0 ] && [ "$(uname -s)" = Linux ] && [ "${NODEKIT_E2E:-1}" != 0 ]; then
	cd_sh=hack/containerd.sh
	started=()
	apiserver_dir=
	cleanup() {
		local t; t=$(now)
		for name in "${started[@]}"; do
			$cd_sh stop --name "$name" || true
		done
		step "$t" "stop containerds"
		if [ -n "$apiserver_dir" ]; then
			t=$(now); hack/apiserver.sh stop --dir "$apiserver_dir" || true; step "$t" "stop kube-apiserver"
			rm -rf "$(dirname "$apiserver_dir")"
		fi
	}
	trap cleanup EXIT
	trap 'exit 130' INT TERM

	t=$(now); $cd_sh install; step "$t" "install packages"
	t=$(now); $cd_sh images; step "$t" "images"
	# The private registry of the pull-secret tests (each starts its own).
	t=$(now); hack/registry.sh install; step "$t" "install registry"
	# Instances of this run's own: a developer's containerds (hack/containerd.sh
	# start) and another run's are left alone, and each run starts clean.
	t=$(now)
	started+=("test-1.6-$$")
	NODEKIT_CRI_ENDPOINT=$($cd_sh start --version 1.6 --name "test-1.6-$$")
	export NODEKIT_CRI_ENDPOINT
	step "$t" "start containerd 1.6"
	if [ "${NODEKIT_CONTAINERD2:-1}" != 0 ]; then
		t=$(now); $cd_sh build; step "$t" "build containerd 2.x"
		t=$(now)
		started+=("test-2-$$")
		NODEKIT_CRI2_ENDPOINT=$($cd_sh start --version 2 --name "test-2-$$")
		export NODEKIT_CRI2_ENDPOINT
		step "$t" "start containerd 2.x"
	fi
	if [ "${NODEKIT_APISERVER:-1}" != 0 ]; then
		t=$(now); hack/apiserver.sh build; step "$t" "build kube-apiserver, etcd"
		# kubectl for the node API's end-to-end test (cached; it shares
		# most of kube-apiserver's build cache).
		t=$(now); hack/kubectl.sh build >/dev/null; step "$t" "build kubectl"
		# kube-controller-manager for the TLS bootstrap integration test
		# (its CSR approver and signer; cached, sharing the build cache).
		t=$(now); hack/controller-manager.sh build >/dev/null; step "$t" "build kube-controller-manager"
		t=$(now)
		apiserver_dir=$(mktemp -d)/apiserver
		hack/apiserver.sh start --dir "$apiserver_dir" >&2
		eval "$(hack/apiserver.sh env --dir "$apiserver_dir")"
		export NODEKIT_KUBECONFIG
		step "$t" "start kube-apiserver"
	fi
	# The end-to-end tests start their own throw-away instances with the
	# same script (e.g. to stop one for a while).
	export NODEKIT_CONTAINERD_SH=$PWD/$cd_sh
	# With containerd up, an end-to-end test that cannot reach it fails
	# instead of skipping.
	export NODEKIT_E2E_REQUIRED=1
else
	echo "test.sh: not root on Linux (or NODEKIT_E2E=0): no containerd; the end-to-end tests skip" >&2
fi

# Packages default to ./...; flags are passed through (hack/test.sh -v
# -run TestX ./test/e2e/ or hack/test.sh -count=1).
pkgs=(./...)
for a in "$@"; do
	case $a in ./* | github.com/*) pkgs=() ;; esac
done
t=$(now)
status=0
# The end-to-end package runs for about ten minutes on a 2-core machine: past
# go test's default timeout. A -timeout given as an argument comes later and wins.
go test -race -timeout 30m "${pkgs[@]}" "$@" || status=$?
step "$t" "go test -race"
step "$t_all" "total"
exit $status
