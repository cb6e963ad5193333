#!/usr/bin/env bash
# The Python package of the release: the wheel installs into a fresh virtualenv without the
# checkout and imports with its compiled _picomq_abi; the sdist stands alone (the headers and the
# version are in it) and builds a wheel of its own; one version everywhere (the CMake project's,
# the package's, the chart's).
#   tests/packaging/python_package_test.sh DIST
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dist="$(realpath "$1")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
version="$(sed -n 's/^project(picomq_connect VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
fail() { echo "FAIL $*" >&2; exit 1; }

wheel=("$dist"/picomq_connect-"$version"-cp311-*.whl)
sdist="$dist/picomq_connect-$version.tar.gz"
[[ -f "${wheel[0]}" && -f "$sdist" ]] || fail "no wheel or sdist of $version in $dist"

/usr/bin/python3.11 -m venv "$work/wheel-venv"
"$work/wheel-venv/bin/pip" install -q --no-index --disable-pip-version-check "${wheel[0]}"
(cd "$work" && "$work/wheel-venv/bin/python" - "$version" <<'PY'
import sys
import _picomq_abi  # the compiled plane normalisation
import agora, picomq_connect
from agora import BaseSink, DataPlane, sink_data_plane_spec
assert picomq_connect.__version__ == sys.argv[1], picomq_connect.__version__
assert "site-packages" in picomq_connect.__file__, picomq_connect.__file__

class MySink(BaseSink[dict]):
    sink_name = "my_sink"
    async def write(self, record: dict) -> None:
        pass

spec = sink_data_plane_spec(MySink())
assert spec.accepted_planes == (DataPlane.PYTHON_ROWS,), spec
print("ok   wheel: installed alone, imports, the spec's plane assertion holds")
PY
)

# The sdist alone (outside the checkout): its own wheel builds with setuptools, no network.
tar -C "$work" -xzf "$sdist"
[[ -f "$work/picomq_connect-$version/include/picomq/sink_abi.h" && "$(cat "$work/picomq_connect-$version/VERSION")" == "$version" ]] ||
  fail "the sdist lacks its headers or VERSION"
build_venv="${XDG_CACHE_HOME:-$HOME/.cache}/picomq/venvs/release-build-1.6.1"
"$build_venv/bin/pip" wheel -q --no-deps --no-build-isolation --disable-pip-version-check -w "$work/from-sdist" "$sdist" >/dev/null
ls "$work/from-sdist"/picomq_connect-"$version"-cp311-*.whl >/dev/null || fail "no wheel built from the sdist"
echo "ok   sdist: stands alone and builds a wheel"

chart="$root/deploy/helm/picomq-connect/Chart.yaml"
grep -qx "version: $version" "$chart" && grep -qx "appVersion: \"$version\"" "$chart" || fail "Chart.yaml's version/appVersion differ from $version"
grep -qx "__version__ = \"$version\"" "$root/python/picomq_connect/__init__.py" || fail "picomq_connect.__version__ differs from $version"
echo "ok   one version: CMake project, Python package, Helm chart ($version)"
