#!/usr/bin/env bash
# The upstream node conformance suite (e2e.test's [NodeConformance] specs)
# against a one-node cluster whose only node is a nodekit agent: the way to
# prove an agent built with nodekit behaves as the kubelet does.
#
#   hack/conformance.sh build     e2e.test, kube-scheduler, agnhost, ginkgo (cached)
#   hack/conformance.sh images    the e2e images this machine can build (cached)
#   hack/conformance.sh run [--agent minimal|nodekit-agent|PATH] [--agent-args ARGS]
#                           [--focus REGEXP] [--skip REGEXP] [--procs N]
#                           [--timeout DURATION] [--dir DIR] [--keep]
#   hack/conformance.sh table DIR print the table of a finished run again
#
# run starts containerd 1.6 (hack/containerd.sh, instance "conformance"),
# kube-apiserver and etcd (hack/apiserver.sh), kube-scheduler,
# kube-controller-manager and the agent as node "conformance", waits until
# the Node is Ready, runs the specs and prints one line per spec and a
# table: passed, and failed by class. It stops everything it started (with
# --keep it leaves the cluster running; DIR/env says how to reach it and
# hack/conformance.sh stop --dir DIR stops it).
#
# The specs run are those of --focus (default [NodeConformance]) that
# --skip does not name (default: [Serial], [Disruptive], [Flaky], [Slow],
# [Feature:...]). --procs N > 1 runs them in N parallel processes
# (ginkgo's -p); --timeout bounds the whole suite (default 2h).
#
# The agent: "minimal" (default) builds examples/minimal-agent,
# "nodekit-agent" builds cmd/nodekit-agent; any other value is the path of
# an agent binary built with nodekit, run with --agent-args, a
# space-separated list in which @KUBECONFIG@ (an admin kubeconfig),
# @ENDPOINT@ (the CRI endpoint), @NODE@ (the node name), @CA@ (the cluster
# CA, the client CA of the node API) and @DIR@ (a directory of its own) are
# replaced. The agent must register the Node and serve the node API on
# port 10250 (logs, exec, port-forward) with @CA@ as its client CA, and
# keep its state (its root directory) under @DIR@, as the minimal agent
# and nodekit-agent do here: the state an earlier run or another agent
# left (image pull records, checkpoints) changes what the specs see.
#
# Each failure is put in a class from its message: image (an image this
# machine could not build or pull), kernel (a kernel feature the machine
# lacks), set-up (the cluster: no kube-proxy, no DNS, no service network)
# or nodekit (everything else: the agent's to fix); a spec cut by
# --timeout is of class timeout. busybox's stand-in shell is bash, whose
# error messages differ from ash's: the read-only root filesystem spec,
# which compares one, fails in class image. The classes are a
# first sort, to be read with the failure's message, which the run's
# DIR/e2e.log holds in full.
#
# The images, built from this machine's busybox-static, Debian packages and
# the Go module proxy (no registry is reached), are named as e2e.test
# 1.37's: agnhost (built from source, with curl, nc (OpenBSD's, UDP-capable),
# bash, and the fake registry's pause:testing), busybox (with bash as sh, as the upstream image's shell keeps
# environment names that are not shell identifiers and Debian's ash drops
# them), nginx (busybox httpd on port 80 as a stand-in), pause, nonroot,
# nonewprivs (built from source) and glibc-dns-testing (this machine's
# Debian glibc userland with sh and hostname, without dig). The others are
# not built: their specs fail in class image.
#
# Nothing here runs in .ci/run: a cold build takes a long time (e2e.test is
# the biggest Go binary of Kubernetes), and the suite tens of minutes.
set -euo pipefail

NAME_LOG=conformance.sh
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HACK/.." && pwd)
. "$HACK/lib.sh"

CACHE=${NODEKIT_CACHE:-$HOME/.cache/nodekit}
BUILD_DIR=$CACHE/conformance-$KUBE_VERSION
BIN=$BUILD_DIR/bin
IMAGES=$CACHE/conformance-images
PAUSE_TAR=$CACHE/images/pause.tar
# Bump when the image recipes change, to rebuild the cached tarballs.
IMAGES_RECIPE=4
DIR=${NODEKIT_CONFORMANCE_DIR:-${TMPDIR:-/tmp}/nodekit-conformance}
NODE=conformance
CTD_NAME=conformance
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin

E2E_REGISTRY=registry.k8s.io/e2e-test-images
AGNHOST_TAGS=(2.66.1 2.55)
BUSYBOX_IMAGE=$E2E_REGISTRY/busybox:1.37.0-2
NGINX_IMAGES=($E2E_REGISTRY/nginx:1.27.0-2 $E2E_REGISTRY/nginx:1.28.0-2)
PAUSE_IMAGES=(registry.k8s.io/pause:3.10.2)
NONROOT_IMAGE=$E2E_REGISTRY/nonroot:1.5
NONEWPRIVS_IMAGE=$E2E_REGISTRY/nonewprivs:1.4
GLIBC_DNS_IMAGE=$E2E_REGISTRY/glibc-dns-testing:2.1.1
# The programs of the glibc-dns-testing stand-in (this machine's, with
# the shared libraries they load).
GLIBC_PROGRAMS=(/bin/dash /bin/bash /bin/hostname /usr/bin/getent /bin/cat /bin/ls /bin/echo /bin/sleep
	/usr/bin/env /usr/bin/id /bin/uname /bin/grep)

# ------------------------------------------------------------------ build

built() {
	local b
	for b in e2e.test kube-scheduler agnhost nnp ginkgo; do [ -x "$BIN/$b" ] || return 1; done
}

cmd_build() {
	built && return 0
	command -v flock >/dev/null || die "missing tool: install util-linux (flock)"
	mkdir -p "$CACHE"
	exec 9>"$CACHE/conformance-build.lock"
	flock 9
	if built; then exec 9>&-; return 0; fi
	log "building e2e.test, kube-scheduler, agnhost and ginkgo $KUBE_VERSION (cold: tens of minutes on 2 cores)"
	write_kube_module "$BUILD_DIR" <<EOM
module nodekit.local/conformance-build

go 1.26.0

require k8s.io/kubernetes $KUBE_VERSION

tool (
	k8s.io/kubernetes/cmd/kube-scheduler
	k8s.io/kubernetes/test/images/agnhost
)
EOM
	mkdir -p "$BIN"
	local s
	if [ ! -x "$BIN/e2e.test" ]; then
		s=$SECONDS
		kube_test_build "$BUILD_DIR" "$BIN/e2e.test" k8s.io/kubernetes/test/e2e
		log "e2e.test built in $((SECONDS - s)) s"
	fi
	if [ ! -x "$BIN/kube-scheduler" ]; then
		s=$SECONDS
		kube_build "$BUILD_DIR" "$BIN/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler
		log "kube-scheduler built in $((SECONDS - s)) s"
	fi
	if [ ! -x "$BIN/agnhost" ]; then
		s=$SECONDS
		kube_build "$BUILD_DIR" "$BIN/agnhost" k8s.io/kubernetes/test/images/agnhost
		log "agnhost built in $((SECONDS - s)) s"
	fi
	if [ ! -x "$BIN/nnp" ]; then
		kube_build "$BUILD_DIR" "$BIN/nnp" k8s.io/kubernetes/test/images/nonewprivs
	fi
	if [ ! -x "$BIN/ginkgo" ]; then
		# The ginkgo CLI of the version e2e.test links (it runs the
		# parallel processes of --procs).
		(cd "$BUILD_DIR" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOWORK=off \
			go build -trimpath -ldflags "-s -w" -o "$BIN/ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo &&
			mv "$BIN/ginkgo.tmp" "$BIN/ginkgo")
	fi
	exec 9>&-
}

# ----------------------------------------------------------------- images

# copy_with_libs ROOTFS FILE...: FILE and the shared libraries it loads,
# at their host paths, in ROOTFS.
copy_with_libs() {
	local root=$1 f lib
	shift
	for f in "$@"; do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
		for lib in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' || true); do
			[ -e "$root$lib" ] && continue
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done
	done
}

# busybox_rootfs DIR: hack/containerd.sh's busybox rootfs (busybox-static,
# applets as hard links).
busybox_rootfs() {
	local rootfs=$1
	mkdir -p "$rootfs"/{bin,etc,tmp,root,proc,sys,dev,var/run,usr/bin,usr/local/bin}
	chmod 1777 "$rootfs/tmp"
	cp /bin/busybox "$rootfs/bin/busybox"
	"$rootfs/bin/busybox" --install "$rootfs/bin"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$rootfs/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
}

# bash_as_sh ROOTFS: bash (with its libraries) as /bin/sh and /bin/bash.
# Busybox ash drops environment names that are not shell identifiers and
# runs its applets (env, nc, ...) in place of PATH's programs; bash does
# neither, as the upstream images' shells.
bash_as_sh() {
	copy_with_libs "$1" /bin/bash
	rm -f "$1/bin/sh"
	ln "$1/bin/bash" "$1/bin/sh"
}

# registry_blob DIR DIGEST FILE: FILE at the fake registry's path of
# DIGEST (a sha256 hex) under DIR (the registry's storage layout).
registry_blob() {
	mkdir -p "$1/sha256/${2:0:2}/$2"
	cp "$3" "$1/sha256/${2:0:2}/$2/data"
}

# fake_registry DIR NAME TAG OCI_TAR: the image of the OCI image-layout
# tarball OCI_TAR as NAME:TAG in DIR, the directory agnhost's
# fake-registry-server serves (/var/registry), laid out as upstream's
# prepare_registry.sh lays out the images it copies: a tag file holding
# the digest of the image index, and the index, its manifests, their
# configs and layers each under its digest.
fake_registry() {
	local dir=$1/$2 tag=$3 tar=$4 t d m b
	t=$(mktemp -d)
	tar -xf "$tar" -C "$t"
	mkdir -p "$dir/manifests" "$dir/blobs"
	# The index without the names containerd's import reads.
	jq -c '.manifests |= map(del(.annotations))' "$t/index.json" >"$t/list.json"
	d=$(sha256sum <"$t/list.json" | cut -d' ' -f1)
	registry_blob "$dir/manifests" "$d" "$t/list.json"
	echo "sha256:$d" >"$dir/manifests/$tag"
	for m in $(jq -r '.manifests[].digest' "$t/list.json"); do
		m=${m#sha256:}
		registry_blob "$dir/manifests" "$m" "$t/blobs/sha256/$m"
		for b in $(jq -r '.config.digest, .layers[].digest' "$t/blobs/sha256/$m"); do
			b=${b#sha256:}
			registry_blob "$dir/blobs" "$b" "$t/blobs/sha256/$b"
		done
	done
	rm -rf "$t"
}

# glibc_rootfs DIR: a Debian glibc userland with the programs the
# hostnameOverride specs call in glibc-dns-testing (sh, hostname, whose -f
# resolves the name through glibc's NSS and the pod's /etc/hosts): this
# machine's dash as sh, bash, hostname, getent and a few coreutils, with
# their libraries and Debian's default nsswitch.conf.
glibc_rootfs() {
	local root=$1
	mkdir -p "$root"/{bin,etc,tmp,root,proc,sys,dev,var/run,usr/bin}
	chmod 1777 "$root/tmp"
	copy_with_libs "$root" "${GLIBC_PROGRAMS[@]}"
	ln "$root/bin/dash" "$root/bin/sh"
	if [ -f /usr/share/libc-bin/nsswitch.conf ]; then
		cp /usr/share/libc-bin/nsswitch.conf "$root/etc/nsswitch.conf"
	else
		printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
	fi
	printf 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
}

images_key() {
	{
		echo "recipe $IMAGES_RECIPE"
		sha256sum /bin/busybox /bin/bash /usr/bin/curl /bin/nc.openbsd "$BIN/agnhost" "$BIN/nnp" \
			"$PAUSE_TAR" "${GLIBC_PROGRAMS[@]}" | cut -d' ' -f1
	} | sha256sum | cut -d' ' -f1
}

images_cached() { [ "$(cat "$IMAGES/key" 2>/dev/null)" = "$(images_key)" ]; }

ensure_image_tools() {
	local missing=()
	[ -x /bin/busybox ] || missing+=(busybox-static)
	[ -x /bin/nc.openbsd ] || missing+=(netcat-openbsd)
	command -v curl >/dev/null || missing+=(curl)
	command -v jq >/dev/null || missing+=(jq)
	[ ${#missing[@]} -gt 0 ] || return 0
	[ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "missing: install ${missing[*]}"
	log "installing ${missing[*]}"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
}

cmd_images() {
	cmd_build
	ensure_image_tools
	# hack/containerd.sh's images: pause is the fake registry's image.
	"$HACK/containerd.sh" images
	images_cached && return 0
	local s=$SECONDS work env oci="$HACK/containerd.sh oci-image"
	work=$(mktemp -d)
	mkdir -p "$IMAGES"
	env='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'
	# busybox
	busybox_rootfs "$work/busybox"
	bash_as_sh "$work/busybox"
	$oci "$IMAGES/busybox.tar" "$BUSYBOX_IMAGE" "{$env,\"Cmd\":[\"sh\"]}" "$work/busybox"
	# agnhost: busybox, bash, curl, nc, the agnhost binary and the user
	# and group the image defines, as upstream's Dockerfile.
	busybox_rootfs "$work/agnhost"
	bash_as_sh "$work/agnhost"
	copy_with_libs "$work/agnhost" /usr/bin/curl /bin/nc.openbsd
	mv "$work/agnhost/bin/nc.openbsd" "$work/agnhost/usr/bin/nc"
	rm -f "$work/agnhost/bin/nc" "$work/agnhost/bin/wget"
	[ -d /etc/ssl/certs ] && mkdir -p "$work/agnhost/etc/ssl" && cp -rL /etc/ssl/certs "$work/agnhost/etc/ssl/" 2>/dev/null || true
	cp "$BIN/agnhost" "$work/agnhost/agnhost"
	# The TLS pair of netexec's --tls-cert-file in the specs (porter's).
	cp "$(cd "$BUILD_DIR" && GOWORK=off go env GOMODCACHE)/k8s.io/kubernetes@$KUBE_VERSION/test/images/agnhost/porter/localhost".{crt,key} "$work/agnhost/"
	ln -s agnhost "$work/agnhost/agnhost-2"
	# fake-registry-server's images (upstream's images.txt: pause
	# 3.10.2 as pause:testing), from hack/containerd.sh's pause, for the
	# image pull specs' private registry.
	fake_registry "$work/agnhost/var/registry" pause testing "$PAUSE_TAR"
	mkdir -p "$work/agnhost/uploads" "$work/agnhost/home/user-defined-in-image"
	echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >>"$work/agnhost/etc/passwd"
	printf 'user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n' >>"$work/agnhost/etc/group"
	local tag
	for tag in "${AGNHOST_TAGS[@]}"; do
		$oci "$IMAGES/agnhost-$tag.tar" "$E2E_REGISTRY/agnhost:$tag" \
			"{$env,\"Entrypoint\":[\"/agnhost\"],\"Cmd\":[\"pause\"],\"ExposedPorts\":{\"80/tcp\":{},\"8080/tcp\":{},\"8081/tcp\":{},\"9376/tcp\":{},\"5000/tcp\":{}}}" \
			"$work/agnhost"
	done
	# nginx stand-in: busybox httpd on port 80, nginx's document root.
	mkdir -p "$work/nginx/usr/share/nginx/html"
	echo '<html><body>Welcome to nginx!</body></html>' >"$work/nginx/usr/share/nginx/html/index.html"
	local img i=0
	for img in "${NGINX_IMAGES[@]}"; do
		$oci "$IMAGES/nginx-$i.tar" "$img" \
			"{$env,\"Cmd\":[\"httpd\",\"-f\",\"-p\",\"80\",\"-h\",\"/usr/share/nginx/html\"],\"ExposedPorts\":{\"80/tcp\":{}}}" \
			"$work/busybox" "$work/nginx"
		i=$((i + 1))
	done
	# nonroot: busybox run as user 1234.
	$oci "$IMAGES/nonroot.tar" "$NONROOT_IMAGE" "{$env,\"User\":\"1234\",\"Cmd\":[\"sh\"]}" "$work/busybox"
	# nonewprivs: nnp, set-user-ID and set-group-ID root.
	mkdir -p "$work/nnp/usr/local/bin"
	cp "$BIN/nnp" "$work/nnp/usr/local/bin/nnp"
	chmod 6755 "$work/nnp/usr/local/bin/nnp"
	$oci "$IMAGES/nonewprivs.tar" "$NONEWPRIVS_IMAGE" "{$env,\"Cmd\":[\"nnp\"]}" "$work/busybox" "$work/nnp"
	# glibc-dns-testing: upstream's is debian:bookworm-slim with dnsutils
	# and coredns; the stand-in has the glibc programs of glibc_rootfs (no
	# dig: the DNS specs that call it need a cluster DNS this cluster has
	# not).
	glibc_rootfs "$work/glibc"
	$oci "$IMAGES/glibc-dns-testing.tar" "$GLIBC_DNS_IMAGE" "{$env,\"Cmd\":[\"bash\"]}" "$work/glibc"
	rm -rf "$work"
	images_key >"$IMAGES/key"
	log "images built in $((SECONDS - s)) s: $IMAGES"
}

# import_images: the e2e images into the conformance containerd; pause
# and the old busybox by another name (hack/containerd.sh's).
import_images() {
	"$HACK/containerd.sh" import --name "$CTD_NAME" "$IMAGES"/*.tar
	local img
	for img in "${PAUSE_IMAGES[@]}"; do
		"$HACK/containerd.sh" tag --name "$CTD_NAME" registry.k8s.io/pause:3.10 "$img"
	done
}

# -------------------------------------------------------------------- run

# agent_command: sets AGENT_CMD (an array) for --agent and --agent-args.
agent_command() {
	local bin args
	case $AGENT in
	minimal)
		bin=$DIR/bin/minimal-agent
		(cd "$REPO" && go build -o "$bin" ./examples/minimal-agent)
		mkdir -p "$DIR/agent/manifests"
		args="--kubeconfig @KUBECONFIG@ --runtime-endpoint @ENDPOINT@ --node-name @NODE@ --manifests @DIR@/manifests --root-dir @DIR@/root"
		;;
	nodekit-agent)
		bin=$DIR/bin/nodekit-agent
		(cd "$REPO" && go build -o "$bin" ./cmd/nodekit-agent)
		args="--kubeconfig @KUBECONFIG@ --container-runtime-endpoint @ENDPOINT@ --hostname-override @NODE@ --root-dir @DIR@/root --client-ca-file @CA@"
		;;
	*)
		bin=$(cd "$(dirname "$AGENT")" && pwd)/$(basename "$AGENT")
		[ -x "$bin" ] || die "--agent $AGENT: not an executable"
		[ -n "$AGENT_ARGS" ] || die "--agent PATH needs --agent-args"
		args=$AGENT_ARGS
		;;
	esac
	[ -z "$AGENT_ARGS" ] || args=$AGENT_ARGS
	args=${args//@KUBECONFIG@/$KUBECONFIG_FILE}
	args=${args//@ENDPOINT@/$ENDPOINT}
	args=${args//@NODE@/$NODE}
	args=${args//@CA@/$DIR/apiserver/pki/ca.crt}
	args=${args//@DIR@/$DIR/agent}
	# shellcheck disable=SC2206 # a space-separated list, as documented
	AGENT_CMD=("$bin" $args)
}

kubectl() { "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# start_daemon NAME COMMAND...: under DIR/NAME.pid and DIR/NAME.log.
start_daemon() {
	local name=$1
	shift
	spawn_daemon "$DIR/$name.pid" "$DIR/$name.log" "$@"
	local i
	for i in $(seq 1 50); do [ -s "$DIR/$name.pid" ] && break; sleep 0.1; done
}

stop_daemon() {
	local pid
	pid=$(cat "$DIR/$1.pid" 2>/dev/null || true)
	[ -n "$pid" ] && stop_pid "$pid" "$1" 30
	rm -f "$DIR/$1.pid"
}

# stop_suite interrupts a running suite and waits up to 2 minutes for its
# clean-ups.
stop_suite() {
	alive "${SUITE_PID:-}" || return 0
	log "interrupting the suite ($SUITE_PID)"
	kill -TERM "$SUITE_PID" 2>/dev/null || true
	local i
	for i in $(seq 1 1200); do alive "$SUITE_PID" || return 0; sleep 0.1; done
	log "the suite ($SUITE_PID) still runs after 2 minutes: killing it"
	kill -KILL "$SUITE_PID" 2>/dev/null || true
}

# unmount_under DIR: unmounts what is mounted under DIR (the volumes of
# the agent's pods, which outlive it), deepest first.
unmount_under() {
	local d m
	d=$(cd "$1" && pwd)
	awk -v d="$d/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
}

cmd_stop() {
	stop_suite
	[ -d "$DIR" ] || return 0
	stop_daemon agent
	stop_daemon kube-scheduler
	stop_daemon kube-controller-manager
	NODEKIT_APISERVER_DIR=$DIR/apiserver "$HACK/apiserver.sh" stop >/dev/null 2>&1 || true
	"$HACK/containerd.sh" stop --name "$CTD_NAME" >/dev/null 2>&1 || true
	unmount_under "$DIR"
	log "stopped the cluster of $DIR"
}

start_cluster() {
	local s=$SECONDS
	ENDPOINT=$("$HACK/containerd.sh" start --name "$CTD_NAME")
	import_images
	NODEKIT_APISERVER_DIR=$DIR/apiserver "$HACK/apiserver.sh" start
	KUBECONFIG_FILE=$DIR/apiserver/kubeconfig
	local pki=$DIR/apiserver/pki
	start_daemon kube-controller-manager "$CM" --kubeconfig="$KUBECONFIG_FILE" \
		--leader-elect=false --bind-address=127.0.0.1 --secure-port="$(free_port)" \
		--service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
		--cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
		--use-service-account-credentials=false --controllers='*'
	start_daemon kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$KUBECONFIG_FILE" \
		--leader-elect=false --bind-address=127.0.0.1 --secure-port="$(free_port)"
	mkdir -p "$DIR/agent"
	agent_command
	log "agent: ${AGENT_CMD[*]}"
	start_daemon agent "${AGENT_CMD[@]}"
	local deadline=$((SECONDS + 120)) pid
	until [ "$(kubectl get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
		for pid in agent kube-scheduler kube-controller-manager; do
			alive "$(cat "$DIR/$pid.pid" 2>/dev/null)" || { tail -n 20 "$DIR/$pid.log" >&2; die "$pid exited; log: $DIR/$pid.log"; }
		done
		[ $SECONDS -lt $deadline ] || { tail -n 20 "$DIR/agent.log" >&2; die "node $NODE not Ready after 120 s; log: $DIR/agent.log"; }
		sleep 1
	done
	# The default ServiceAccount of namespace default, made by the
	# controller-manager: e2e.test waits for it in each namespace.
	until kubectl get serviceaccount default >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || die "no ServiceAccount default after 120 s; log: $DIR/kube-controller-manager.log"
		sleep 1
	done
	cat >"$DIR/env" <<EOF
export KUBECONFIG=$KUBECONFIG_FILE
# kubectl: $KUBECTL; stop: hack/conformance.sh stop --dir $DIR
EOF
	log "cluster up in $((SECONDS - s)) s: node $NODE Ready (kubeconfig $KUBECONFIG_FILE)"
}

run_suite() {
	local report=$DIR/report rc=0
	mkdir -p "$report"
	local e2e_flags=(--kubeconfig="$KUBECONFIG_FILE" --provider=skeleton --kubectl-path="$KUBECTL"
		--report-dir="$report" --num-nodes=1 --node-os-distro=debian
		--dump-logs-on-failure=false --allowed-not-ready-nodes=0 --system-pods-startup-timeout=1m)
	log "running the specs (focus $FOCUS, skip $SKIP, $PROCS process(es), timeout $TIMEOUT); output: $DIR/e2e.log"
	local s=$SECONDS
	if [ "$PROCS" -gt 1 ]; then
		"$BIN/ginkgo" --procs="$PROCS" --timeout="$TIMEOUT" --focus="$FOCUS" --skip="$SKIP" \
			--json-report=report.json --output-dir="$report" --no-color \
			"$BIN/e2e.test" -- "${e2e_flags[@]}" >"$DIR/e2e.log" 2>&1 &
	else
		(cd "$report" && exec "$BIN/e2e.test" "${e2e_flags[@]}" --ginkgo.timeout="$TIMEOUT" \
			--ginkgo.focus="$FOCUS" --ginkgo.skip="$SKIP" --ginkgo.no-color \
			--ginkgo.json-report="$report/report.json") >"$DIR/e2e.log" 2>&1 &
	fi
	# In the background, so that a signal reaches the EXIT trap at once,
	# which interrupts the suite (ginkgo then runs its clean-ups and writes
	# its report) before it stops the cluster.
	SUITE_PID=$!
	wait "$SUITE_PID" || rc=$?
	SUITE_PID=
	log "e2e.test exited $rc after $((SECONDS - s)) s"
	[ -s "$report/report.json" ] || { tail -n 30 "$DIR/e2e.log" >&2; die "no report: see $DIR/e2e.log"; }
}

# cmd_table DIR: one line per spec run, then the counts by class.
cmd_table() {
	local report=$DIR/report/report.json
	[ -s "$report" ] || die "no report in $DIR/report"
	jq -r '
	def class:
		((.Failure.Message // "") + " " + (.Failure.FailureNodeType // "")) as $m
		| if ($m | test("ErrImagePull|ImagePullBackOff|ErrImageNeverPull")) or
		     ($m | test("pull access denied|failed to pull|failed to resolve reference"; "i")) or
		     ($m | test("can.t create /file: Read-only file system")) then "image"
		  elif ($m | test("dummy|modprobe|not supported by the kernel|Protocol not supported|Address family not supported|sysctl.*not allowed|no such device"; "i")) then "kernel"
		  elif ($m | test("A suite timeout occurred")) then "timeout"
	  elif ($m | test("SynchronizedBeforeSuite|kube-proxy|cluster DNS|no endpoints|service .* unreachable|ClusterIP|Service.*not reachable"; "i")) then "set-up"
		  else "nodekit" end;
	([.[].SpecReports[] | select(.LeafNodeType != "It" and .State != "passed" and .State != "skipped")
	  | "SUITE \(.LeafNodeType) \(.State): \(.Failure.Message // "" | .[0:300])"] | .[]),
	([.[].SpecReports[] | select(.LeafNodeType == "It") | select(.State != "skipped" and .State != "pending")]
	| (.[] | [(if .State == "passed" then "PASS" else "FAIL " + class end),
	          ((.ContainerHierarchyTexts + [.LeafNodeText]) | join(" "))] | @tsv),
	  "",
	  "passed\t\(map(select(.State == "passed")) | length)",
	  (map(select(.State != "passed")) | group_by(class) | .[] | "failed: \(.[0] | class)\t\(length)"),
	  "total\t\(length)")
	' "$report" | awk -F'\t' '{ if (NF == 2) printf "%-14s %s\n", $1, $2; else print }'
}

cmd_run() {
	[ "$(id -u)" = 0 ] || die "run needs root (containerd, the agent's cgroups and mounts)"
	cmd_build
	cmd_images
	"$HACK/apiserver.sh" build
	CM=$("$HACK/controller-manager.sh" build)
	KUBECTL=$("$HACK/kubectl.sh" build)
	# A directory this script made, or none.
	if [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ] && [ ! -f "$DIR/.nodekit-conformance" ]; then
		die "$DIR is not empty and was not made by this script: not wiping it"
	fi
	cmd_stop
	rm -rf "$DIR"
	mkdir -p "$DIR/bin"
	DIR=$(cd "$DIR" && pwd)
	touch "$DIR/.nodekit-conformance"
	[ -n "$KEEP" ] || trap cmd_stop EXIT
	start_cluster
	run_suite
	cmd_table | tee "$DIR/table.txt"
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
}

[ $# -ge 1 ] || usage
cmd=$1
shift
AGENT=minimal AGENT_ARGS= PROCS=1 SUITE_PID= TIMEOUT=2h KEEP=
FOCUS='\[NodeConformance\]'
SKIP='\[Serial\]|\[Disruptive\]|\[Flaky\]|\[Slow\]|\[Feature:'
while [ $# -gt 0 ]; do
	case $1 in
	--agent) AGENT=${2:?}; shift 2 ;;
	--agent-args) AGENT_ARGS=${2?}; shift 2 ;;
	--focus) FOCUS=${2:?}; shift 2 ;;
	--skip) SKIP=${2?}; shift 2 ;;
	--procs) PROCS=${2:?}; shift 2 ;;
	--timeout) TIMEOUT=${2:?}; shift 2 ;;
	--dir) DIR=${2:?}; shift 2 ;;
	--keep) KEEP=1; shift ;;
	*) [ "$cmd" = table ] && [ $# -eq 1 ] && { DIR=$1; shift; continue; }; usage ;;
	esac
done
[[ $PROCS =~ ^[1-9][0-9]?$ ]] || die "--procs must be 1 to 99"
case $cmd in
build) cmd_build ;;
images) cmd_images ;;
run) cmd_run ;;
stop) cmd_stop ;;
table) cmd_table ;;
*) usage ;;
esac
