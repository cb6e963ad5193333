#!/usr/bin/env bash
# lintian over every Debian package of DIST (Debian 12's lintian, its default profile): any error
# or warning fails, except those a package overrides with its reason
# (packaging/debian/*.lintian-overrides, installed into /usr/share/lintian/overrides/).
#   tests/packaging/lintian_test.sh DIST
set -euo pipefail
dist="$(realpath "$1")"
command -v lintian >/dev/null || { echo "SKIP: lintian is not installed (scripts/setup.sh installs it)"; exit 77; }
debs=("$dist"/*.deb)
echo "lintian $(lintian --version | awk '{print $2}') over ${#debs[@]} packages" >&2
# --fail-on: errors and warnings; info and pedantic tags are printed, not failed on.
lintian --fail-on error,warning --tag-display-limit 0 --display-info "${debs[@]}"
echo "lintian: no error or warning in ${#debs[@]} packages"
