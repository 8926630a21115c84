#!/usr/bin/env bash
# The exported API of nodekit's packages, kept in api/next.txt as a reviewed
# listing (one line per exported declaration, as Go's api/go1.*.txt).
#
#   hack/api.sh update   regenerate api/next.txt from the code (after a merge,
#                        or any change of an exported name): one command
#   hack/api.sh check    fail when api/next.txt differs from the code, or when
#                        a name changed since the last release's listing
#                        (api/vX.Y.Z.txt) is not named in CHANGELOG.md's
#                        Unreleased section (CI runs this: .ci/run)
#   hack/api.sh release vX.Y.Z
#                        copy api/next.txt to api/vX.Y.Z.txt, the listing the
#                        next Unreleased section is checked against
#
# The generator is internal/cmd/api (standard library only); it reads the
# packages' export data through go list, from the build cache when they did
# not change. See CONTRIBUTING.md for the changelog rule.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

case "${1:-}" in
update)
	go run ./internal/cmd/api -w
	echo "api.sh: wrote api/next.txt; review it (git diff api/) and name each change in CHANGELOG.md's Unreleased section" >&2
	;;
check)
	go run ./internal/cmd/api -check
	;;
release)
	v=${2:-}
	[[ $v =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "api.sh: release takes a version vX.Y.Z" >&2; exit 2; }
	go run ./internal/cmd/api -check
	cp api/next.txt "api/$v.txt"
	echo "api.sh: wrote api/$v.txt; move CHANGELOG.md's Unreleased entries under [${v#v}]" >&2
	;;
*)
	echo "usage: hack/api.sh update | check | release vX.Y.Z" >&2
	exit 2
	;;
esac
