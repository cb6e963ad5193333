#!/usr/bin/env bash
# The Debian packages in a clean Debian 12 root: mmdebstrap makes a minbase root (plus systemd,
# for `systemd-analyze verify`; no procps: the unit must not need it), `apt-get install ./*.deb`
# installs every package of DIST with its dependencies from Debian, then in_debian_root.sh runs
# the checks inside (mmdebstrap's hooks run in the root with /proc and /dev mounted).
#   tests/packaging/debian_root_test.sh DIST
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dist="$(realpath "$1")"
command -v mmdebstrap >/dev/null || { echo "SKIP: mmdebstrap is not installed (scripts/setup.sh installs it)"; exit 77; }
version="$(dpkg-deb -f "$(ls "$dist"/picomq-connect_*_amd64.deb)" Version)"
apt_cache="${PICOMQ_APT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/picomq/apt-archives}"
mkdir -p "$apt_cache"
debs=("$dist"/*.deb)
echo "installing ${#debs[@]} packages into a Debian 12 minbase root" >&2
mmdebstrap --quiet --variant=minbase --include=ca-certificates,systemd \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
  --setup-hook="sync-in $apt_cache /var/cache/apt/archives/" \
  --customize-hook='mkdir -p "$1"/tmp/debs' \
  --customize-hook="copy-in ${debs[*]} /tmp/debs" \
  --customize-hook="copy-in $here/in_debian_root.sh /tmp" \
  --customize-hook='chroot "$1" sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends /tmp/debs/*.deb >/tmp/apt.log 2>&1 || { tail -30 /tmp/apt.log; exit 1; }"' \
  --customize-hook="sync-out /var/cache/apt/archives $apt_cache" \
  --customize-hook="chroot \"\$1\" sh /tmp/in_debian_root.sh $version" \
  bookworm /dev/null
