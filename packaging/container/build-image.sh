#!/usr/bin/env bash
# Builds the picomq-connect image from the picomq-connect .deb and saves it twice: OUT.oci.tar
# (OCI image layout, for skopeo / registries / containerd) and OUT.docker.tar.gz (Docker format, the
# one that keeps the HEALTHCHECK: the OCI image config has no field for it). Same layers.
#   packaging/container/build-image.sh DEB OUT [TAG]      (OUT without the .oci.tar suffix)
# 1. mmdebstrap: a Debian 12 minbase root with ca-certificates and libsqlite3-0 (the one library a
#    heavy sink needs that the package does not bring: Iceberg's SQL catalog), then `apt-get install ./DEB`
#    inside it (dependencies from Debian), without docs, man pages and locales but the copyrights
#    and picomq-connect's own docs; apt's lists and caches removed; usrmerge purged once /usr is
#    merged (it alone pulls in perl: ~46 MB).
# 2. podman build FROM scratch on that root (Containerfile), then podman save.
# Downloaded Debian packages are kept in ~/.cache/picomq/apt-archives (the next build reuses them).
# Podman settings that work on these machines (ENVIRONMENT-NOTES): vfs storage, runc, cgroupfs;
# packaging/container/podman.sh wraps them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
deb="$(realpath "$1")" out="$(realpath -m "$2")"
version="$(dpkg-deb -f "$deb" Version)"
tag="${3:-picomq-connect:$version}"
work="$(mktemp -d -t picomq-image.XXXXXX)"
trap 'rm -rf "$work"' EXIT
apt_cache="${PICOMQ_APT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/picomq/apt-archives}"
mkdir -p "$apt_cache"

t0=$SECONDS
mmdebstrap --quiet --variant=minbase --include=ca-certificates,libsqlite3-0 \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-include=/usr/share/doc/picomq-connect/*' \
  --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
  --setup-hook="sync-in $apt_cache /var/cache/apt/archives/" \
  --customize-hook="copy-in $deb /tmp" \
  --customize-hook='chroot "$1" sh -c "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends /tmp/*.deb >/dev/null && rm /tmp/*.deb"' \
  --customize-hook="sync-out /var/cache/apt/archives $apt_cache" \
  --customize-hook='chroot "$1" sh -c "DEBIAN_FRONTEND=noninteractive apt-get purge -y -q usrmerge libfile-find-rule-perl libnumber-compare-perl libtext-glob-perl perl perl-modules-5.36 libperl5.36 libgdbm-compat4 >/dev/null"' \
  --customize-hook='rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/* "$1"/var/cache/debconf/*-old "$1"/var/log/*' \
  --customize-hook='chroot "$1" id -u picomq-connect > "$1"/tmp/picomq-uid' \
  --customize-hook="copy-out /tmp/picomq-uid $work" \
  --customize-hook='rm "$1"/tmp/picomq-uid' \
  bookworm "$work/rootfs.tar"
echo "image: root made in $((SECONDS - t0)) s ($(du -m "$work/rootfs.tar" | cut -f1) MB)" >&2

cp "$here/Containerfile" "$work/"
commit="$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
t0=$SECONDS
"$here/podman.sh" build --quiet --format docker -t "$tag" \
  --build-arg VERSION="$version" --build-arg REVISION="$commit" --build-arg UID="$(cat "$work/picomq-uid")" \
  --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -f "$work/Containerfile" "$work" >/dev/null
rm -f "$out.oci.tar" "$out.docker.tar"
"$here/podman.sh" save --quiet --format oci-archive -o "$out.oci.tar" "$tag"
"$here/podman.sh" save --quiet --format docker-archive -o "$out.docker.tar" "$tag"
gzip -f "$out.docker.tar"  # layers are stored uncompressed there; `podman load` / `docker load` read .tar.gz
echo "image: $tag built and saved in $((SECONDS - t0)) s: $out.oci.tar ($(du -m "$out.oci.tar" | cut -f1) MB), .docker.tar.gz" >&2
