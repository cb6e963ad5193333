#!/usr/bin/env bash
# Builds every release artifact into dist/ (or --out DIR), with SHA256SUMS:
#   picomq-connect_<v>_amd64.deb (+ -dbgsym .ddeb)   the runtime and the light sinks
#   picomq-connect-python_<v>_amd64.deb             the Python sink host + package
#   picomq-connect-sink-<heavy>_<v>_amd64.deb       doris, redshift, delta, iceberg
#   picomq-connect-dev_<v>_amd64.deb                SDK, kit, CMake package, conformance suite
#   picomq-connect-sink-<heavy>-<v>-linux-amd64.tar.gz (+ .sha256)  the heavy sinks as tarballs:
#                                                   the .so, its doc page, the licence, its copyright, SHA256SUMS
#   picomq_connect-<v>.tar.gz, picomq_connect-<v>-cp311-*.whl       the Python package
#   picomq-connect-image-<v>.oci.tar / .docker.tar.gz  the image (light sinks in it)
# Usage: scripts/release.sh [--out DIR] [--skip-build] [--no-image]
#   --skip-build  use build/ as it is (CI: the test step built it)
#   --no-image    everything but the image (no mmdebstrap / podman needed)
# docs/install.md says how each one is installed; its size table is rewritten from this build.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$here/dist" build=1 image=1
while (($#)); do
  case "$1" in
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --skip-build) build=0; shift ;;
    --no-image) image=0; shift ;;
    *) echo "usage: scripts/release.sh [--out DIR] [--skip-build] [--no-image]" >&2; exit 2 ;;
  esac
done
phase() { echo "release: $*" >&2; }
t_start=$SECONDS

if ((build)); then
  "$here/scripts/setup.sh" --no-servers >/dev/null
  "$here/scripts/build.sh"
fi
version="$(sed -n 's/^#define PICOMQ_VERSION "\(.*\)"$/\1/p' "$here/build/src/app/generated/version_info.h")"
[[ -n "$version" ]] || { echo "release: no version in build/src/app/generated/version_info.h (build first)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"

# 1. The Debian packages (cmake/PicomqPackaging.cmake).
t0=$SECONDS
rm -rf "$here/build/packages"
(cd "$here/build" && cpack -G DEB >"$here/build/cpack.log" 2>&1) || { tail -n 40 "$here/build/cpack.log" >&2; exit 1; }
cp "$here/build/packages/"*.deb "$here/build/packages/"*.ddeb "$out/"
phase "packages in $((SECONDS - t0)) s"

# 2. The heavy sinks as tarballs: the same stripped .so as their package.
t0=$SECONDS
for heavy in doris redshift delta iceberg; do
  name="picomq-connect-sink-$heavy-$version-linux-amd64"
  stage="$(mktemp -d)"
  dpkg-deb -x "$out/picomq-connect-sink-${heavy}_${version}_amd64.deb" "$stage/deb"
  mkdir "$stage/$name"
  cp "$stage/deb/usr/lib/picomq-connect/plugins/libpicomq_connector_${heavy}_sink.so" "$stage/$name/"
  cp "$here/docs/sinks/$heavy.md" "$here/LICENSE" "$stage/deb/usr/share/doc/picomq-connect-sink-$heavy/copyright" "$stage/$name/"
  cat >"$stage/$name/README" <<TXT
picomq-connect sink '$heavy' $version (sink ABI $(sed -n 's/^sink ABI: //p' < <("$here/build/bin/picomq-connect" --version)), linux amd64, Debian 12 libraries.
Put libpicomq_connector_${heavy}_sink.so into a plugin directory of the runtime: the default one
(/usr/lib/picomq-connect/plugins, in the image too) or one named in [plugins] path, then use
path = "libpicomq_connector_${heavy}_sink" in a sink definition. Options and behaviour: $heavy.md.
TXT
  (cd "$stage/$name" && sha256sum ./* >SHA256SUMS)
  tar -C "$stage" --owner=0 --group=0 --sort=name -czf "$out/$name.tar.gz" "$name"
  (cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
  rm -rf "$stage"
done
phase "heavy-sink tarballs in $((SECONDS - t0)) s"

# 3. The Python package: sdist and wheel by the standard frontend (`python -m build`), from a
# staged copy with the ABI headers and the version beside setup.py (the checkout stays clean).
t0=$SECONDS
venv="${XDG_CACHE_HOME:-$HOME/.cache}/picomq/venvs/release-build-1.6.1"
if [[ ! -x "$venv/bin/pyproject-build" ]]; then
  /usr/bin/python3.11 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check build==1.6.1 setuptools==84.2.1 wheel==0.48.0
fi
stage="$(mktemp -d)"
cp -r "$here/python" "$stage/python"
rm -rf "$stage/python/"*.egg-info "$stage/python/build"
find "$stage/python" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$stage/python/include/picomq"
cp "$here/include/picomq/sink_abi.h" "$here/include/picomq/arrow_c_data.h" "$stage/python/include/picomq/"
echo "$version" >"$stage/python/VERSION"
cp "$here/LICENSE" "$stage/python/"
"$venv/bin/python" -m build --no-isolation --outdir "$out" "$stage/python" >"$stage/build.log" 2>&1 || { tail -n 40 "$stage/build.log" >&2; exit 1; }
rm -rf "$stage"
phase "Python sdist and wheel in $((SECONDS - t0)) s"

# 4. The image.
if ((image)); then
  t0=$SECONDS
  bash "$here/packaging/container/build-image.sh" "$out/picomq-connect_${version}_amd64.deb" \
    "$out/picomq-connect-image-$version" "picomq-connect:$version"
  phase "image in $((SECONDS - t0)) s"
fi

(cd "$out" && sha256sum -- * | grep -v ' SHA256SUMS$' >SHA256SUMS)
# docs/install.md's size table: every artifact's size (and a package's installed size), written
# only by a release's own build (--skip-build packs whatever build/ holds: the tests' build has
# line tables only and unoptimized Rust plugins, whose sizes are not the release's).
((build)) && python3 - "$out" "$here/docs/install.md" "$version" <<'PY'
import glob, os, re, subprocess, sys
out, doc, version = sys.argv[1:4]
def human(n):
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{max(1, round(n / 2**10))} KB"
rows = []
for path in sorted(glob.glob(os.path.join(out, "*"))):
    name = os.path.basename(path)
    if name == "SHA256SUMS" or name.endswith(".sha256"):
        continue
    installed = ""
    if name.endswith((".deb", ".ddeb")):
        kib = subprocess.run(["dpkg-deb", "-f", path, "Installed-Size"], capture_output=True, text=True).stdout.strip()
        installed = human(int(kib) * 1024) if kib.isdigit() else ""
    rows.append(f"| `{name}` | {human(os.path.getsize(path))} | {installed} |")
table = f"| Artifact ({version}) | Size | Installed |\n|---|---|---|\n" + "\n".join(rows) + "\n"
text = open(doc).read()
new = re.sub(r"(<!-- BEGIN sizes: scripts/release.sh -->\n).*?(<!-- END sizes -->)", lambda m: m.group(1) + table + m.group(2), text, flags=re.S)
if new == text and table not in text:
    sys.exit(f"release: no size table markers in {doc}")
open(doc, "w").write(new)
PY
phase "done in $((SECONDS - t_start)) s: $out"
(cd "$out" && ls -l --block-size=K | awk 'NR > 1 { printf "  %8s  %s\n", $5, $9 }') >&2
