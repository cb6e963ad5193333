#!/usr/bin/env python3
"""The Helm chart (deploy/helm/picomq-connect): `helm lint --strict`, then `helm template` with a
few sets of values, and checks of what matters in the rendered manifests: replicas, the grace
period above shutdown_timeout, probes on /health/live and /health/ready (httpGet, or the image's
own probe when a token is required), the token and other secrets from Secrets, static membership
per pod, a PodMonitor that carries the token - and the rendered runtime.toml and definitions pass
the real binary's `--check`.
Usage: chart_test.py HELM PICOMQ_CONNECT PLUGIN_DIR"""
import os
import subprocess
import sys
import tempfile
import tomllib

import yaml

HELM, CONNECT, PLUGINS = sys.argv[1:4]
CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "helm", "picomq-connect")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def render(*args, expect_fail=False):
    r = subprocess.run([HELM, "template", "rel", CHART, *args], capture_output=True, text=True)
    if expect_fail:
        return r
    if r.returncode != 0:
        sys.exit("helm template failed: " + r.stderr)
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


SINK = '''type = "sink"
key = "orders_out"
version = 0
path = "libpicomq_connector_stdout_sink"
[[topics]]
topics = ["orders"]
[plugin_config]
include_metadata = true
'''

lint = subprocess.run([HELM, "lint", "--strict", CHART], capture_output=True, text=True)
check(lint.returncode == 0, "helm lint --strict: " + (lint.stdout + lint.stderr).strip().splitlines()[-1])

# 1. Defaults + a token Secret, other secrets, a definition, a PodMonitor.
m = render("--set", "replicaCount=4", "--set", "api.token.existingSecret=connect-api", "--set", "envFromSecrets[0]=connect-secrets",
           "--set", "env.PG_HOST=pg", "--set", "podMonitor.enabled=true", "--set", "runtime.shutdownTimeoutSeconds=50",
           "--set-string", "sinks.orders\\.toml=" + SINK)
sts = m[("StatefulSet", "rel-picomq-connect")]
spec, pod = sts["spec"], sts["spec"]["template"]["spec"]
c = pod["containers"][0]
check(spec["replicas"] == 4, "replicas from replicaCount")
check(spec["podManagementPolicy"] == "Parallel" and spec["serviceName"] == "rel-picomq-connect", "StatefulSet: parallel pods, governing service")
check(pod["terminationGracePeriodSeconds"] == 65 and pod["terminationGracePeriodSeconds"] > 50, "grace period = shutdown_timeout 50 s + 15 s margin")
env = {e["name"]: e for e in c["env"]}
check(env["PICOMQ_API_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "connect-api", "key": "token"}, "API token from the Secret")
check(env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name", "POD_NAME from the pod's name")
check(env["PG_HOST"]["value"] == "pg", "plain env values")
check(c["envFrom"] == [{"secretRef": {"name": "connect-secrets"}}], "secrets for ${ENV} through envFrom")
for probe, path in (("livenessProbe", "/health/live"), ("readinessProbe", "/health/ready")):
    cmd = c[probe].get("exec", {}).get("command", [])
    check(cmd == ["picomq-connect", "--health", "http://127.0.0.1:8083" + path], f"{probe}: the image's probe of {path} (token required)")
check(pod["securityContext"]["runAsNonRoot"] and c["securityContext"]["readOnlyRootFilesystem"], "non-root, read-only root filesystem")
mounts = {v["mountPath"]: v for v in c["volumeMounts"]}
check("/etc/picomq-connect/sinks.d" in mounts and mounts["/etc/picomq-connect/runtime.toml"]["subPath"] == "runtime.toml",
      "runtime.toml and sinks.d from ConfigMaps")
check("checksum/runtime" in sts["spec"]["template"]["metadata"]["annotations"], "a runtime.toml change rolls the pods")
pm = m[("PodMonitor", "rel-picomq-connect")]
ep = pm["spec"]["podMetricsEndpoints"][0]
check(ep["path"] == "/metrics" and ep["authorization"]["credentials"] == {"name": "connect-api", "key": "token"}, "PodMonitor scrapes /metrics with the token")
runtime = tomllib.loads(m[("ConfigMap", "rel-picomq-connect")]["data"]["runtime.toml"])
check(runtime["broker"]["group_instance_id"] == "${POD_NAME}", "static membership per pod (group_instance_id)")
check(runtime["api"]["listen"] == "0.0.0.0:8083" and runtime["api"]["token"] == "${PICOMQ_API_TOKEN}", "API on the pod's address with the token")
check(runtime["runtime"]["shutdown_timeout"] == "50s", "shutdown_timeout from the values")
sinks = m[("ConfigMap", "rel-picomq-connect-sinks")]["data"]
check(sinks.get("orders.toml") == SINK, "definitions verbatim in the -sinks ConfigMap")

# The real binary accepts what the chart renders (paths moved to a temp folder).
with tempfile.TemporaryDirectory() as d:
    os.mkdir(os.path.join(d, "sinks.d"))
    text = m[("ConfigMap", "rel-picomq-connect")]["data"]["runtime.toml"].replace("/etc/picomq-connect/sinks.d", os.path.join(d, "sinks.d"))
    text += f'\n[plugins]\npath = ["{PLUGINS}"]\n'
    open(os.path.join(d, "runtime.toml"), "w").write(text)
    open(os.path.join(d, "sinks.d", "orders.toml"), "w").write(sinks["orders.toml"])
    r = subprocess.run([CONNECT, "--config", os.path.join(d, "runtime.toml"), "--check"], capture_output=True, text=True,
                       env={**os.environ, "POD_NAME": "rel-picomq-connect-0", "PICOMQ_API_TOKEN": "t"})
    check(r.returncode == 0, "picomq-connect --check accepts the rendered runtime.toml and definition: " + (r.stdout + r.stderr).strip()[-300:])

# 2. No token: httpGet probes on the named port; Deployment: no static membership.
m = render("--set", "kind=Deployment")
dep = m[("Deployment", "rel-picomq-connect")]
c = dep["spec"]["template"]["spec"]["containers"][0]
check(c["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": "api"} and c["livenessProbe"]["httpGet"]["path"] == "/health/live",
      "without a token: httpGet probes")
check(dep["spec"]["replicas"] == 3 and dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 45, "defaults: 3 replicas, 30 s + 15 s")
runtime = tomllib.loads(m[("ConfigMap", "rel-picomq-connect")]["data"]["runtime.toml"])
check("group_instance_id" not in runtime["broker"] and "token" not in runtime["api"], "Deployment: no static membership; no token")
check(("PodMonitor", "rel-picomq-connect") not in m, "no PodMonitor unless asked")

# 3. Values the chart refuses.
r = render("--set", "runtime.terminationGraceMarginSeconds=0", expect_fail=True)
check(r.returncode != 0 and "grace period" in r.stderr, "a zero grace margin is refused")
r = render("--set", "kind=DaemonSet", expect_fail=True)
check(r.returncode != 0 and "StatefulSet or Deployment" in r.stderr, "an unknown kind is refused")
r = render("--set-string", "sinks.orders=x", expect_fail=True)
check(r.returncode != 0 and ".toml" in r.stderr, "a definition file name without .toml is refused")

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("chart: all checks passed")
