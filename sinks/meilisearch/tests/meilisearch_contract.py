#!/usr/bin/env python3
"""A strict contract server for Meilisearch's HTTP API (Python 3 standard library only).

    meilisearch_contract.py [--port 0] [--master-key KEY] [--payload-limit BYTES] [--exit-on-stdin-eof]

No Meilisearch server can be obtained on these machines, so the Meilisearch sink is tested against
this server, written from Meilisearch's API reference (v1.x, https://www.meilisearch.com/docs/reference/api/)
and NOT from the sink's code. What it implements, each with the page that documents it, is listed
in docs/sinks/meilisearch.md ("Contract server"). In short:

  - every write is an asynchronous task: 202 + a summarized task {taskUid, indexUid, status:
    "enqueued", type, enqueuedAt}; one worker thread processes tasks in enqueue order, each stays
    "processing" for --processing-delay seconds (0.05 by default; /_control/config changes it),
    then ends "succeeded", "failed" (with the documented error object) or "canceled";
  - GET /tasks (newest first, limit / from / next) and GET /tasks/{uid}: the task object (uid, indexUid, status, type, details, error, canceledBy,
    duration, enqueuedAt, startedAt, finishedAt); 404 task_not_found;
  - documents: POST (add or replace) and PUT (add or update) /indexes/{uid}/documents
    [?primaryKey=], application/json (an object or an array of objects) or application/x-ndjson;
    415 missing_content_type / invalid_content_type; 400 malformed_payload / missing_payload;
    413 payload_too_large above --payload-limit (100 MiB by default, the server's default);
    Content-Encoding gzip / deflate; the index is created by the first addition; primary key:
    the index's, else ?primaryKey=, else inferred (the one field whose name ends with "id");
    a task is atomic: one document without its primary key (missing_document_id), with an
    invalid id (invalid_document_id: not an integer or a string of [A-Za-z0-9_-], at most 511
    bytes) or an invalid `_geo` (invalid_document_geo_field) fails the whole task, nothing written;
  - POST /indexes/{uid}/documents/delete-batch (an array of ids; ids not there are no error);
    DELETE /indexes/{uid}/documents (delete all documents: a documentDeletion task, details
    {"deletedDocuments"}; index_not_found fails the task when the index is missing); PUT merges
    a document's top-level fields into the stored one (a field it names replaces the stored
    value whole, nested objects included) and adds a document not there; GET documents (paginated) and
    one document; GET/POST /indexes (uid rules: invalid_index_uid; index_already_exists fails the
    task); GET /indexes/{uid}; PATCH /indexes/{uid}/settings (unknown setting: 400 bad_request);
  - API keys: with --master-key, every route but /health needs "Authorization: Bearer <key>":
    none -> 401 missing_authorization_header, a wrong one -> 403 invalid_api_key;
  - errors: {"message", "code", "type", "link"} with the documented types.

Test control (not Meilisearch API; never needs a key), JSON bodies:
  POST /_control/config   {"processing_delay": s, "paused": bool (tasks stay enqueued),
                           "fail_requests": [{"method", "path_prefix", "status", "count"}]
                             (the next matching requests answer that status, 503 type internal;
                              status 0: the connection is closed without an answer),
                           "fail_tasks": n (the next n document tasks fail with code internal),
                           "cancel_tasks": n (the next n document tasks end canceled),
                           "clear_failures": true (forget the failures still to come)}
  POST /_control/reset    everything forgotten (indexes, tasks, config)
  GET  /_control/stats    {"requests": {"METHOD /route": n}, "tasks": n, "max_enqueued": n}
"""

import argparse
import datetime
import gzip
import json
import re
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

DOCS = "https://docs.meilisearch.com/errors#"
ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")
MAX_ID_BYTES = 511
MAX_INDEX_UID_BYTES = 400
KNOWN_SETTINGS = {
    "displayedAttributes", "searchableAttributes", "filterableAttributes", "sortableAttributes",
    "rankingRules", "stopWords", "nonSeparatorTokens", "separatorTokens", "dictionary", "synonyms",
    "distinctAttribute", "proximityPrecision", "typoTolerance", "faceting", "pagination", "embedders",
    "searchCutoffMs", "localizedAttributes", "facetSearch", "prefixSearch",
}
STRING_LIST_SETTINGS = {"displayedAttributes", "searchableAttributes", "sortableAttributes", "rankingRules",
                        "stopWords", "nonSeparatorTokens", "separatorTokens", "dictionary"}


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def error(code, message, type_="invalid_request"):
    return {"message": message, "code": code, "type": type_, "link": DOCS + code}


class ApiError(Exception):
    def __init__(self, status, code, message, type_="invalid_request"):
        super().__init__(message)
        self.status = status
        self.body = error(code, message, type_)


class TaskFailure(Exception):
    def __init__(self, code, message, type_="invalid_request"):
        super().__init__(message)
        self.error = error(code, message, type_)


class State:
    def __init__(self):
        self.lock = threading.Condition()
        self.reset()

    def reset(self):
        self.indexes = {}  # uid -> {"primaryKey", "createdAt", "updatedAt", "docs": {id: doc}}
        self.tasks = []  # by uid
        self.queue = []  # task uids not processed yet
        self.processing_delay = 0.05
        self.paused = False
        self.fail_requests = []
        self.fail_tasks = 0
        self.cancel_tasks = 0
        self.requests = {}
        self.max_enqueued = 0

    def enqueue(self, index_uid, type_, details, work):
        with self.lock:
            uid = len(self.tasks)
            task = {"uid": uid, "batchUid": None, "indexUid": index_uid, "status": "enqueued", "type": type_,
                    "canceledBy": None, "details": details, "error": None, "duration": None,
                    "enqueuedAt": now(), "startedAt": None, "finishedAt": None}
            self.tasks.append((task, work))
            self.queue.append(uid)
            self.max_enqueued = max(self.max_enqueued, len(self.queue))
            self.lock.notify_all()
            return {"taskUid": uid, "indexUid": index_uid, "status": "enqueued", "type": type_,
                    "enqueuedAt": task["enqueuedAt"]}

    def worker(self):
        while True:
            with self.lock:
                while not self.queue or self.paused:
                    self.lock.wait()
                uid = self.queue[0]
                task, work = self.tasks[uid]
                task["status"] = "processing"
                task["startedAt"] = now()
                started = time.monotonic()
                delay = self.processing_delay
            time.sleep(delay)
            with self.lock:
                if uid >= len(self.tasks) or self.tasks[uid][0] is not task:
                    continue  # reset meanwhile
                self.queue.pop(0)
                document_task = task["type"] in ("documentAdditionOrUpdate", "documentDeletion")
                if document_task and self.cancel_tasks > 0:
                    self.cancel_tasks -= 1
                    task["status"] = "canceled"
                    task["canceledBy"] = uid  # a cancelation task of our own is not modelled
                elif document_task and self.fail_tasks > 0:
                    self.fail_tasks -= 1
                    task["status"] = "failed"
                    task["error"] = error("internal", "An internal error has occurred. (contract server: injected)",
                                          "internal")
                else:
                    try:
                        work(task)
                        task["status"] = "succeeded"
                    except TaskFailure as f:
                        task["status"] = "failed"
                        task["error"] = f.error
                        if "indexedDocuments" in task["details"]:
                            task["details"]["indexedDocuments"] = 0
                        if "deletedDocuments" in task["details"]:
                            task["details"]["deletedDocuments"] = 0
                task["finishedAt"] = now()
                task["duration"] = "PT%.6fS" % (time.monotonic() - started)
                self.lock.notify_all()


STATE = State()
ARGS = None


def valid_index_uid(uid):
    return bool(ID_RE.match(uid)) and len(uid.encode()) <= MAX_INDEX_UID_BYTES


def check_index_uid(uid):
    if not valid_index_uid(uid):
        raise ApiError(400, "invalid_index_uid",
                       "`%s` is not a valid index uid. Index uid can be an integer or a string containing only "
                       "alphanumeric characters, hyphens (-) and underscores (_), and can not be more than 400 bytes."
                       % uid)


def new_index(primary_key):
    t = now()
    return {"primaryKey": primary_key, "createdAt": t, "updatedAt": t, "docs": {}}


def index_view(uid, index):
    return {"uid": uid, "primaryKey": index["primaryKey"], "createdAt": index["createdAt"],
            "updatedAt": index["updatedAt"]}


def document_id(doc, key):
    """The document's id under primary key `key`, or a TaskFailure as Meilisearch reports it."""
    if key not in doc:
        raise TaskFailure("missing_document_id",
                          "Document doesn't have a `%s` attribute: `%s`." % (key, json.dumps(doc, separators=(",", ":"))))
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, (int, str)) or \
            (isinstance(value, int) and value < 0) or \
            (isinstance(value, str) and (not ID_RE.match(value) or len(value.encode()) > MAX_ID_BYTES)):
        raise TaskFailure("invalid_document_id",
                          "Document identifier `%s` is invalid. A document identifier can be of type integer or "
                          "string, only composed of alphanumeric characters (a-z A-Z 0-9), hyphens (-) and "
                          "underscores (_), and can not be more than 511 bytes." % json.dumps(value))
    return str(value)


def check_geo(doc_id, doc):
    """`_geo`: null, or an object with `lat` and `lng` (numbers or numeric strings)."""
    if "_geo" not in doc or doc["_geo"] is None:
        return
    geo = doc["_geo"]

    def number(v):
        if isinstance(v, bool):
            return False
        if isinstance(v, (int, float)):
            return True
        try:
            float(v)
            return isinstance(v, str)
        except (TypeError, ValueError):
            return False
    if not isinstance(geo, dict):
        raise TaskFailure("invalid_document_geo_field",
                          "The `_geo` field in the document with the id: `%s` is not an object. Was expecting an object "
                          "with the `_geo.lat` and `_geo.lng` fields but instead got `%s`." % (json.dumps(doc_id), json.dumps(geo)))
    for f in ("lat", "lng"):
        if f not in geo:
            raise TaskFailure("invalid_document_geo_field",
                              "Could not find %s in the document with the id: `%s`. Was expecting a `_geo.%s` field."
                              % ("latitude" if f == "lat" else "longitude", json.dumps(doc_id), f))
        if not number(geo[f]):
            raise TaskFailure("invalid_document_geo_field",
                              "Could not parse %s in the document with the id: `%s`. Was expecting a finite number but "
                              "instead got `%s`." % ("latitude" if f == "lat" else "longitude", json.dumps(doc_id),
                                                    json.dumps(geo[f])))


def infer_primary_key(doc):
    candidates = [k for k in doc if k.lower().endswith("id")]
    if not candidates:
        raise TaskFailure("index_primary_key_no_candidate_found",
                          "The primary key inference failed as the engine did not find any field ending with `id` "
                          "in its name. Please specify the primary key manually using the `primaryKey` query "
                          "parameter.")
    if len(candidates) > 1:
        raise TaskFailure("index_primary_key_multiple_candidates_found",
                          "The primary key inference failed as the engine found %d fields ending with `id` in their "
                          "names: '%s'. Please specify the primary key manually using the `primaryKey` query "
                          "parameter." % (len(candidates), "' and '".join(candidates)))
    return candidates[0]


def add_documents_work(uid, docs, primary_key_param, merge):
    def work(task):
        index = STATE.indexes.get(uid)
        key = (index or {}).get("primaryKey") or primary_key_param or (infer_primary_key(docs[0]) if docs else None)
        ids = [document_id(d, key) for d in docs]  # atomic: every document checked before anything is written
        for i, d in zip(ids, docs):
            check_geo(i, d)
        if index is None:
            index = STATE.indexes[uid] = new_index(None)
        if index["primaryKey"] is None:
            index["primaryKey"] = key
        for i, d in zip(ids, docs):
            if merge and i in index["docs"]:
                merged = dict(index["docs"][i])
                merged.update(d)
                index["docs"][i] = merged
            else:
                index["docs"][i] = d
        index["updatedAt"] = now()
        task["details"]["indexedDocuments"] = len(docs)
    return work


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        return self.rfile.read(length) if length else b""

    def handle_any(self, method):
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        raw = self.read_body()
        try:
            if path.startswith("/_control/"):
                return self.control(method, path, raw)
            route = self.route_name(method, path)
            with STATE.lock:
                STATE.requests[route] = STATE.requests.get(route, 0) + 1
                injected = None
                for rule in STATE.fail_requests:
                    if rule.get("count", 1) > 0 and rule.get("method", method) == method and \
                            path.startswith(rule.get("path_prefix", "/")):
                        rule["count"] = rule.get("count", 1) - 1
                        injected = rule.get("status", 503)
                        break
            if injected is not None:
                if injected == 0:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                return self.send_json(injected, error("internal", "contract server: injected failure", "internal"))
            self.authorize(path)
            status, body = self.dispatch(method, path, query, raw)
            self.send_json(status, body)
        except ApiError as e:
            self.send_json(e.status, e.body)

    @staticmethod
    def route_name(method, path):
        parts = path.strip("/").split("/")
        if len(parts) >= 2 and parts[0] == "indexes":
            parts[1] = "{uid}"
        if len(parts) >= 4 and parts[2] == "documents" and parts[3] != "delete-batch":
            parts[3] = "{id}"
        if len(parts) == 2 and parts[0] == "tasks":
            parts[1] = "{uid}"
        return method + " /" + "/".join(parts)

    def authorize(self, path):
        if ARGS.master_key is None or path == "/health":
            return
        auth = self.headers.get("Authorization")
        if auth is None:
            raise ApiError(401, "missing_authorization_header",
                           "The Authorization header is missing. It must use the bearer authorization method.", "auth")
        if not auth.startswith("Bearer ") or auth[len("Bearer "):] != ARGS.master_key:
            raise ApiError(403, "invalid_api_key", "The provided API key is invalid.", "auth")

    def decode(self, raw):
        if len(raw) > ARGS.payload_limit:
            raise ApiError(413, "payload_too_large",
                           "The provided payload reached the size limit. The maximum accepted payload size is %d B."
                           % ARGS.payload_limit)
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        try:
            if encoding == "gzip":
                raw = gzip.decompress(raw)
            elif encoding == "deflate":
                raw = zlib.decompress(raw)
            elif encoding != "identity":
                raise ApiError(415, "invalid_content_type", "Unsupported Content-Encoding `%s`." % encoding)
        except (OSError, zlib.error, EOFError) as e:
            raise ApiError(400, "malformed_payload", "The payload cannot be decompressed: %s." % e)
        if len(raw) > ARGS.payload_limit:
            raise ApiError(413, "payload_too_large",
                           "The provided payload reached the size limit. The maximum accepted payload size is %d B."
                           % ARGS.payload_limit)
        return raw

    def json_body(self, raw):
        raw = self.decode(raw)
        if not raw.strip():
            raise ApiError(400, "missing_payload", "A json payload is missing.")
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(400, "bad_request", "The json payload provided is malformed. `%s`." % e)

    def documents(self, raw):
        ctype = self.headers.get("Content-Type")
        if ctype is None:
            raise ApiError(415, "missing_content_type",
                           "A Content-Type header is missing. Accepted values for the Content-Type header are: "
                           "`application/json`, `application/x-ndjson`, `text/csv`")
        media = ctype.split(";")[0].strip().lower()
        if media not in ("application/json", "application/x-ndjson"):
            raise ApiError(415, "invalid_content_type",
                           "The Content-Type `%s` is invalid. Accepted values for the Content-Type header are: "
                           "`application/json`, `application/x-ndjson`, `text/csv`" % ctype)
        raw = self.decode(raw)
        if not raw.strip():
            raise ApiError(400, "missing_payload", "A %s payload is missing." % ("json" if media.endswith("json") else "ndjson"))
        try:
            text = raw.decode("utf-8")
            if media == "application/json":
                value = json.loads(text)
                docs = value if isinstance(value, list) else [value]
            else:
                docs = [json.loads(line) for line in text.split("\n") if line.strip()]
        except (UnicodeDecodeError, ValueError) as e:
            raise ApiError(400, "malformed_payload", "The `%s` payload provided is malformed. `%s`."
                           % ("json" if media == "application/json" else "ndjson", e))
        for d in docs:
            if not isinstance(d, dict):
                raise ApiError(400, "malformed_payload",
                               "The `json` payload provided is malformed. `Couldn't serialize document value: invalid "
                               "type: %s, expected a map`." % type(d).__name__)
        return docs

    def dispatch(self, method, path, query, raw):
        parts = path.strip("/").split("/")
        if path == "/health" and method == "GET":
            return 200, {"status": "available"}
        if path == "/version" and method == "GET":
            return 200, {"commitSha": "contract", "commitDate": "2026-01-01", "pkgVersion": "1.x-contract"}
        if path == "/tasks" and method == "GET":  # newest first, `limit` of them (20 by default), `from` a uid
            limit = int(query.get("limit", 20))
            with STATE.lock:
                start = int(query.get("from", len(STATE.tasks) - 1))
                uids = [u for u in range(min(start, len(STATE.tasks) - 1), -1, -1)]
                page = [dict(STATE.tasks[u][0]) for u in uids[:limit]]
                nxt = uids[limit] if len(uids) > limit else None
                return 200, {"results": page, "total": len(STATE.tasks), "limit": limit,
                             "from": page[0]["uid"] if page else None, "next": nxt}
        if parts[0] == "tasks" and len(parts) == 2 and method == "GET":
            with STATE.lock:
                try:
                    return 200, dict(STATE.tasks[int(parts[1])][0])
                except (ValueError, IndexError):
                    raise ApiError(404, "task_not_found", "Task `%s` not found." % parts[1])
        if parts[0] != "indexes":
            raise ApiError(404, "not_found", "Not found.")
        if len(parts) == 1:
            if method == "GET":
                with STATE.lock:
                    results = [index_view(u, i) for u, i in sorted(STATE.indexes.items())]
                return 200, {"results": results, "offset": 0, "limit": 20, "total": len(results)}
            if method == "POST":
                body = self.json_body(raw)
                uid = body.get("uid") if isinstance(body, dict) else None
                if not isinstance(uid, str):
                    raise ApiError(400, "missing_index_uid", "Missing field `uid`")
                check_index_uid(uid)
                pk = body.get("primaryKey")

                def work(task):
                    if uid in STATE.indexes:
                        raise TaskFailure("index_already_exists", "Index `%s` already exists." % uid)
                    STATE.indexes[uid] = new_index(pk)
                return 202, STATE.enqueue(uid, "indexCreation", {"primaryKey": pk}, work)
            raise ApiError(405, "bad_request", "Method not allowed.")
        uid = parts[1]
        check_index_uid(uid)
        if len(parts) == 2:
            if method == "GET":
                with STATE.lock:
                    if uid not in STATE.indexes:
                        raise ApiError(404, "index_not_found", "Index `%s` not found." % uid)
                    return 200, index_view(uid, STATE.indexes[uid])
            raise ApiError(405, "bad_request", "Method not allowed.")
        if parts[2] == "settings" and len(parts) == 3:
            if method == "PATCH":
                body = self.json_body(raw)
                if not isinstance(body, dict):
                    raise ApiError(400, "bad_request", "Invalid value type: expected an object.")
                for k, v in body.items():
                    if k not in KNOWN_SETTINGS:
                        raise ApiError(400, "bad_request", "Unknown field `%s`: expected one of %s"
                                       % (k, ", ".join("`%s`" % s for s in sorted(KNOWN_SETTINGS))))
                    if k in STRING_LIST_SETTINGS and v is not None and \
                            (not isinstance(v, list) or not all(isinstance(s, str) for s in v)):
                        code = "invalid_settings_" + re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k)
                        raise ApiError(400, code, "Invalid value type at `.%s`: expected an array of strings." % k)

                def work(task):
                    index = STATE.indexes.get(uid)
                    if index is None:
                        index = STATE.indexes[uid] = new_index(None)
                    index.setdefault("settings", {}).update(body)
                return 202, STATE.enqueue(uid, "settingsUpdate", dict(body), work)
            if method == "GET":
                with STATE.lock:
                    if uid not in STATE.indexes:
                        raise ApiError(404, "index_not_found", "Index `%s` not found." % uid)
                    return 200, STATE.indexes[uid].get("settings", {})
            raise ApiError(405, "bad_request", "Method not allowed.")
        if parts[2] != "documents":
            raise ApiError(404, "not_found", "Not found.")
        if len(parts) == 3:
            if method in ("POST", "PUT"):
                docs = self.documents(raw)
                pk = query.get("primaryKey")
                return 202, STATE.enqueue(uid, "documentAdditionOrUpdate",
                                          {"receivedDocuments": len(docs), "indexedDocuments": None},
                                          add_documents_work(uid, docs, pk, merge=(method == "PUT")))
            if method == "GET":
                limit, offset = int(query.get("limit", 20)), int(query.get("offset", 0))
                with STATE.lock:
                    if uid not in STATE.indexes:
                        raise ApiError(404, "index_not_found", "Index `%s` not found." % uid)
                    docs = list(STATE.indexes[uid]["docs"].values())
                return 200, {"results": docs[offset:offset + limit], "offset": offset, "limit": limit,
                             "total": len(docs)}
            if method == "DELETE":  # delete all documents
                def work(task):
                    index = STATE.indexes.get(uid)
                    if index is None:
                        raise TaskFailure("index_not_found", "Index `%s` not found." % uid)
                    task["details"]["deletedDocuments"] = len(index["docs"])
                    index["docs"].clear()
                    index["updatedAt"] = now()
                return 202, STATE.enqueue(uid, "documentDeletion", {"deletedDocuments": None}, work)
            raise ApiError(405, "bad_request", "Method not allowed.")
        if parts[3] == "delete-batch" and len(parts) == 4 and method == "POST":
            ids = self.json_body(raw)
            if not isinstance(ids, list) or not all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in ids):
                raise ApiError(400, "bad_request", "Invalid value type: expected an array of document ids.")

            def work(task):
                index = STATE.indexes.get(uid)
                if index is None:
                    raise TaskFailure("index_not_found", "Index `%s` not found." % uid)
                deleted = 0
                for i in ids:
                    if index["docs"].pop(str(i), None) is not None:
                        deleted += 1
                task["details"]["deletedDocuments"] = deleted
            return 202, STATE.enqueue(uid, "documentDeletion",
                                      {"providedIds": len(ids), "deletedDocuments": None, "originalFilter": None}, work)
        if len(parts) == 4 and method == "GET":
            with STATE.lock:
                if uid not in STATE.indexes:
                    raise ApiError(404, "index_not_found", "Index `%s` not found." % uid)
                doc = STATE.indexes[uid]["docs"].get(parts[3])
            if doc is None:
                raise ApiError(404, "document_not_found", "Document `%s` not found." % parts[3])
            return 200, doc
        raise ApiError(404, "not_found", "Not found.")

    def control(self, method, path, raw):
        body = json.loads(raw) if raw.strip() else {}
        with STATE.lock:
            if path == "/_control/reset":
                STATE.reset()
                STATE.lock.notify_all()
                return self.send_json(200, {})
            if path == "/_control/config":
                if "processing_delay" in body:
                    STATE.processing_delay = float(body["processing_delay"])
                if "paused" in body:
                    STATE.paused = bool(body["paused"])
                if body.get("clear_failures"):
                    STATE.fail_requests, STATE.fail_tasks, STATE.cancel_tasks = [], 0, 0
                STATE.fail_requests.extend(body.get("fail_requests", []))
                STATE.fail_tasks += int(body.get("fail_tasks", 0))
                STATE.cancel_tasks += int(body.get("cancel_tasks", 0))
                STATE.lock.notify_all()
                return self.send_json(200, {})
            if path == "/_control/stats":
                return self.send_json(200, {"requests": STATE.requests, "tasks": len(STATE.tasks),
                                            "max_enqueued": STATE.max_enqueued, "enqueued": len(STATE.queue)})
        self.send_json(404, {"message": "no such control endpoint"})

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_PATCH(self):
        self.handle_any("PATCH")

    def do_DELETE(self):
        self.handle_any("DELETE")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--master-key")
    p.add_argument("--payload-limit", type=int, default=100 * 1024 * 1024)
    p.add_argument("--exit-on-stdin-eof", action="store_true")
    ARGS = p.parse_args()
    server = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=STATE.worker, daemon=True).start()
    print(server.server_address[1], flush=True)
    if ARGS.exit_on_stdin_eof:
        def watch():
            sys.stdin.read()
            server.shutdown()
        threading.Thread(target=watch, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
