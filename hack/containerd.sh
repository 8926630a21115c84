#!/usr/bin/env bash
# A private containerd for nodekit's tests: Debian's containerd 1.6, or
# containerd 2.x built from the Go module proxy (it serves CRI container
# events). Runs as root, needs no systemd, no registry and no network once
# the packages are installed and the 2.x build is cached.
#
#   hack/containerd.sh install                  # Debian packages when missing
#   hack/containerd.sh images                   # local OCI image tarballs (cached)
#   hack/containerd.sh build                    # containerd 2.x and runc from the Go proxy (cached)
#   hack/containerd.sh start [--version 1.6|2] [--name NAME] [--subnet CIDR]
#   hack/containerd.sh kill  [--version 1.6|2] [--name NAME]   # the daemon only; pods keep running
#   hack/containerd.sh stop  [--version 1.6|2] [--name NAME]   # pods, daemon, shims, mounts, state
#   hack/containerd.sh status [--version 1.6|2] [--name NAME]
#   hack/containerd.sh env                      # export NODEKIT_CRI_ENDPOINT=... NODEKIT_CRI2_ENDPOINT=...
#   hack/containerd.sh oci-image OUT NAME CONFIG_JSON ROOTFS...  # an image tarball of more images
#   hack/containerd.sh import [--version 1.6|2] [--name NAME] FILE.tar...
#   hack/containerd.sh tag    [--version 1.6|2] [--name NAME] SOURCE TARGET
#
# start prints the CRI endpoint (unix://STATE/NAME/containerd.sock); it is
# idempotent (a running instance is left alone) and so is stop. Each
# instance has its own root, state, sockets, runc root, CNI bridge, subnet
# and IPAM directory, so several run at once. The images are:
#   docker.io/library/busybox:1.36   busybox-static, applets as hard links
#   registry.k8s.io/pause:3.10       hack/pause (the sandbox image)
#   nodekit.test/web:1               busybox httpd -f -p 8080 -h /www
#
# Each instance has two runtime handlers, runc (the default) and runc-b
# (the same runc, its own root), for RuntimeClass tests.
#
# The 2.x instance runs containers with its own runc (the shim's
# BinaryName), built with seccomp from the Go module proxy: Debian's runc
# 1.1.5 has no idmapped mounts, without which containerd 2.x does not
# report user namespaces; the 1.6 instance keeps Debian's runc.
#
# Environment: NODEKIT_CACHE (default ~/.cache/nodekit) holds the images and
# the 2.x binaries; NODEKIT_CONTAINERD_STATE (default /tmp/nodekit-containerd)
# holds one directory per instance; NODEKIT_CONTAINERD2_VERSION (default
# v2.4.2) is the 2.x version built; NODEKIT_RUNC_VERSION (default v1.4.4)
# the runc version built for it.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${NODEKIT_CACHE:-$HOME/.cache/nodekit}
BASE=${NODEKIT_CONTAINERD_STATE:-/tmp/nodekit-containerd}
CD2_VERSION=${NODEKIT_CONTAINERD2_VERSION:-v2.4.2}
CD2_BIN=$CACHE/containerd-${CD2_VERSION#v}/bin
RUNC_VERSION=${NODEKIT_RUNC_VERSION:-v1.4.4}
RUNC_BIN=$CACHE/runc-${RUNC_VERSION#v}/bin
IMAGES_DIR=$CACHE/images
# Bump when the image recipes change, to rebuild cached tarballs.
IMAGES_RECIPE=3
export PATH=$PATH:/usr/local/go/bin:/usr/sbin:/sbin

BUSYBOX_IMAGE=docker.io/library/busybox:1.36
PAUSE_IMAGE=registry.k8s.io/pause:3.10
WEB_IMAGE=nodekit.test/web:1

NAME_LOG=containerd.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root"; }

# ---------------------------------------------------------------- install

cmd_install() {
	need_root install
	local t0; t0=$(now)
	local missing=()
	command -v containerd >/dev/null || missing+=(containerd)
	command -v runc >/dev/null || missing+=(runc)
	[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ] ||
		missing+=(containernetworking-plugins)
	[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx httpd || missing+=(busybox-static)
	command -v iptables >/dev/null || missing+=(iptables)
	# Building runc with seccomp (cgo): the compiler, pkg-config, libseccomp.
	command -v gcc >/dev/null || missing+=(gcc)
	[ -f /usr/include/stdio.h ] || missing+=(libc6-dev) # gcc only recommends it
	command -v pkg-config >/dev/null || missing+=(pkg-config)
	[ -f /usr/include/seccomp.h ] || missing+=(libseccomp-dev)
	if [ ${#missing[@]} -eq 0 ]; then
		log "install: everything present ($(elapsed "$t0"))"
		return
	fi
	log "install: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	fi
	log "install: done ($(elapsed "$t0"))"
}

# ----------------------------------------------------------------- images

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# add_blob DIR FILE: moves FILE into DIR/blobs/sha256 and prints its digest.
add_blob() {
	local d; d=$(sha "$2")
	mv "$2" "$1/blobs/sha256/$d"
	echo "$d"
}

# make_layer ROOTFS OUT: a reproducible uncompressed tar of ROOTFS.
make_layer() {
	tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 \
		--format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
		-C "$1" -cf "$2" .
}

# oci_image OUT NAME CONFIG_JSON ROOTFS...: writes an OCI image-layout
# tarball holding one image of one or more layers (one per ROOTFS, lowest
# first), named NAME for containerd's import.
oci_image() {
	local out=$1 name=$2 cfg=$3; shift 3
	local work; work=$(mktemp -d)
	mkdir -p "$work/layout/blobs/sha256"
	local layers="" diffs="" l=0 dir digest
	for dir in "$@"; do
		make_layer "$dir" "$work/layer$l.tar"
		local sz; sz=$(size "$work/layer$l.tar")
		digest=$(add_blob "$work/layout" "$work/layer$l.tar")
		layers+="${layers:+,}{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"sha256:$digest\",\"size\":$sz}"
		diffs+="${diffs:+,}\"sha256:$digest\""
		l=$((l + 1))
	done
	local arch; arch=$(dpkg --print-architecture 2>/dev/null || go env GOARCH)
	printf '{"created":"1970-01-01T00:00:00Z","architecture":"%s","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":[%s]}}' \
		"$arch" "$cfg" "$diffs" >"$work/config.json"
	local csz cdig; csz=$(size "$work/config.json"); cdig=$(add_blob "$work/layout" "$work/config.json")
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[%s]}' \
		"$cdig" "$csz" "$layers" >"$work/manifest.json"
	local msz mdig; msz=$(size "$work/manifest.json"); mdig=$(add_blob "$work/layout" "$work/manifest.json")
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$mdig" "$msz" "$arch" "$name" "${name##*:}" >"$work/layout/index.json"
	echo '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"
	tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$work/layout" -cf "$out.tmp" .
	mv "$out.tmp" "$out"
	rm -rf "$work"
}

images_key() {
	{
		echo "recipe $IMAGES_RECIPE"
		sha /bin/busybox
		cat "$REPO/hack/pause/main.go"
	} | sha256sum | cut -d' ' -f1
}

cmd_images() {
	local t0; t0=$(now)
	[ -x /bin/busybox ] || die "images: /bin/busybox is missing (hack/containerd.sh install)"
	command -v go >/dev/null || die "images: go is needed to build the pause binary"
	if images_cached; then
		log "images: cached in $IMAGES_DIR ($(elapsed "$t0"))"
		return
	fi
	locked images-build build_images
	log "images: built in $IMAGES_DIR ($(elapsed "$t0"))"
}

images_cached() {
	[ "$(cat "$IMAGES_DIR/key" 2>/dev/null)" = "$(images_key)" ] &&
		[ -f "$IMAGES_DIR/busybox.tar" ] && [ -f "$IMAGES_DIR/pause.tar" ] && [ -f "$IMAGES_DIR/web.tar" ]
}

build_images() {
	images_cached && return
	mkdir -p "$IMAGES_DIR"
	local work; work=$(mktemp -d)
	# busybox: the static binary and its applets as hard links (a symlinked
	# applet would be masked with busybox itself by CRI's MaskedPaths).
	local rootfs=$work/busybox
	mkdir -p "$rootfs"/{bin,etc,tmp,root,proc,sys,dev,var/run}
	chmod 1777 "$rootfs/tmp"
	cp /bin/busybox "$rootfs/bin/busybox"
	"$rootfs/bin/busybox" --install "$rootfs/bin"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$rootfs/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
	local env='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'
	oci_image "$IMAGES_DIR/busybox.tar" "$BUSYBOX_IMAGE" "{$env,\"Cmd\":[\"sh\"]}" "$rootfs"
	# web: busybox plus a second layer with the document root.
	mkdir -p "$work/www/www"
	echo '<html><body>hello from nodekit</body></html>' >"$work/www/www/index.html"
	oci_image "$IMAGES_DIR/web.tar" "$WEB_IMAGE" \
		"{$env,\"Cmd\":[\"httpd\",\"-f\",\"-p\",\"8080\",\"-h\",\"/www\"],\"ExposedPorts\":{\"8080/tcp\":{}}}" \
		"$rootfs" "$work/www"
	# pause: hack/pause, static.
	mkdir -p "$work/pause"
	(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$work/pause/pause" ./hack/pause)
	oci_image "$IMAGES_DIR/pause.tar" "$PAUSE_IMAGE" '{"Entrypoint":["/pause"]}' "$work/pause"
	rm -rf "$work"
	images_key >"$IMAGES_DIR/key"
}

# cmd_import imports image tarballs (oci-image's) into a running instance.
cmd_import() {
	local files=() args=() a
	for a in "$@"; do
		case $a in
		*.tar) files+=("$a") ;;
		*) args+=("$a") ;;
		esac
	done
	parse_instance "${args[@]}"
	pid_alive && answers || die "import: $NAME does not run"
	for a in "${files[@]}"; do
		"$CTR" --address "$SOCK" -n k8s.io images import --snapshotter "$(cat "$DIR/snapshotter")" "$a" >/dev/null ||
			die "importing $a into $NAME failed"
	done
}

# cmd_tag names an image of a running instance a second time (a stand-in
# for an image of another name).
cmd_tag() {
	[ $# -ge 2 ] || usage
	local dst=${*: -1} src=${*: -2:1}
	parse_instance "${@:1:$#-2}"
	pid_alive && answers || die "tag: $NAME does not run"
	"$CTR" --address "$SOCK" -n k8s.io images tag --force "$src" "$dst" >/dev/null || die "tag $src $dst failed"
}

# ------------------------------------------------------------------ build

cmd_build() {
	build_containerd
	build_runc
}

# locked NAME FN: runs FN holding the cache's lock NAME, so that runs at the
# same time build a cached thing once (FN checks again under the lock).
locked() {
	mkdir -p "$CACHE"
	(
		flock 8
		"$2"
	) 8>"$CACHE/$1.lock"
}

containerd_cached() { [ -x "$CD2_BIN/containerd" ] && [ -x "$CD2_BIN/containerd-shim-runc-v2" ] && [ -x "$CD2_BIN/ctr" ]; }

build_containerd() {
	local t0; t0=$(now)
	if containerd_cached; then
		log "build: containerd $CD2_VERSION cached in $CD2_BIN ($(elapsed "$t0"))"
		return
	fi
	command -v go >/dev/null || die "build: go is needed to build containerd $CD2_VERSION"
	locked containerd-build build_containerd_locked
	log "build: done ($(elapsed "$t0"))"
}

build_containerd_locked() {
	containerd_cached && return
	log "build: containerd $CD2_VERSION from the Go module proxy into $CD2_BIN (takes minutes the first time)"
	local tmp; tmp=$(mktemp -d "$CACHE/containerd-build.XXXXXX")
	local m=github.com/containerd/containerd/v2/cmd
	(cd / && GOBIN="$tmp" GOFLAGS="-buildvcs=false -tags=no_btrfs,no_devmapper,no_zfs,no_aufs" \
		go install "$m/containerd@$CD2_VERSION" "$m/containerd-shim-runc-v2@$CD2_VERSION" "$m/ctr@$CD2_VERSION") ||
		{ rm -rf "$tmp"; die "build: containerd $CD2_VERSION failed"; }
	mkdir -p "$CD2_BIN"
	mv "$tmp"/* "$CD2_BIN"/
	rm -rf "$tmp"
}

# build_runc: runc for the 2.x instance, with seccomp (cgo, libseccomp),
# installed under a lock so that concurrent runs build it once.
build_runc() {
	local t0; t0=$(now)
	if [ -x "$RUNC_BIN/runc" ]; then
		log "build: runc $RUNC_VERSION cached in $RUNC_BIN ($(elapsed "$t0"))"
		return
	fi
	command -v go >/dev/null || die "build: go is needed to build runc $RUNC_VERSION"
	pkg-config --exists libseccomp 2>/dev/null || die "build: runc needs libseccomp-dev and pkg-config (hack/containerd.sh install)"
	locked runc-build build_runc_locked
	log "build: done ($(elapsed "$t0"))"
}

build_runc_locked() {
	[ -x "$RUNC_BIN/runc" ] && return
	log "build: runc $RUNC_VERSION (seccomp) from the Go module proxy into $RUNC_BIN"
	local tmp; tmp=$(mktemp -d "$CACHE/runc-build.XXXXXX")
	(cd / && GOBIN="$tmp" CGO_ENABLED=1 GOFLAGS="-buildvcs=false" \
		go install -tags seccomp -trimpath -ldflags "-X main.version=${RUNC_VERSION#v}" \
		"github.com/opencontainers/runc@$RUNC_VERSION") || { rm -rf "$tmp"; die "build: runc $RUNC_VERSION failed"; }
	"$tmp/runc" --version | grep -q '^libseccomp: ' || { rm -rf "$tmp"; die "build: runc $RUNC_VERSION has no seccomp"; }
	mkdir -p "$RUNC_BIN"
	mv "$tmp/runc" "$RUNC_BIN/runc"
	rm -rf "$tmp"
}

# -------------------------------------------------------------- instances

VERSION=1.6
NAME=""
SUBNET=""

parse_instance() {
	while [ $# -gt 0 ]; do
		case $1 in
		--version) VERSION=${2:?--version needs a value}; shift 2 ;;
		--version=*) VERSION=${1#*=}; shift ;;
		--name) NAME=${2:?--name needs a value}; shift 2 ;;
		--name=*) NAME=${1#*=}; shift ;;
		--subnet) SUBNET=${2:?--subnet needs a value}; shift 2 ;;
		--subnet=*) SUBNET=${1#*=}; shift ;;
		*) die "unknown argument $1" ;;
		esac
	done
	case $VERSION in
	1.6 | 1) VERSION=1.6 ;;
	2 | 2.*) VERSION=2 ;;
	*) die "--version must be 1.6 or 2, not $VERSION" ;;
	esac
	NAME=${NAME:-containerd-$VERSION}
	[[ $NAME =~ ^[A-Za-z0-9._-]+$ ]] || die "--name may hold letters, digits, '.', '_' and '-' only"
	DIR=$BASE/$NAME
	SOCK=$DIR/containerd.sock
	PIDFILE=$DIR/containerd.pid
	LOGFILE=$DIR/containerd.log
	[ ${#SOCK} -lt 100 ] || die "socket path $SOCK is too long for a unix socket"
	# An instance keeps the version it was started with.
	if [ -f "$DIR/version" ]; then VERSION=$(cat "$DIR/version"); fi
	if [ "$VERSION" = 2 ]; then
		CONTAINERD=$CD2_BIN/containerd CTR=$CD2_BIN/ctr RUNC=$RUNC_BIN/runc
		# An instance started before its runc was built uses Debian's.
		[ -x "$RUNC" ] || RUNC=$(command -v runc || echo /usr/sbin/runc)
	else
		CONTAINERD=$(command -v containerd || echo /usr/bin/containerd) CTR=$(command -v ctr || echo /usr/bin/ctr)
		RUNC=$(command -v runc || echo /usr/sbin/runc)
	fi
}

pid_alive() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q containerd "/proc/$pid/comm" 2>/dev/null
}

answers() { "$CTR" --address "$SOCK" --timeout 2s version >/dev/null 2>&1; }

# A per-instance hash: bridge name and subnet.
instance_hash() { printf '%s' "$NAME" | cksum | cut -d' ' -f1; }

# pick_subnet prints a /24 for the instance: its own if it has one, else the
# first of a sequence drawn from hash $1 that no host route and no other
# instance's network configuration uses.
pick_subnet() {
	local h=$1 k hh prefix conf routes others
	conf=$DIR/cni/net.d/10-nodekit.conflist
	prefix=$(sed -n 's/.*"subnet": "\(10\.[0-9]*\.[0-9]*\)\.0\/24".*/\1/p' "$conf" 2>/dev/null)
	if [ -n "$prefix" ]; then
		echo "$prefix.0/24"
		return
	fi
	routes=$(ip -4 -o route show 2>/dev/null | awk '{print $1}')
	others=$(cat "$BASE"/*/cni/net.d/10-nodekit.conflist 2>/dev/null | sed -n 's/.*"subnet": "\(10\.[0-9]*\.[0-9]*\)\.0\/24".*/\1/p')
	for k in $(seq 0 199); do
		hh=$((h + k * 7919))
		prefix=10.$((100 + hh % 100)).$((hh / 100 % 256))
		if printf '%s\n' "$routes" | grep -q "^${prefix//./\\.}\." ||
			printf '%s\n' "$others" | grep -qx "${prefix//./\\.}"; then
			continue
		fi
		echo "$prefix.0/24"
		return
	done
	echo "containerd.sh: no free 10.x.y.0/24 subnet for $NAME (pass --subnet)" >&2
	return 1
}

write_cni() {
	local h; h=$(instance_hash)
	local subnet=$SUBNET
	if [ -z "$subnet" ]; then
		subnet=$(pick_subnet "$h") || return 1
	fi
	local bridge=nk$((h % 100000000))
	mkdir -p "$DIR/cni/net.d" "$DIR/cni/ipam"
	cat >"$DIR/cni/net.d/10-nodekit.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "nodekit-$NAME",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$DIR/cni/ipam",
        "ranges": [[{"subnet": "$subnet"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	echo "$subnet" >"$DIR/subnet"
	echo "$bridge" >"$DIR/bridge"
}

# pick_snapshotter: overlayfs when an overlay mounts under DIR, else native.
pick_snapshotter() {
	local t=$DIR/overlay-check
	mkdir -p "$t"/{lower,upper,work,merged}
	if mount -t overlay overlay -o "lowerdir=$t/lower,upperdir=$t/upper,workdir=$t/work" "$t/merged" 2>/dev/null; then
		umount "$t/merged"
		rm -rf "$t"
		echo overlayfs
	else
		rm -rf "$t"
		echo native
	fi
}

write_config() {
	local snap=$1 cfg=$DIR/config.toml
	if [ "$VERSION" = 1.6 ]; then
		cat >"$cfg" <<EOF
version = 2
root = "$DIR/root"
state = "$DIR/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
imports = []

[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$DIR/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "$snap"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$DIR/runc"
    # A second handler, runc again under another name, for RuntimeClass tests.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc-b]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc-b.options]
        SystemdCgroup = false
        Root = "$DIR/runc-b"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/net.d"
EOF
	else
		cat >"$cfg" <<EOF
version = 3
root = "$DIR/root"
state = "$DIR/state"
disabled_plugins = ["io.containerd.nri.v1.nri"]
imports = []

[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins.'io.containerd.internal.v1.opt']
  path = "$DIR/opt"
[plugins.'io.containerd.transfer.v1.local']
  [[plugins.'io.containerd.transfer.v1.local'.unpack_config]]
    platform = "linux"
    snapshotter = "$snap"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "$snap"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  tolerate_missing_hugetlb_controller = true
  disable_hugetlb_controller = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      snapshotter = "$snap"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$DIR/runc"
        BinaryName = "$RUNC_BIN/runc"
    # A second handler, runc again under another name, for RuntimeClass tests.
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc-b]
      runtime_type = "io.containerd.runc.v2"
      snapshotter = "$snap"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc-b.options]
        SystemdCgroup = false
        Root = "$DIR/runc-b"
        BinaryName = "$RUNC_BIN/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$DIR/cni/net.d"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
EOF
	fi
}

# import_images: imports every cached image the instance does not hold.
import_images() {
	local have; have=$("$CTR" --address "$SOCK" -n k8s.io images ls -q 2>/dev/null || true)
	local pair name file
	for pair in "$PAUSE_IMAGE=pause" "$BUSYBOX_IMAGE=busybox" "$WEB_IMAGE=web"; do
		name=${pair%=*} file=$IMAGES_DIR/${pair#*=}.tar
		grep -qxF "$name" <<<"$have" && continue
		local out
		out=$("$CTR" --address "$SOCK" -n k8s.io images import --snapshotter "$(cat "$DIR/snapshotter")" "$file" 2>&1) ||
			die "importing $file into $NAME failed: $out"
	done
}

save_ip_forward() {
	mkdir -p "$BASE"
	[ -f "$BASE/ip_forward.orig" ] || cat /proc/sys/net/ipv4/ip_forward >"$BASE/ip_forward.orig"
}

# restore_ip_forward: once no instance runs any more.
restore_ip_forward() {
	[ -f "$BASE/ip_forward.orig" ] || return 0
	local p
	for p in "$BASE"/*/containerd.pid; do
		[ -f "$p" ] || continue
		[ "$p" = "$PIDFILE" ] && continue
		local pid; pid=$(cat "$p" 2>/dev/null || true)
		[ -n "$pid" ] && [ -d "/proc/$pid" ] && return 0
	done
	cat "$BASE/ip_forward.orig" >/proc/sys/net/ipv4/ip_forward
	rm -f "$BASE/ip_forward.orig"
}

cmd_start() {
	need_root start
	parse_instance "$@"
	local t0; t0=$(now)
	if pid_alive && answers; then
		log "start: $NAME already running (pid $(cat "$PIDFILE"))"
		echo "unix://$SOCK"
		return
	fi
	if pid_alive; then
		die "start: $NAME runs (pid $(cat "$PIDFILE")) but does not answer on $SOCK; run hack/containerd.sh stop --name $NAME"
	fi
	[ -x "$CONTAINERD" ] || {
		[ "$VERSION" = 2 ] && build_containerd || die "start: $CONTAINERD is missing (hack/containerd.sh install)"
	}
	[ "$VERSION" = 2 ] && build_runc
	cmd_images
	mkdir -p "$DIR" "$DIR/runc" "$DIR/runc-b"
	echo "$VERSION" >"$DIR/version"
	[ -f "$DIR/snapshotter" ] || pick_snapshotter >"$DIR/snapshotter"
	write_config "$(cat "$DIR/snapshotter")"
	write_cni
	save_ip_forward
	rm -f "$SOCK" "$SOCK.ttrpc"
	local path=$PATH
	# The 2.x shim must come first in PATH: containerd starts the shim
	# found there.
	[ "$VERSION" = 2 ] && path=$CD2_BIN:$PATH
	spawn_daemon "$PIDFILE" "$LOGFILE" env PATH="$path" "$CONTAINERD" --config "$DIR/config.toml"
	await_daemon "$PIDFILE" "$LOGFILE" "containerd $NAME on $SOCK"
	local t1; t1=$(now)
	import_images
	log "start: $NAME (containerd $VERSION, pid $(cat "$PIDFILE"), $(cat "$DIR/snapshotter"), subnet $(cat "$DIR/subnet")) up in $(elapsed "$t0"), images imported in $(elapsed "$t1")"
	echo "unix://$SOCK"
}

# kill_daemon: SIGTERM, then SIGKILL after 10s. Shims and containers stay.
kill_daemon() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null || true)
	if pid_alive; then
		stop_pid "$pid" "containerd $NAME" 10
	fi
	rm -f "$PIDFILE"
}

cmd_kill() {
	need_root kill
	parse_instance "$@"
	kill_daemon
	log "kill: containerd $NAME stopped; its pods keep running"
}

# shim_pids: the processes whose command line names the instance's socket
# as a whole argument (its shims).
shim_pids() {
	local p
	for p in /proc/[0-9]*; do
		grep -qzxF "$SOCK" "$p/cmdline" 2>/dev/null && echo "${p#/proc/}"
	done
	return 0
}

cmd_stop() {
	need_root stop
	parse_instance "$@"
	local t0; t0=$(now)
	[ -d "$DIR" ] || { log "stop: $NAME is not running"; return; }
	# 1. Remove every pod through CRI: CNI DEL, network namespaces.
	if pid_alive && answers && command -v go >/dev/null; then
		local rmpods=$CACHE/bin/cri-rmpods
		mkdir -p "$CACHE/bin"
		{ [ -x "$rmpods" ] && [ "$rmpods" -nt "$REPO/hack/cri-rmpods/main.go" ] ||
			(cd "$REPO" && go build -o "$rmpods" ./hack/cri-rmpods); } &&
			"$rmpods" -endpoint "unix://$SOCK" -timeout 60s >&2 || log "stop: removing pods through CRI failed; going on"
	fi
	# 2. The daemon.
	kill_daemon
	# 3. Containers left behind (their processes survive a shim's death).
	if [ -d "$DIR/runc" ]; then
		local ns id
		for ns in "$DIR"/runc/*/ "$DIR"/runc-b/*/; do
			[ -d "$ns" ] || continue
			for id in $("$RUNC" --root "$ns" list -q 2>/dev/null); do
				"$RUNC" --root "$ns" delete --force "$id" >/dev/null 2>&1 || true
			done
		done
	fi
	# 4. Shims of this instance: their command line names its socket.
	local p
	for p in $(shim_pids); do
		kill -KILL "$p" 2>/dev/null || true
	done
	# 5. Mounts left under the instance (netns, rootfs, shm), deepest first.
	local m
	for m in $(awk -v d="$DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	# 6. The bridge, the forwarding switch, the state.
	if [ -f "$DIR/bridge" ] && command -v ip >/dev/null; then
		ip link del "$(cat "$DIR/bridge")" 2>/dev/null || true
	fi
	# CNI's result cache of pods that went without a CNI DEL (the daemon
	# was dead): the bridge results name our network, the loopback ones
	# the same sandbox IDs.
	local r id
	for r in /var/lib/cni/results/"nodekit-$NAME"-*-eth0; do
		[ -e "$r" ] || continue
		id=${r#/var/lib/cni/results/nodekit-$NAME-}
		id=${id%-eth0}
		rm -f "$r" "/var/lib/cni/results/cni-loopback-$id-lo"
	done
	restore_ip_forward
	rm -rf "$DIR"
	log "stop: $NAME stopped and removed ($(elapsed "$t0"))"
}

cmd_status() {
	parse_instance "$@"
	if pid_alive && answers; then
		echo "$NAME: running (containerd $VERSION, pid $(cat "$PIDFILE")) unix://$SOCK"
	elif pid_alive; then
		echo "$NAME: pid $(cat "$PIDFILE") alive but not answering on $SOCK"
		return 1
	else
		echo "$NAME: not running"
		return 1
	fi
}

cmd_env() {
	local out=""
	if (VERSION=1.6 NAME="" parse_instance --version 1.6 && pid_alive && answers); then
		out+="NODEKIT_CRI_ENDPOINT=unix://$BASE/containerd-1.6/containerd.sock "
	fi
	if (VERSION=2 NAME="" parse_instance --version 2 && pid_alive && answers); then
		out+="NODEKIT_CRI2_ENDPOINT=unix://$BASE/containerd-2/containerd.sock "
	fi
	[ -n "$out" ] && echo "export ${out% }"
	return 0
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
install) cmd_install ;;
images) cmd_images ;;
build) cmd_build ;;
start) cmd_start "$@" ;;
kill) cmd_kill "$@" ;;
stop) cmd_stop "$@" ;;
status) cmd_status "$@" ;;
env) cmd_env ;;
oci-image) [ $# -ge 4 ] || usage; oci_image "$@" ;;
import) cmd_import "$@" ;;
tag) cmd_tag "$@" ;;
*) usage ;;
esac
