#!/usr/bin/env bash
# podman with the settings these machines need (../shared/ENVIRONMENT-NOTES.md, "Container
# images"): vfs storage, the runc runtime, the cgroupfs manager and no default ulimits.
set -euo pipefail
conf="${XDG_CACHE_HOME:-$HOME/.cache}/picomq/containers.conf"
if [[ ! -f "$conf" ]]; then
  mkdir -p "$(dirname "$conf")"
  printf '[containers]\ndefault_ulimits = []\n' >"$conf"
fi
export CONTAINERS_CONF="$conf"
cmd=$1
shift
case "$cmd" in
  run | create) exec podman --storage-driver vfs --cgroup-manager cgroupfs "$cmd" --runtime runc "$@" ;;
  *) exec podman --storage-driver vfs --cgroup-manager cgroupfs "$cmd" "$@" ;;
esac
