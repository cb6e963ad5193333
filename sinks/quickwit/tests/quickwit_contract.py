#!/usr/bin/env python3
"""A strict contract server for Quickwit's REST API (Python 3 standard library, PyYAML if present).

    quickwit_contract.py [--port 0] [--content-length-limit BYTES] [--exit-on-stdin-eof]

No Quickwit server can be obtained on these machines, so the Quickwit sink is tested against this
server, written from Quickwit's REST API reference (https://quickwit.io/docs/reference/rest-api, API
v1, Quickwit 0.8 / 0.9) and its index configuration reference
(https://quickwit.io/docs/configuration/index-config), NOT from the sink's code. What it
implements, each with its page, is listed in docs/sinks/quickwit.md ("Contract server"). In short:

  - POST /api/v1/<index id>/ingest: NDJSON (blank lines skipped), at most --content-length-limit
    bytes (10 MiB, the server's default; 413 above); ?commit=auto|wait_for|force (anything else:
    400); ?detailed_response=true; answers {"num_docs_for_processing", "num_ingested_docs",
    "num_rejected_docs"} plus "parse_failures" [{"document", "message", "reason"}] with
    detailed_response. A line that is not a JSON object is rejected (reason "invalid_json"), a
    document its doc mapping refuses (a strict mapping's unknown field, a value of the wrong type)
    too ("invalid_schema"); the rest is accepted. auto answers once the documents are in the
    write-ahead log; they become searchable at the index's next commit (commit_timeout_secs after
    the first uncommitted document); wait_for answers after that commit; force commits at once and
    answers after it. Unknown index: 404; invalid index id: 400. No document ids: a document sent
    twice is there twice.
  - POST /api/v1/indexes (application/json or application/yaml index config: version, index_id
    ^[a-zA-Z][a-zA-Z0-9-_.]{2,254}$, doc_mapping with field_mappings / mode / timestamp_field,
    indexing_settings.commit_timeout_secs): 200 with the index metadata; an existing index: 400;
    GET / DELETE /api/v1/indexes/<index id>; GET /api/v1/indexes.
  - POST /api/v1/_elastic/_bulk and /api/v1/_elastic/<index id>/_bulk (the Elasticsearch-compatible
    API reference, https://quickwit.io/docs/reference/es_compatible_api): NDJSON action / source
    pairs, the same 10 MiB limit; only `create` indexes (`index` too, as Quickwit's parser takes it),
    `delete` / `update` are ignored; the path's index is the default `_index`; ?refresh= "" | true
    (force) | wait_for | false (auto, the default), anything else 400; a malformed action, a missing
    source line or a missing `_index`: 400; an unknown index: 404. As
    documented, the answer is {"num_docs_for_processing": n} and reports no per-document errors:
    documents the mapping refuses are dropped (logged on stderr only).
  - GET /api/v1/<index id>/search?query=*&max_hits=&start_offset= (committed documents only;
    query "*" or field:value); errors: 4xx with {"message"}.

Test control (not Quickwit API), JSON bodies:
  POST /_control/config  {"fail_requests": [{"method", "path_prefix", "status", "count", "retry_after"}]
                           (the next matching requests answer that status: 429 / 503 as Quickwit
                           does when rate limited or unavailable; status 0 closes the connection),
                          "clear_failures": true (forget the failures still to come),
                          "refused_authorization": "Bearer x" (requests with that Authorization get 403, as
                           from an authenticating front: Quickwit has none of its own),
                          "wal_capacity_docs": n (uncommitted documents beyond it: 429, as a full
                           write-ahead log), "commit_timeout_secs": s (overrides every index's)}
  POST /_control/reset   GET /_control/stats {"requests": {route: n}, "ingested_docs": n}
"""

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

try:
    import yaml
except ImportError:  # YAML index configs then answer 415
    yaml = None

INDEX_ID_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9-_.]{2,254}$")
VERSIONS = {"0.7", "0.8", "0.9"}
TYPES = {"text", "i64", "u64", "f64", "bool", "datetime", "ip", "bytes", "json", "object"}
COMMIT_MODES = {"auto", "wait_for", "force"}


class ApiError(Exception):
    def __init__(self, status, message, headers=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class Index:
    def __init__(self, config):
        self.config = config
        self.committed = []
        self.pending = []
        self.first_pending = None
        self.commits = 0
        self.created = int(time.time())

    def commit_timeout(self):
        if STATE.commit_timeout is not None:
            return STATE.commit_timeout
        return float(self.config.get("indexing_settings", {}).get("commit_timeout_secs", 60))

    def commit(self):
        if self.pending:
            self.committed.extend(self.pending)
            self.pending = []
            self.commits += 1
        self.first_pending = None


class State:
    def __init__(self):
        self.lock = threading.Condition()
        self.reset()

    def reset(self):
        self.indexes = {}
        self.fail_requests = []
        self.wal_capacity = None
        self.commit_timeout = None
        self.requests = {}
        self.ingested = 0
        self.refused_authorization = None

    def committer(self):
        while True:
            with self.lock:
                now = time.monotonic()
                for index in self.indexes.values():
                    if index.first_pending is not None and now - index.first_pending >= index.commit_timeout():
                        index.commit()
                        self.lock.notify_all()
                self.lock.wait(0.02)


STATE = State()
ARGS = None


def check_field_mappings(mappings, where):
    if not isinstance(mappings, list):
        raise ApiError(400, "failed to parse index config: `%s.field_mappings` must be a list" % where)
    names = set()
    for m in mappings:
        if not isinstance(m, dict) or not isinstance(m.get("name"), str) or "type" not in m:
            raise ApiError(400, "failed to parse index config: a field mapping needs `name` and `type`")
        t = m["type"]
        inner = t[len("array<"):-1] if isinstance(t, str) and t.startswith("array<") and t.endswith(">") else t
        if inner not in TYPES:
            raise ApiError(400, "failed to parse index config: unknown field type `%s` for field `%s`" % (t, m["name"]))
        if m["name"] in names:
            raise ApiError(400, "failed to parse index config: duplicated field `%s`" % m["name"])
        names.add(m["name"])
        if inner == "object":
            check_field_mappings(m.get("field_mappings", []), where + "." + m["name"])


def validate_config(config):
    if not isinstance(config, dict):
        raise ApiError(400, "failed to parse index config: expected an object")
    version = str(config.get("version", ""))
    if version not in VERSIONS:
        raise ApiError(400, "failed to parse index config: unsupported or missing `version` `%s` (expected one of %s)"
                       % (version, ", ".join(sorted(VERSIONS))))
    index_id = config.get("index_id")
    if not isinstance(index_id, str) or not INDEX_ID_RE.match(index_id):
        raise ApiError(400, "invalid index ID `%s`: identifiers must match the regular expression "
                            "`^[a-zA-Z][a-zA-Z0-9-_\\.]{2,254}$`" % index_id)
    mapping = config.get("doc_mapping")
    if not isinstance(mapping, dict):
        raise ApiError(400, "failed to parse index config: missing field `doc_mapping`")
    if mapping.get("mode", "dynamic") not in ("lenient", "strict", "dynamic"):
        raise ApiError(400, "failed to parse index config: unknown doc mapping mode `%s`" % mapping.get("mode"))
    check_field_mappings(mapping.get("field_mappings", []), "doc_mapping")
    ts = mapping.get("timestamp_field")
    if ts is not None:
        field = next((m for m in mapping.get("field_mappings", []) if m.get("name") == ts), None)
        if field is None or field.get("type") != "datetime" or not field.get("fast", False):
            raise ApiError(400, "failed to parse index config: timestamp field `%s` must be a fast datetime field" % ts)
    timeout = config.get("indexing_settings", {}).get("commit_timeout_secs", 60)
    if not isinstance(timeout, int) or timeout <= 0:
        raise ApiError(400, "failed to parse index config: `commit_timeout_secs` must be a positive integer")
    return index_id


def value_fits(value, type_, mapping):
    """None when `value` fits a field of `type_`, else why not."""
    if type_.startswith("array<"):
        inner = type_[len("array<"):-1]
        items = value if isinstance(value, list) else [value]
        for v in items:
            why = value_fits(v, inner, mapping)
            if why:
                return why
        return None
    if value is None:
        return None
    if type_ == "text":
        return None if isinstance(value, str) else "expected a string"
    if type_ in ("i64", "u64"):
        if isinstance(value, bool):
            return "expected an integer"
        if isinstance(value, str) and mapping.get("coerce", True):
            try:
                value = int(value)
            except ValueError:
                return "expected an integer, got the string %s" % json.dumps(value)
        if not isinstance(value, int):
            return "expected an integer"
        if type_ == "u64" and value < 0:
            return "expected a non-negative integer"
        if not (-(1 << 63) <= value < (1 << 64)):
            return "integer out of range"
        return None
    if type_ == "f64":
        if isinstance(value, bool):
            return "expected a number"
        if isinstance(value, str) and mapping.get("coerce", True):
            try:
                float(value)
                return None
            except ValueError:
                return "expected a number, got the string %s" % json.dumps(value)
        return None if isinstance(value, (int, float)) else "expected a number"
    if type_ == "bool":
        return None if isinstance(value, bool) else "expected a boolean"
    if type_ == "datetime":
        if isinstance(value, bool):
            return "expected a datetime"
        if isinstance(value, (int, float)):
            return None
        if isinstance(value, str) and re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$", value):
            return None
        return "expected a datetime (rfc3339 or unix timestamp)"
    if type_ in ("json",):
        return None if isinstance(value, dict) else "expected a JSON object"
    if type_ == "object":
        if not isinstance(value, dict):
            return "expected an object"
        return check_document(value, mapping.get("field_mappings", []), "strict" if mapping.get("mode") == "strict" else "lenient")
    return None if isinstance(value, str) else "expected a string"


def check_document(doc, field_mappings, mode):
    by_name = {m["name"]: m for m in field_mappings}
    for k, v in doc.items():
        m = by_name.get(k)
        if m is None:
            if mode == "strict":
                return "the field `%s` is not declared in the doc mapping, which is strict" % k
            continue
        why = value_fits(v, m["type"], m)
        if why:
            return "the field `%s` does not match its type `%s`: %s" % (k, m["type"], why)
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self, limit=None):
        length = int(self.headers.get("Content-Length") or 0)
        if limit is not None and length > limit:
            self.rfile.read(length)  # drain: the connection stays usable
            raise ApiError(413, "The request payload is too large. The limit is %d bytes." % limit)
        return self.rfile.read(length) if length else b""

    def handle_any(self, method):
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        try:
            if path.startswith("/_control/"):
                return self.control(path, self.read_body())
            route = re.sub(r"^/api/v1/(?!indexes|_elastic)[^/]+/", "/api/v1/{index}/", path)
            route = re.sub(r"^/api/v1/_elastic/[^/]+/_bulk", "/api/v1/_elastic/{index}/_bulk", route)
            route = re.sub(r"^/api/v1/indexes/[^/]+", "/api/v1/indexes/{index}", route)
            injected = None
            if STATE.refused_authorization is not None and \
                    self.headers.get("Authorization") == STATE.refused_authorization:
                self.read_body()
                raise ApiError(403, "forbidden (contract server: the authenticating front refuses this token)")
            with STATE.lock:
                STATE.requests[method + " " + route] = STATE.requests.get(method + " " + route, 0) + 1
                for rule in STATE.fail_requests:
                    if rule.get("count", 1) > 0 and rule.get("method", method) == method and \
                            path.startswith(rule.get("path_prefix", "/")):
                        rule["count"] = rule.get("count", 1) - 1
                        injected = rule
                        break
            if injected is not None:
                self.read_body()
                if injected.get("status", 503) == 0:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                headers = {"Retry-After": str(injected["retry_after"])} if "retry_after" in injected else {}
                status = injected.get("status", 503)
                message = "too many requests" if status == 429 else "service unavailable (contract server: injected)"
                return self.send_json(status, {"message": message}, headers)
            status, body = self.dispatch(method, path, query)
            self.send_json(status, body)
        except ApiError as e:
            self.send_json(e.status, {"message": e.message}, e.headers)

    def dispatch(self, method, path, query):
        parts = path.strip("/").split("/")
        if path == "/health/readyz" or path == "/health/livez":
            return 200, True
        if parts[:2] != ["api", "v1"] or len(parts) < 3:
            self.read_body()
            raise ApiError(404, "route not found")
        if parts[2] == "indexes":
            return self.indexes(method, parts[3:])
        if parts[2] == "_elastic" and method == "POST" and parts[-1] == "_bulk" and len(parts) in (4, 5):
            return self.elastic_bulk(parts[3] if len(parts) == 5 else None, query)
        index_id = parts[2]
        if len(parts) == 4 and parts[3] == "ingest" and method == "POST":
            return self.ingest(index_id, query)
        if len(parts) == 4 and parts[3] == "search" and method == "GET":
            return self.search(index_id, query)
        self.read_body()
        raise ApiError(404, "route not found")

    def indexes(self, method, rest):
        if not rest and method == "POST":
            raw = self.read_body()
            ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
            try:
                if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
                    if yaml is None:
                        raise ApiError(415, "YAML is not supported by this contract server (no PyYAML)")
                    config = yaml.safe_load(raw)
                elif ctype == "application/json":
                    config = json.loads(raw)
                else:
                    raise ApiError(415, "unsupported content type `%s`: use application/json or application/yaml" % ctype)
            except (ValueError, getattr(yaml, "YAMLError", ValueError)) as e:
                raise ApiError(400, "failed to parse index config: %s" % e)
            index_id = validate_config(config)
            with STATE.lock:
                if index_id in STATE.indexes:
                    raise ApiError(400, "index `%s` already exists" % index_id)
                STATE.indexes[index_id] = Index(config)
                return 200, self.metadata(index_id)
        self.read_body()
        if not rest and method == "GET":
            with STATE.lock:
                return 200, [self.metadata(i) for i in sorted(STATE.indexes)]
        if len(rest) == 1 and method in ("GET", "DELETE"):
            with STATE.lock:
                if rest[0] not in STATE.indexes:
                    raise ApiError(404, "index `%s` not found" % rest[0])
                meta = self.metadata(rest[0])
                if method == "DELETE":
                    del STATE.indexes[rest[0]]
                    return 200, []
                return 200, meta
        raise ApiError(405, "method not allowed")

    @staticmethod
    def metadata(index_id):
        index = STATE.indexes[index_id]
        return {"version": str(index.config.get("version")), "index_uid": index_id + ":01CONTRACT",
                "index_config": index.config, "checkpoint": {}, "create_timestamp": index.created, "sources": []}

    def ingest(self, index_id, query):
        raw = self.read_body(ARGS.content_length_limit)
        commit = query.get("commit", "auto")
        if commit not in COMMIT_MODES:
            raise ApiError(400, "Invalid query string: unknown variant `%s`, expected one of `auto`, `wait_for`, `force`"
                           % commit)
        detailed = query.get("detailed_response", "false")
        if detailed not in ("true", "false"):
            raise ApiError(400, "Invalid query string: detailed_response must be true or false")
        if not INDEX_ID_RE.match(index_id):
            raise ApiError(400, "invalid index ID")
        lines = [line for line in raw.split(b"\n") if line.strip()]
        with STATE.lock:
            index = STATE.indexes.get(index_id)
            if index is None:
                raise ApiError(404, "index `%s` not found" % index_id)
            if STATE.wal_capacity is not None and len(index.pending) + len(lines) > STATE.wal_capacity:
                raise ApiError(429, "too many requests: the write-ahead log is full")
            accepted, failures = self.take_documents(index_id, index, lines, commit)
        body = {"num_docs_for_processing": len(lines), "num_ingested_docs": len(accepted),
                "num_rejected_docs": len(failures)}
        if detailed == "true":
            body["parse_failures"] = failures
        return 200, body

    def elastic_bulk(self, default_index, query):
        raw = self.read_body(ARGS.content_length_limit)
        refresh = query.get("refresh", "false")
        commit = {"": "force", "true": "force", "wait_for": "wait_for", "false": "auto"}.get(refresh)
        if commit is None:
            raise ApiError(400, "Invalid query string: unknown variant `%s`, expected one of ``, `true`, `wait_for`, "
                                "`false`" % refresh)
        lines = [line for line in raw.split(b"\n") if line.strip()]
        by_index, order, n, i = {}, [], 0, 0
        while i < len(lines):
            line_no = i
            try:
                action = json.loads(lines[i])
                if not isinstance(action, dict) or len(action) != 1:
                    raise ValueError("expected an object with one action")
                (verb, meta), = action.items()
                if verb not in ("create", "index", "delete", "update") or not isinstance(meta, dict):
                    raise ValueError("unknown action `%s`" % verb)
            except ValueError as e:
                raise ApiError(400, "unsupported or malformed action on line #%d: `%s`" % (line_no, e))
            i += 1
            if verb == "delete":
                continue  # ignored, as documented (it has no source line)
            if i >= len(lines):
                raise ApiError(400, "associated source data with action on line #%d is missing" % line_no)
            source = lines[i]
            i += 1
            if verb == "update":
                continue  # ignored, as documented
            index_id = meta.get("_index", default_index)
            if not isinstance(index_id, str):
                raise ApiError(400, "`_index` field of action on line #%d is missing" % line_no)
            if index_id not in by_index:
                by_index[index_id] = []
                order.append(index_id)
            by_index[index_id].append(source)
            n += 1
        with STATE.lock:
            for index_id in order:
                if index_id not in STATE.indexes:
                    raise ApiError(404, "no such index [%s]" % index_id)
                index = STATE.indexes[index_id]
                if STATE.wal_capacity is not None and len(index.pending) + len(by_index[index_id]) > STATE.wal_capacity:
                    raise ApiError(429, "too many requests: the write-ahead log is full")
            for index_id in order:
                _, failures = self.take_documents(index_id, STATE.indexes[index_id], by_index[index_id], commit)
                for f in failures:  # documented: the API does not report them, the server log does
                    print("contract quickwit: _bulk into %s dropped a document: %s" % (index_id, f["message"]),
                          file=sys.stderr, flush=True)
        return 200, {"num_docs_for_processing": n}

    def take_documents(self, index_id, index, lines, commit):
        """Under STATE.lock: accepts what the index's mapping takes, then waits as `commit` says."""
        mapping = index.config.get("doc_mapping", {})
        failures, accepted = [], []
        for line in lines:
            text = line.decode("utf-8", errors="replace")
            try:
                doc = json.loads(line)
            except ValueError as e:
                failures.append({"document": text, "message": "failed to parse JSON document: %s" % e,
                                 "reason": "invalid_json"})
                continue
            if not isinstance(doc, dict):
                failures.append({"document": text, "message": "the document is not a JSON object",
                                 "reason": "invalid_json"})
                continue
            why = check_document(doc, mapping.get("field_mappings", []), mapping.get("mode", "dynamic"))
            if why:
                failures.append({"document": text, "message": "failed to parse document: %s" % why,
                                 "reason": "invalid_schema"})
                continue
            accepted.append(doc)
        if accepted:
            if index.first_pending is None:
                index.first_pending = time.monotonic()
            index.pending.extend(accepted)
            STATE.ingested += len(accepted)
        target = index.commits + (1 if index.pending else 0)
        if commit == "force":
            index.commit()
        elif commit == "wait_for" and accepted:
            deadline = time.monotonic() + index.commit_timeout() + 30
            while index.commits < target and STATE.indexes.get(index_id) is index and time.monotonic() < deadline:
                STATE.lock.wait(0.05)
        return accepted, failures

    def search(self, index_id, query):
        self.read_body()
        with STATE.lock:
            index = STATE.indexes.get(index_id)
            if index is None:
                raise ApiError(404, "index `%s` not found" % index_id)
            docs = list(index.committed)
        q = query.get("query")
        if q is None:
            raise ApiError(400, "missing `query` parameter")
        if q != "*":
            m = re.match(r"^([A-Za-z0-9_.]+):(.+)$", q)
            if not m:
                raise ApiError(400, "failed to parse query `%s` (the contract server knows `*` and field:value)" % q)
            field, value = m.group(1), m.group(2).strip('"')
            docs = [d for d in docs if str(d.get(field)) == value or json.dumps(d.get(field)) == value]
        start, max_hits = int(query.get("start_offset", 0)), int(query.get("max_hits", 20))
        return 200, {"hits": docs[start:start + max_hits], "num_hits": len(docs), "elapsed_time_micros": 1}

    def control(self, path, raw):
        body = json.loads(raw) if raw.strip() else {}
        with STATE.lock:
            if path == "/_control/reset":
                STATE.reset()
                return self.send_json(200, {})
            if path == "/_control/config":
                if body.get("clear_failures"):
                    STATE.fail_requests = []
                STATE.fail_requests.extend(body.get("fail_requests", []))
                if "refused_authorization" in body:
                    STATE.refused_authorization = body["refused_authorization"]
                if "wal_capacity_docs" in body:
                    STATE.wal_capacity = body["wal_capacity_docs"]
                if "commit_timeout_secs" in body:
                    STATE.commit_timeout = body["commit_timeout_secs"]
                return self.send_json(200, {})
            if path == "/_control/stats":
                return self.send_json(200, {"requests": STATE.requests, "ingested_docs": STATE.ingested})
        self.send_json(404, {"message": "no such control endpoint"})

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_DELETE(self):
        self.handle_any("DELETE")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--content-length-limit", type=int, default=10 * 1024 * 1024)
    p.add_argument("--exit-on-stdin-eof", action="store_true")
    ARGS = p.parse_args()
    server = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=STATE.committer, daemon=True).start()
    print(server.server_address[1], flush=True)
    if ARGS.exit_on_stdin_eof:
        def watch():
            sys.stdin.read()
            server.shutdown()
        threading.Thread(target=watch, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
