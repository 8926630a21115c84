#!/usr/bin/env bash
# A private image registry on loopback that requires a login, for the
# tests of image pull secrets: Debian's docker-registry (the distribution
# registry 2.8) with htpasswd authentication, over plain HTTP on
# 127.0.0.1 (containerd talks plain HTTP to a loopback registry without
# configuration, 1.6 and 2.x alike). Runs as root for install only; needs
# no systemd.
#
#   hack/registry.sh install              # docker-registry and apache2-utils (htpasswd), when missing
#   hack/registry.sh start --dir DIR      # prints the registry's host:port
#   hack/registry.sh stop --dir DIR
#   hack/registry.sh env --dir DIR        # export NODEKIT_REGISTRY=... NODEKIT_REGISTRY_USER=... NODEKIT_REGISTRY_PASSWORD=...
#
# start is idempotent (a running instance is left alone) and so is stop.
# Each instance has its own directory (config, htpasswd, storage, log,
# PID), a free port, user "nodekit" and a random password (DIR/user,
# DIR/password). Images are pushed by the tests themselves.
set -euo pipefail

NAME_LOG=registry.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REGISTRY=/usr/bin/docker-registry

cmd_install() {
	local t0; t0=$(now)
	local missing=()
	[ -x "$REGISTRY" ] || missing+=(docker-registry)
	command -v htpasswd >/dev/null || missing+=(apache2-utils)
	if [ ${#missing[@]} -eq 0 ]; then
		log "install: everything present ($(elapsed "$t0"))"
		return
	fi
	[ "$(id -u)" -eq 0 ] || die "install needs root"
	log "install: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	# policy-rc.d: the package's init script must not start the system's
	# registry on :5000.
	local policy=/usr/sbin/policy-rc.d created=0
	if [ ! -e $policy ]; then
		printf '#!/bin/sh\nexit 101\n' >$policy && chmod +x $policy && created=1
	fi
	local rc=0
	if ! apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
	fi
	[ $created = 1 ] && rm -f $policy
	[ $rc = 0 ] || die "install: apt-get failed"
	log "install: done ($(elapsed "$t0"))"
}

DIR=""
parse() {
	while [ $# -gt 0 ]; do
		case $1 in
		--dir) DIR=${2:?--dir needs a value}; shift 2 ;;
		--dir=*) DIR=${1#*=}; shift ;;
		*) die "unknown argument $1" ;;
		esac
	done
	[ -n "$DIR" ] || die "--dir is required"
	mkdir -p "$DIR"
	DIR=$(cd "$DIR" && pwd)
	PIDFILE=$DIR/registry.pid
}

pid_alive() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q registry "/proc/$pid/comm" 2>/dev/null
}

# answers: the registry's API answers 401 without a login.
answers() {
	[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$(cat "$DIR/addr")/v2/")" = 401 ]
}

cmd_start() {
	parse "$@"
	local t0; t0=$(now)
	[ -x "$REGISTRY" ] || die "start: $REGISTRY is missing (hack/registry.sh install)"
	command -v htpasswd >/dev/null || die "start: htpasswd is missing (hack/registry.sh install)"
	if pid_alive && answers; then
		cat "$DIR/addr"
		return
	fi
	pid_alive && die "start: pid $(cat "$PIDFILE") alive but not answering; hack/registry.sh stop --dir $DIR"
	mkdir -p "$DIR/data"
	echo nodekit >"$DIR/user"
	[ -s "$DIR/password" ] || openssl rand -hex 12 >"$DIR/password"
	htpasswd -Bbn "$(cat "$DIR/user")" "$(cat "$DIR/password")" >"$DIR/htpasswd" 2>/dev/null
	echo "127.0.0.1:$(free_port)" >"$DIR/addr"
	cat >"$DIR/config.yml" <<EOC
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/data
  delete:
    enabled: true
http:
  addr: $(cat "$DIR/addr")
  secret: $(openssl rand -hex 16)
auth:
  htpasswd:
    realm: nodekit-registry
    path: $DIR/htpasswd
EOC
	spawn_daemon "$PIDFILE" "$DIR/registry.log" "$REGISTRY" serve "$DIR/config.yml"
	await_daemon "$PIDFILE" "$DIR/registry.log" "the registry on $(cat "$DIR/addr")"
	log "start: registry on $(cat "$DIR/addr") (pid $(cat "$PIDFILE")) up in $(elapsed "$t0")"
	cat "$DIR/addr"
}

cmd_stop() {
	parse "$@"
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null || true)
	if pid_alive; then
		stop_pid "$pid" registry 5
	fi
	rm -f "$PIDFILE"
}

cmd_env() {
	parse "$@"
	pid_alive || die "env: no registry runs in $DIR"
	echo "export NODEKIT_REGISTRY=$(cat "$DIR/addr") NODEKIT_REGISTRY_USER=$(cat "$DIR/user") NODEKIT_REGISTRY_PASSWORD=$(cat "$DIR/password")"
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
install) cmd_install ;;
start) cmd_start "$@" ;;
stop) cmd_stop "$@" ;;
env) cmd_env "$@" ;;
*) usage ;;
esac
