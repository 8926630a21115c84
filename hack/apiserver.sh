#!/usr/bin/env bash
# A real kube-apiserver and etcd on loopback for nodekit's integration tests.
#
#   hack/apiserver.sh build              build kube-apiserver and etcd (cached)
#   hack/apiserver.sh start [--dir DIR] [--reuse]
#                                        start both, write DIR/kubeconfig
#   hack/apiserver.sh stop  [--dir DIR]  stop both by PID and wait
#   hack/apiserver.sh kill  [--dir DIR]  SIGKILL both (a crash) and wait
#   hack/apiserver.sh env   [--dir DIR]  print: export NODEKIT_KUBECONFIG=DIR/kubeconfig
#
# start wipes DIR and starts an empty cluster on fresh random ports; with
# --reuse it starts a stopped instance of DIR again, with its data, ports and
# credentials (an API-server outage, for tests). NODEKIT_APISERVER_FLAGS adds
# flags to kube-apiserver; NODEKIT_APISERVER_AUTHORIZATION_MODE replaces its
# --authorization-mode, RBAC (e.g. Node,RBAC as kubeadm's: a list flag given
# twice would name RBAC twice).
#
# Both are built from the Go module proxy in a scratch module under the cache
# directory (${NODEKIT_CACHE:-$HOME/.cache/nodekit}), outside the project's own
# go.mod, and rebuilt only when a binary is missing. DIR defaults to
# ${NODEKIT_APISERVER_DIR:-${TMPDIR:-/tmp}/nodekit-apiserver}. The tests read
# the kubeconfig from NODEKIT_KUBECONFIG, never KUBECONFIG, so they cannot
# touch a real cluster.
#
# kube-apiserver reaches node agents' HTTP APIs (logs, exec, port-forward)
# as the kubelet's: at the Node's InternalIP (then Hostname), with the
# client certificate DIR/pki/kubelet-client.crt (CN
# kube-apiserver-kubelet-client, group system:masters) signed by
# DIR/pki/ca.crt, which agents take as their client CA.
#
# It also serves aggregated APIs (metrics-server's metrics.k8s.io): it
# proxies their requests with the front-proxy client certificate
# DIR/pki/front-proxy-client.crt (CN front-proxy-client), signed by a CA of
# its own, DIR/pki/front-proxy-ca.crt, which it publishes in the
# kube-system/extension-apiserver-authentication ConfigMap with the
# X-Remote-User/-Group/-Extra- headers, and routes them to the endpoints
# of the APIService's Service (--enable-aggregator-routing: no kube-proxy).
set -euo pipefail

NAME_LOG=apiserver.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ETCD_VERSION=v3.7.0

CACHE=${NODEKIT_CACHE:-$HOME/.cache/nodekit}
BUILD_DIR=$CACHE/apiserver-$KUBE_VERSION-etcd-$ETCD_VERSION
BIN=$BUILD_DIR/bin
DIR=${NODEKIT_APISERVER_DIR:-${TMPDIR:-/tmp}/nodekit-apiserver}

write_module() {
	write_kube_module "$BUILD_DIR" <<EOM
module nodekit.local/apiserver-build

go 1.26.0

require (
	k8s.io/kubernetes $KUBE_VERSION
	go.etcd.io/etcd/server/v3 $ETCD_VERSION
)

tool (
	k8s.io/kubernetes/cmd/kube-apiserver
	go.etcd.io/etcd/server/v3
)
EOM
}

# ensure_tools installs what the script runs when it is missing (root on
# Debian, as CI runs), or says what to install.
ensure_tools() {
	local missing=()
	command -v openssl >/dev/null || missing+=(openssl)
	command -v curl >/dev/null || missing+=(curl)
	command -v flock >/dev/null || missing+=(util-linux)
	[ ${#missing[@]} -gt 0 ] || return 0
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing ${missing[*]}"
		apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	else
		die "missing tools: install ${missing[*]}"
	fi
}

built() { [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ]; }

cmd_build() {
	if built; then return 0; fi
	mkdir -p "$CACHE"
	exec 9>"$CACHE/apiserver-build.lock"
	flock 9
	if built; then exec 9>&-; return 0; fi
	local start=$SECONDS
	log "building kube-apiserver $KUBE_VERSION and etcd $ETCD_VERSION (cold: about 10 minutes)"
	write_module
	mkdir -p "$BIN"
	if [ ! -x "$BIN/kube-apiserver" ]; then
		kube_build "$BUILD_DIR" "$BIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
	fi
	if [ ! -x "$BIN/etcd" ]; then
		(
			cd "$BUILD_DIR"
			export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOWORK=off
			go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
			mv "$BIN/etcd.tmp" "$BIN/etcd"
		)
	fi
	log "built in $((SECONDS - start)) s: $BIN"
	exec 9>&-
}

make_certs() {
	local d=$DIR/pki
	mkdir -p "$d"
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$d/ca.key" -sha256 -days 3650 -subj "/CN=nodekit-test-ca" -out "$d/ca.crt" 2>/dev/null
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/serving.key" 2>/dev/null
	openssl req -new -key "$d/serving.key" -subj "/CN=kube-apiserver" -out "$d/serving.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\n' >"$d/serving.ext"
	openssl x509 -req -in "$d/serving.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 3650 -sha256 \
		-extfile "$d/serving.ext" -out "$d/serving.crt" 2>/dev/null
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/sa.key" 2>/dev/null
	openssl ec -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
	make_kubelet_client_cert
	make_front_proxy_certs
}

# make_front_proxy_certs makes the front-proxy CA and the client
# certificate kube-apiserver proxies aggregated APIs' requests with (also
# for an instance made by an older version of this script, on --reuse).
make_front_proxy_certs() {
	local d=$DIR/pki
	[ -f "$d/front-proxy-client.crt" ] && [ -f "$d/front-proxy-client.key" ] && return 0
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/front-proxy-ca.key" 2>/dev/null
	openssl req -x509 -new -key "$d/front-proxy-ca.key" -sha256 -days 3650 -subj "/CN=nodekit-test-front-proxy-ca" -out "$d/front-proxy-ca.crt" 2>/dev/null
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/front-proxy-client.key" 2>/dev/null
	openssl req -new -key "$d/front-proxy-client.key" -subj "/CN=front-proxy-client" -out "$d/front-proxy-client.csr" 2>/dev/null
	printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n' >"$d/front-proxy-client.ext"
	openssl x509 -req -in "$d/front-proxy-client.csr" -CA "$d/front-proxy-ca.crt" -CAkey "$d/front-proxy-ca.key" -CAcreateserial -days 3650 -sha256 \
		-extfile "$d/front-proxy-client.ext" -out "$d/front-proxy-client.crt" 2>/dev/null
}

# make_kubelet_client_cert makes the certificate kube-apiserver presents to
# node agents, signed by the cluster CA (also for an instance made by an
# older version of this script, on --reuse).
make_kubelet_client_cert() {
	local d=$DIR/pki
	[ -f "$d/kubelet-client.crt" ] && [ -f "$d/kubelet-client.key" ] && return 0
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/kubelet-client.key" 2>/dev/null
	openssl req -new -key "$d/kubelet-client.key" -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" -out "$d/kubelet-client.csr" 2>/dev/null
	printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature\n' >"$d/kubelet-client.ext"
	openssl x509 -req -in "$d/kubelet-client.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 3650 -sha256 \
		-extfile "$d/kubelet-client.ext" -out "$d/kubelet-client.crt" 2>/dev/null
}

write_kubeconfig() {
	local port=$1 token=$2
	local ca
	ca=$(base64 -w0 <"$DIR/pki/ca.crt")
	cat >"$DIR/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: nodekit-test
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $ca
users:
- name: admin
  user:
    token: $token
contexts:
- name: nodekit-test
  context:
    cluster: nodekit-test
    user: admin
current-context: nodekit-test
EOF
	chmod 600 "$DIR/kubeconfig.tmp"
	mv "$DIR/kubeconfig.tmp" "$DIR/kubeconfig"
}

# start_etcd CLIENT_PORT PEER_PORT starts etcd and waits until it is
# healthy; sets ETCD_PID. etcd reads every ETCD_* variable as a flag: it runs
# with a bare environment.
start_etcd() {
	local client=$1 peer=$2
	mkdir -p "$DIR/etcd"
	env -i PATH="$PATH" HOME="${HOME:-/}" "$BIN/etcd" \
		--name=nodekit --data-dir="$DIR/etcd/data" \
		--listen-client-urls="http://127.0.0.1:$client" --advertise-client-urls="http://127.0.0.1:$client" \
		--listen-peer-urls="http://127.0.0.1:$peer" --initial-advertise-peer-urls="http://127.0.0.1:$peer" \
		--initial-cluster="nodekit=http://127.0.0.1:$peer" \
		--unsafe-no-fsync --quota-backend-bytes=2147483648 --log-level=warn \
		>>"$DIR/etcd.log" 2>&1 </dev/null &
	ETCD_PID=$!
	local deadline=$((SECONDS + 30))
	while [ "$SECONDS" -lt "$deadline" ]; do
		alive "$ETCD_PID" || { log "etcd exited"; return 1; }
		if curl --noproxy "*" -fsS --max-time 1 "http://127.0.0.1:$client/health" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# start_apiserver PORT ETCD_PORT TOKEN starts kube-apiserver and waits until
# /readyz answers and namespace default exists; sets APISERVER_PID.
start_apiserver() {
	local port=$1 etcd_port=$2 token=$3
	# shellcheck disable=SC2086 # NODEKIT_APISERVER_FLAGS is a list of flags
	"$BIN/kube-apiserver" \
		--etcd-servers="http://127.0.0.1:$etcd_port" \
		--bind-address=127.0.0.1 --secure-port="$port" --advertise-address=127.0.0.1 \
		--endpoint-reconciler-type=none \
		--tls-cert-file="$DIR/pki/serving.crt" --tls-private-key-file="$DIR/pki/serving.key" \
		--client-ca-file="$DIR/pki/ca.crt" --token-auth-file="$DIR/tokens.csv" \
		--authorization-mode="${NODEKIT_APISERVER_AUTHORIZATION_MODE:-RBAC}" \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-key-file="$DIR/pki/sa.pub" --service-account-signing-key-file="$DIR/pki/sa.key" \
		--service-cluster-ip-range=10.0.0.0/24 \
		--disable-admission-plugins=ServiceAccount \
		--allow-privileged=true \
		--kubelet-client-certificate="$DIR/pki/kubelet-client.crt" --kubelet-client-key="$DIR/pki/kubelet-client.key" \
		--kubelet-preferred-address-types=InternalIP,Hostname \
		--requestheader-client-ca-file="$DIR/pki/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
		--requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
		--requestheader-extra-headers-prefix=X-Remote-Extra- \
		--proxy-client-cert-file="$DIR/pki/front-proxy-client.crt" --proxy-client-key-file="$DIR/pki/front-proxy-client.key" \
		--enable-aggregator-routing=true \
		--cert-dir="$DIR/apiserver-certs" \
		--profiling=false \
		--shutdown-send-retry-after=true \
		${NODEKIT_APISERVER_FLAGS:-} \
		>>"$DIR/kube-apiserver.log" 2>&1 </dev/null &
	APISERVER_PID=$!
	local url=https://127.0.0.1:$port
	for _ in $(seq 1 600); do
		alive "$APISERVER_PID" || return 1
		if curl --noproxy "*" -fsS --max-time 2 --cacert "$DIR/pki/ca.crt" -H "Authorization: Bearer $token" "$url/readyz" >/dev/null 2>&1 &&
			curl --noproxy "*" -fsS --max-time 2 --cacert "$DIR/pki/ca.crt" -H "Authorization: Bearer $token" "$url/api/v1/namespaces/default" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

cmd_start() {
	cmd_build
	if [ -f "$DIR/pids" ]; then
		local a e
		read -r a e <"$DIR/pids" || true
		if alive "$a" || alive "$e"; then
			die "already running in $DIR (pids $a $e): stop it first"
		fi
	fi
	local start=$SECONDS token api_port etcd_port peer_port
	if [ -n "$REUSE" ]; then
		[ -f "$DIR/ports" ] && [ -f "$DIR/tokens.csv" ] || die "--reuse: no stopped instance in $DIR"
		DIR=$(cd "$DIR" && pwd)
		read -r api_port etcd_port peer_port <"$DIR/ports"
		token=$(cut -d, -f1 "$DIR/tokens.csv")
		make_kubelet_client_cert
		make_front_proxy_certs
		start_etcd "$etcd_port" "$peer_port" || { stop_pid "$ETCD_PID" etcd; die "etcd did not become healthy, see $DIR/etcd.log"; }
		if ! start_apiserver "$api_port" "$etcd_port" "$token"; then
			stop_pid "$APISERVER_PID" kube-apiserver
			stop_pid "$ETCD_PID" etcd
			tail -n 30 "$DIR/kube-apiserver.log" >&2 || true
			die "kube-apiserver did not become ready, see $DIR/kube-apiserver.log"
		fi
	else
		# Wipe only a directory this script made (or an empty one).
		if [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ] && [ ! -f "$DIR/.nodekit-apiserver" ]; then
			die "$DIR is not empty and was not made by this script: not wiping it"
		fi
		rm -rf "$DIR"
		mkdir -p "$DIR"
		DIR=$(cd "$DIR" && pwd)
		touch "$DIR/.nodekit-apiserver"
		make_certs
		token=$(openssl rand -hex 24)
		echo "$token,admin,admin,system:masters" >"$DIR/tokens.csv"
		chmod 600 "$DIR/tokens.csv"
		ETCD_PID= APISERVER_PID=
		local ok=
		# Ports are picked free but not reserved: on a clash, try new ones.
		for attempt in 1 2 3; do
			etcd_port=$(free_port)
			peer_port=$(free_port)
			api_port=$(free_port)
			if [ "$etcd_port" = "$peer_port" ] || [ "$api_port" = "$etcd_port" ] || [ "$api_port" = "$peer_port" ]; then
				continue
			fi
			if ! start_etcd "$etcd_port" "$peer_port"; then
				log "etcd did not become healthy (attempt $attempt); the end of $DIR/etcd.log:"
				tail -n 15 "$DIR/etcd.log" >&2 || true
				stop_pid "$ETCD_PID" etcd
				rm -rf "$DIR/etcd"
				continue
			fi
			if start_apiserver "$api_port" "$etcd_port" "$token"; then
				ok=1
				break
			fi
			log "kube-apiserver did not become ready (attempt $attempt), see $DIR/kube-apiserver.log"
			stop_pid "$APISERVER_PID" kube-apiserver
			stop_pid "$ETCD_PID" etcd
			rm -rf "$DIR/etcd"
		done
		if [ -z "$ok" ]; then
			tail -n 30 "$DIR/kube-apiserver.log" >&2 || true
			die "could not start kube-apiserver and etcd"
		fi
		echo "$api_port $etcd_port $peer_port" >"$DIR/ports"
		write_kubeconfig "$api_port" "$token"
	fi
	echo "$APISERVER_PID $ETCD_PID" >"$DIR/pids"
	log "ready in $((SECONDS - start)) s: https://127.0.0.1:$api_port (kube-apiserver $APISERVER_PID, etcd $ETCD_PID on $etcd_port)"
	log "kubeconfig: $DIR/kubeconfig"
}

cmd_stop() {
	[ -f "$DIR/pids" ] || { log "nothing running in $DIR"; return 0; }
	local a e
	read -r a e <"$DIR/pids" || true
	stop_pid "$a" kube-apiserver
	stop_pid "$e" etcd
	rm -f "$DIR/pids"
	log "stopped"
}

# cmd_kill kills both with SIGKILL, as a crash would, and waits until they
# are gone; start --reuse brings the instance back.
cmd_kill() {
	[ -f "$DIR/pids" ] || { log "nothing running in $DIR"; return 0; }
	local a e
	read -r a e <"$DIR/pids" || true
	kill -KILL "$a" "$e" 2>/dev/null || true
	while alive "$a" || alive "$e"; do sleep 0.1; done
	rm -f "$DIR/pids"
	log "killed"
}

cmd_env() {
	DIR=$(cd "$DIR" 2>/dev/null && pwd || echo "$DIR")
	echo "export NODEKIT_KUBECONFIG=$DIR/kubeconfig"
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
}

[ $# -ge 1 ] || usage
ensure_tools
cmd=$1
shift
REUSE=
while [ $# -gt 0 ]; do
	case $1 in
	--dir) [ $# -ge 2 ] || usage; DIR=$2; shift 2 ;;
	--dir=*) DIR=${1#--dir=}; shift ;;
	--reuse) REUSE=1; shift ;;
	*) usage ;;
	esac
done
case $cmd in
build) cmd_build ;;
start) cmd_start ;;
stop) cmd_stop ;;
kill) cmd_kill ;;
env) cmd_env ;;
*) usage ;;
esac
