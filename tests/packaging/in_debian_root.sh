#!/bin/sh
# Runs inside a clean Debian 12 root (minbase) into which every picomq-connect .deb was installed
# with `apt-get install ./*.deb` (debian_root_test.sh): what a user of the packages sees.
# Each check prints "ok" or "FAIL"; any FAIL exits 1.
set -u
v="$1"  # the release version
fails=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
check() {
  what="$1"; shift
  if "$@" >/tmp/check.out 2>&1; then ok "$what"; return 0; fi
  fail "$what"; sed 's/^/     | /' /tmp/check.out | tail -n 20; return 1
}

for p in picomq-connect picomq-connect-python picomq-connect-sink-doris picomq-connect-sink-redshift \
         picomq-connect-sink-delta picomq-connect-sink-iceberg picomq-connect-dev; do
  check "$p $v installed" sh -c "dpkg-query -W -f='\${Status} \${Version}' $p | grep -qx 'install ok installed $v'"
done
# Debian Policy 12.5: a copyright file per package; the Rust sinks' lists the crates linked into them.
for p in picomq-connect picomq-connect-python picomq-connect-sink-doris picomq-connect-sink-redshift \
         picomq-connect-sink-delta picomq-connect-sink-iceberg picomq-connect-dev; do
  check "$p: /usr/share/doc/$p/copyright" grep -q '^License: Apache-2.0$' /usr/share/doc/$p/copyright
done
for p in picomq-connect-sink-delta picomq-connect-sink-iceberg picomq-connect; do
  check "$p: its copyright lists the Rust crates linked in" grep -q '^ arrow-array [0-9.]*: ' /usr/share/doc/$p/copyright
done
check "picomq-connect: its copyright has librdkafka's licence" grep -q '^License: librdkafka$' /usr/share/doc/picomq-connect/copyright
check "--version: $v, plugin directory /usr/lib/picomq-connect/plugins" sh -c \
  "picomq-connect --version | grep -qx 'picomq-connect $v' && picomq-connect --version | grep -q '^plugin directory: /usr/lib/picomq-connect/plugins '"
check "binary stripped, debug symbols in -dbgsym" sh -c "! od -A n -c /usr/bin/picomq-connect | tr -d ' \\n' | grep -q debug_info"
check "system user picomq-connect (no login)" sh -c "getent passwd picomq-connect | grep -q ':/var/lib/picomq-connect:/usr/sbin/nologin$'"
check "state directory owned by it, 0750" sh -c "[ \"\$(stat -c '%U:%G %a' /var/lib/picomq-connect)\" = 'picomq-connect:picomq-connect 750' ]"
check "/etc/picomq-connect/env readable by the group only" sh -c "[ \"\$(stat -c '%U:%G %a' /etc/picomq-connect/env)\" = 'root:picomq-connect 640' ]"
check "conffiles: runtime.toml, env" sh -c "dpkg-query -W -f='\${Conffiles}' picomq-connect | grep -q /etc/picomq-connect/runtime.toml && dpkg-query -W -f='\${Conffiles}' picomq-connect | grep -q /etc/picomq-connect/env"
check "--check of the installed runtime.toml" picomq-connect --config /etc/picomq-connect/runtime.toml --check
check "systemd-analyze verify picomq-connect.service" systemd-analyze verify /lib/systemd/system/picomq-connect.service
# A root without procps (minbase has none; here a dependency may bring it): the unit must not need
# its /bin/kill. Hidden for the check, then put back.
hidden=""
for k in /bin/kill /usr/bin/kill; do [ -e "$k" ] && [ ! -L "$k" ] && mv "$k" "$k.hidden" && hidden="$hidden $k"; done
check "systemd-analyze verify without procps's kill" systemd-analyze verify /lib/systemd/system/picomq-connect.service
for k in $hidden; do mv "$k.hidden" "$k"; done

# Every plugin loads: its libraries are all there (the packages' Depends came from dpkg-shlibdeps).
for so in /usr/lib/picomq-connect/plugins/libpicomq_connector_*_sink.so; do
  check "plugin loads: $(basename "$so")" picomq-connect --describe-plugin "$so"
done

check "the installed quickstart names no source-tree plugin folder" sh -c "! grep -q 'build/plugins' /usr/share/picomq-connect/quickstart/runtime.toml"
# The quickstart, as the service's user: 10 records as JSON lines.
runuser -u picomq-connect -- picomq-connect --config /usr/share/picomq-connect/quickstart/runtime.toml --stop-after 4s \
  >/tmp/quickstart.out 2>/tmp/quickstart.err
check "quickstart as picomq-connect: 10 JSON lines" sh -c "[ \$(grep -c '\"pico_topic\"' /tmp/quickstart.out) -eq 10 ]" || tail -n 5 /tmp/quickstart.err

# A Python sink (picomq-connect-python) and the Delta sink (picomq-connect-sink-delta) on the
# quickstart's embedded broker and records.
mkdir -p /tmp/py/sinks.d /tmp/py/mods /tmp/lake
chown picomq-connect /tmp/lake /tmp/py
cp /usr/share/picomq-connect/quickstart/*.jsonl /tmp/py/
sed -e 's|^path = .*|path = []|' -e 's|^\[plugins\]||' /usr/share/picomq-connect/quickstart/runtime.toml | grep -v '^path = \[\]' >/tmp/py/runtime.toml
cat >/tmp/py/mods/files.py <<'PY'
import json
from picomq_connect import BaseSink


class FileSink(BaseSink[dict]):
    async def open(self) -> None:
        self._out = open("/tmp/py/records.jsonl", "a")

    async def write(self, record: dict) -> None:
        self._out.write(json.dumps(record, default=str) + "\n")

    async def close(self) -> None:
        self._out.close()
PY
cat >/tmp/py/sinks.d/py.toml <<'TOML'
type = "sink"
key = "py_files"
version = 0
path = "libpicomq_connector_python_sink"
[[topics]]
pattern = 'orders\..*'
poll_interval = "100ms"
[plugin_config]
class = "files:FileSink"
python_path = ["/tmp/py/mods"]
TOML
cat >/tmp/py/sinks.d/delta.toml <<'TOML'
type = "sink"
key = "lake"
version = 0
path = "libpicomq_connector_delta_sink"
[[topics]]
pattern = 'orders\..*'
poll_interval = "100ms"
[plugin_config]
table_uri = "/tmp/lake/orders"
create_table = true
TOML
runuser -u picomq-connect -- picomq-connect --config /tmp/py/runtime.toml --stop-after 8s >/tmp/py/out 2>/tmp/py/err
check "Python sink from the installed package: 10 records" sh -c "[ \$(wc -l </tmp/py/records.jsonl) -eq 10 ]" || tail -n 20 /tmp/py/err
check "Delta sink from its package: a table with a commit" sh -c "ls /tmp/lake/orders/_delta_log/00000000000000000000.json && ls /tmp/lake/orders/*.parquet" || tail -n 20 /tmp/py/err

check "dev: pkg-config picomq-sdk, the CMake package" sh -c "pkg-config --cflags picomq-sinkkit && [ -f /usr/lib/cmake/picomq-sdk/picomq-sdk-config.cmake ]"
check "dev: the C ABI header" test -f /usr/include/picomq/sink_abi.h

# Purge takes the user, the state and the conffiles.
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q picomq-connect >/tmp/purge.out 2>&1
check "purge: package, user, state and /etc/picomq-connect gone" sh -c \
  "! dpkg-query -W picomq-connect 2>/dev/null | grep -q . ; ! getent passwd picomq-connect && [ ! -e /var/lib/picomq-connect ] && [ ! -e /etc/picomq-connect/runtime.toml ]"

[ "$fails" -eq 0 ] && echo "debian root: all checks passed" && exit 0
echo "debian root: $fails check(s) failed"
exit 1
