#!/usr/bin/env python3
"""A minimal schema registry for the decoder tests: the part of the Confluent Schema Registry
REST API that Karapace implements and that producers and our decoder use.

Why not the real thing: Karapace is not published on PyPI (only on GitHub and as a container
image) and Confluent Schema Registry / Apicurio cannot be resolved from Maven Central here, and
this machine reaches nothing else. Used only as the last resort the task allowed.

    schema_registry.py PORT STATE_FILE

Endpoints (JSON bodies, content type application/vnd.schemaregistry.v1+json):
    POST /subjects/{subject}/versions   {"schema": "...", "schemaType"?}  -> {"id": N}
    POST /subjects/{subject}            {"schema": "..."}                 -> {"subject", "id", "version", "schema"} | 404 40403
    GET  /schemas/ids/{id}                                                -> {"schema": "..."} | 404 40403
    GET  /subjects                                                        -> ["subject", ...]
    GET  /subjects/{subject}/versions                                     -> [1, 2, ...]
    GET  /subjects/{subject}/versions/{version|latest}                    -> {"subject", "id", "version", "schema"}
    GET  /config                                                          -> {"compatibilityLevel": "NONE"}
Ids are global and stable: the same schema text gets the same id under every subject. State is
kept in STATE_FILE so a restarted registry (an outage) serves the same ids. Every request is
logged to stderr (the tests count the decoder's GETs).
"""
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CT = "application/vnd.schemaregistry.v1+json"
lock = threading.Lock()
state = {"schemas": [], "subjects": {}}  # schemas: [{"schema", "schemaType"}], id = index + 1


def save(path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, path)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", CT)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def not_found(self, what, code=40403):
        self.reply(404, {"error_code": code, "message": what + " not found"})

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        return json.loads(self.rfile.read(n) or b"{}")

    def version_body(self, subject, version):
        sid = state["subjects"][subject][version - 1]
        entry = state["schemas"][sid - 1]
        out = {"subject": subject, "id": sid, "version": version, "schema": entry["schema"]}
        if entry.get("schemaType", "AVRO") != "AVRO":
            out["schemaType"] = entry["schemaType"]
        return out

    def do_GET(self):
        path = self.path.split("?")[0]
        with lock:
            m = re.fullmatch(r"/schemas/ids/(\d+)", path)
            if m:
                sid = int(m.group(1))
                if not 1 <= sid <= len(state["schemas"]):
                    return self.not_found("Schema")
                entry = state["schemas"][sid - 1]
                out = {"schema": entry["schema"]}
                if entry.get("schemaType", "AVRO") != "AVRO":
                    out["schemaType"] = entry["schemaType"]
                return self.reply(200, out)
            if path == "/subjects":
                return self.reply(200, sorted(state["subjects"]))
            if path == "/config":
                return self.reply(200, {"compatibilityLevel": "NONE"})
            m = re.fullmatch(r"/subjects/([^/]+)/versions", path)
            if m:
                versions = state["subjects"].get(m.group(1))
                if versions is None:
                    return self.not_found("Subject", 40401)
                return self.reply(200, list(range(1, len(versions) + 1)))
            m = re.fullmatch(r"/subjects/([^/]+)/versions/(latest|\d+)", path)
            if m:
                versions = state["subjects"].get(m.group(1))
                if not versions:
                    return self.not_found("Subject", 40401)
                v = len(versions) if m.group(2) == "latest" else int(m.group(2))
                if not 1 <= v <= len(versions):
                    return self.not_found("Version", 40402)
                return self.reply(200, self.version_body(m.group(1), v))
        self.not_found("Endpoint", 404)

    def do_POST(self):
        path = self.path.split("?")[0]
        body = self.body()
        with lock:
            m = re.fullmatch(r"/subjects/([^/]+)/versions", path)
            if m:
                entry = {"schema": body["schema"], "schemaType": body.get("schemaType", "AVRO")}
                if entry in state["schemas"]:
                    sid = state["schemas"].index(entry) + 1
                else:
                    state["schemas"].append(entry)
                    sid = len(state["schemas"])
                versions = state["subjects"].setdefault(m.group(1), [])
                if sid not in versions:
                    versions.append(sid)
                save(self.server.state_file)
                return self.reply(200, {"id": sid})
            m = re.fullmatch(r"/subjects/([^/]+)", path)
            if m:
                versions = state["subjects"].get(m.group(1), [])
                for i, sid in enumerate(versions):
                    if state["schemas"][sid - 1]["schema"] == body.get("schema"):
                        return self.reply(200, self.version_body(m.group(1), i + 1))
                return self.not_found("Schema")
        self.not_found("Endpoint", 404)

    def log_message(self, fmt, *args):
        sys.stderr.write("registry: " + (fmt % args) + "\n")
        sys.stderr.flush()


def main():
    port, state_file = int(sys.argv[1]), sys.argv[2]
    global state
    if os.path.exists(state_file):
        with open(state_file) as f:
            state = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.state_file = state_file
    print("registry: listening on 127.0.0.1:%d" % port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
