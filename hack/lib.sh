# Shared by the scripts in hack/: sourced, never run. A script sets NAME_LOG
# (its name in log lines) and then sources this file.

log() { echo "$NAME_LOG: $*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

# free_port prints a loopback TCP port nothing listens on, below the
# kernel's ephemeral range when it can: a port in that range can be held by
# the local end of an outgoing connection, or by its TIME-WAIT for a minute
# after a test that opened many, and then the daemon cannot bind it.
free_port() {
	local p lo=20000 hi=60000 eph
	if eph=$(cat /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null) && [ "${eph%%[[:space:]]*}" -gt 12000 ]; then
		lo=10000 hi=${eph%%[[:space:]]*}
	fi
	for _ in $(seq 1 100); do
		p=$((lo + RANDOM % (hi - lo)))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

# spawn_daemon PIDFILE LOGFILE COMMAND [ARG...] starts COMMAND in a session
# of its own, so that it outlives the caller's process group (go test, a CI
# step), with all its output appended to LOGFILE and never to our pipes.
# The shell records its own PID in PIDFILE, then becomes COMMAND (setsid
# forks only when called by a process group leader, which a background job
# of a script is not).
spawn_daemon() {
	local pidfile=$1 logfile=$2
	shift 2
	rm -f "$pidfile"
	echo "--- start $(date -Is)" >>"$logfile"
	setsid bash -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1" && shift && exec "$@"' \
		daemon "$pidfile" "$@" </dev/null >>"$logfile" 2>&1 &
}

# await_daemon PIDFILE LOGFILE WHAT waits up to 30 s until the script's
# `answers` succeeds. When the daemon exits first, or stays silent, it
# prints the end of LOGFILE and dies.
await_daemon() {
	local pidfile=$1 logfile=$2 what=$3 deadline=$((SECONDS + 30)) pid=""
	until answers; do
		[ -n "$pid" ] || pid=$(cat "$pidfile" 2>/dev/null || true)
		if [ -n "$pid" ] && [ ! -d "/proc/$pid" ]; then
			tail -n 30 "$logfile" >&2
			die "start: $what exited; log above ($logfile)"
		fi
		if [ $SECONDS -ge $deadline ]; then
			tail -n 30 "$logfile" >&2
			die "start: $what does not answer after 30s; log above ($logfile)"
		fi
		sleep 0.05
	done
}

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# stop_pid PID NAME [SECONDS] sends SIGTERM and waits up to SECONDS
# (default 20), then sends SIGKILL and waits until the process is gone.
stop_pid() {
	local pid=$1 name=$2 wait=${3:-20}
	alive "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 $((wait * 10))); do
		alive "$pid" || return 0
		sleep 0.1
	done
	log "$name ($pid) ignored SIGTERM for $wait s: killing it"
	kill -KILL "$pid" 2>/dev/null || true
	while alive "$pid"; do sleep 0.1; done
}

# Binaries of k8s.io/kubernetes (kube-apiserver, kubectl) are built from the
# Go module proxy in a scratch module under the cache directory, outside the
# project's own go.mod. k8s.io/kubernetes requires its staging modules at
# v0.0.0 and replaces them with ./staging paths; the scratch module points
# each at its published version.
KUBE_VERSION=v1.37.2
STAGING_VERSION=v0.37.2
STAGING=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
	cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
	cri-client cri-streaming csi-translation-lib dynamic-resource-allocation endpointslice externaljwt
	kms kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
	mount-utils pod-security-admission sample-apiserver streaming)

# write_kube_module DIR writes DIR/go.mod: the module, go, require and tool
# lines read from stdin, then the staging replacements. An unchanged file
# is left alone.
write_kube_module() {
	local dir=$1 m
	mkdir -p "$dir"
	{
		cat
		echo
		echo "replace ("
		for m in "${STAGING[@]}"; do
			echo "	k8s.io/$m => k8s.io/$m $STAGING_VERSION"
		done
		echo ")"
	} >"$dir/go.mod.new"
	if ! cmp -s "$dir/go.mod.new" "$dir/go.mod" 2>/dev/null; then
		mv "$dir/go.mod.new" "$dir/go.mod"
	else
		rm -f "$dir/go.mod.new"
	fi
}

# kube_build DIR OUT PACKAGE builds a k8s.io/kubernetes command in the
# scratch module DIR, static and stamped with KUBE_VERSION as a release is,
# to OUT (through OUT.tmp, so that a build cut short leaves nothing).
kube_build() {
	local dir=$1 out=$2 pkg=$3
	local ldflags="-s -w \
-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=37 \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
	(
		cd "$dir"
		export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOWORK=off
		go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg"
		mv "$out.tmp" "$out"
	)
}

# kube_test_build DIR OUT PACKAGE compiles the tests of a k8s.io/kubernetes
# package (test/e2e: e2e.test) in the scratch module DIR, with kube_build's
# stamps, to OUT through OUT.tmp.
kube_test_build() {
	local dir=$1 out=$2 pkg=$3
	local ldflags="-s -w \
-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION \
-X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=37 \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
	(
		cd "$dir"
		export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOWORK=off
		go test -c -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg"
		mv "$out.tmp" "$out"
	)
}
