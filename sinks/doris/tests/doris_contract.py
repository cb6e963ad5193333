#!/usr/bin/env python3
"""A strict contract server for Apache Doris's Stream Load HTTP API (Python 3 standard library only).

    doris_contract.py [--port 0] [--user root] [--password ""] [--exit-on-stdin-eof]

No Doris cluster can run on these machines, so the Doris sink is tested against this server,
written from Doris's Stream Load manual (data-operate/import/import-way/stream-load-manual, the
STREAM LOAD statement page, and the FE HTTP API pages for _stream_load_2pc and get_load_state),
NOT from the sink's code. It is two HTTP servers in one process: an FE (the port printed on the
first line of stdout) and a BE (another loopback port). What it implements:

  - PUT /api/{db}/{table}/_stream_load on the FE: Basic auth checked (401 otherwise), the
    `Expect: 100-continue` header required (the FE answers {"status": "FAILED", "msg": "There is
    no 100-continue header"} without it), then a 307 to the BE at the same path and query, before
    any body is read (the client must re-send body and auth to the Location);
  - the same PUT on the BE: Basic auth again, the body read (100 Continue first); `format: json`
    with `read_json_by_line: true` (one JSON object per line) or `strip_outer_array: true` (one
    array); any other format answers Status Fail ("this contract server loads json only");
    `columns` (the table columns the JSON fields go to) and `jsonpaths` (["$.a", ...] by position);
    `max_filter_ratio` (0 by default); `strict_mode` (false by default: a value that does not
    convert becomes NULL, then is refused only in a NOT NULL column); `label` ([-_A-Za-z0-9:],
    at most 128 bytes, unique per database; one of an ABORTED load is reused);
    `two_phase_commit: true` (the load ends PRECOMMITTED, invisible);
  - the answer: {TxnId, Label, Comment, TwoPhaseCommit, Status, Message, NumberTotalRows,
    NumberLoadedRows, NumberFilteredRows, NumberUnselectedRows, LoadBytes, LoadTimeMs, ...,
    ErrorURL (when rows were filtered)}; Status Success / Publish Timeout (loaded, visible a bit
    later) / Label Already Exists (+ ExistingJobStatus RUNNING / PRECOMMITTED / FINISHED, nothing
    loaded) / Fail (nothing loaded, the transaction aborted, the label free again);
  - GET {ErrorURL} on the BE (/api/_load_error_log?file=...): one line per filtered row,
    "Reason: <why>. src line [<the row as sent>]; ";
  - PUT /api/{db}/_stream_load_2pc (also with a table in the path) on the FE: headers txn_id or
    label, txn_operation commit | abort; {"status": "Success", "msg": "transaction [N] commit
    successfully."}, or {"status": "ANALYSIS_ERROR", "msg": ...} (unknown transaction, wrong state);
  - GET /api/{db}/get_load_state?label=L on the FE: {"msg": "success", "code": 0, "data":
    "UNKNOWN" | "PREPARE" | "PRECOMMITTED" | "COMMITTED" | "VISIBLE" | "ABORTED", "count": 0}.

Unique Key tables and change loads (data-operate/delete/batch-delete-manual, "Stream Load";
data-operate/update/unique-update-concurrent-control, "Sequence Column"; the stream load manual's
header table; the FE's checks as DataDescription / the load planner word them):
  - a table made with "keys": "UNIQUE" and "key_columns" keeps one row per key (later loads
    replace it; merge-on-write and merge-on-read read the same), with the hidden delete sign;
    "sequence_type" (e.g. "BIGINT") gives it the hidden sequence column
    (function_column.sequence_type), and then every load must name its source with the
    `function_column.sequence_col` header (a column of `columns`, or without `columns` a column of
    the table): "Table t has sequence column, need to specify the sequence column"; the header on a
    table without one: "There is no sequence column in the table t"; a name that is neither:
    "There is no sequence column X in the t or the COLUMNS and SET clause";
  - `merge_type` APPEND (default) | DELETE (every row of the load deletes its key) | MERGE (rows
    meeting the `delete` condition delete their key, the others are appended); MERGE without
    `delete`: "Excepted DELETE ON clause when merge type is MERGE."; `delete` with another merge
    type: "not support DELETE ON clause when merge type is not MERGE."; MERGE or DELETE on a table
    that is not Unique: "load by MERGE or DELETE is only supported in unique tables." The
    condition this server understands is `column=literal` (a number, true/false or a quoted
    string), compared with the column's converted value; others are refused as unsupported here;
  - with a sequence column, a row replaces its key's row (a deleted one included: the delete sign
    is a replaced column like the others) only when its sequence value is larger or equal (equal:
    the later one); a delete with a smaller sequence deletes nothing; rows are applied in the order
    the loads were published (committed), within a load in line order; a deleted key is not read.

Doris cannot create the destination: tables are made through the control API (DDL stands in for
CREATE TABLE). Column types: TINYINT SMALLINT INT BIGINT (integers, range checked), FLOAT DOUBLE,
BOOLEAN, VARCHAR(n) (length in bytes checked), STRING, DATETIME ("YYYY-MM-DD HH:MM:SS"), JSON.

Test control (not Doris API; no auth), JSON bodies, on the FE port:
  POST /_control/table   {"db", "table", "columns": [{"name", "type", "nullable": true}],
                          "keys": "DUPLICATE" (default) | "UNIQUE", "key_columns": [names],
                          "sequence_type": "BIGINT" (Unique only; absent: no sequence column)}
  GET  /_control/rows?db=&table=        {"rows": [row objects, visible only, in load order; a
                                          Unique table's current rows, deleted keys left out]}
  GET  /_control/labels?db=             {"labels": {label: {"state", "rows", "txn_id"}}}
  POST /_control/config  {"fail_requests": [{"method", "path_prefix", "status", "count", "where":
                            "fe" | "be"}] (status 0: the connection closed without an answer),
                          "drop_after_load": n (the next n BE loads are applied, then the
                            connection is closed without an answer),
                          "publish_timeout": n (the next n loads answer Publish Timeout and turn
                            VISIBLE 0.3 s later),
                          "running_ms": ms (loads stay PREPARE / RUNNING that long before their answer),
                          "clear_failures": true}
  POST /_control/reset   everything forgotten
  GET  /_control/stats   {"requests": {"METHOD route": n}, "loads": n}
"""

import argparse
import base64
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

LABEL_RE = re.compile(r"^[-_A-Za-z0-9:]{1,128}$")
STREAM_LOAD_RE = re.compile(r"^/api/([^/]+)/([^/]+)/_stream_load$")
TWO_PC_RE = re.compile(r"^/api/([^/]+)(?:/[^/]+)?/_stream_load_2pc$")
LOAD_STATE_RE = re.compile(r"^/api/([^/]+)/get_load_state$")
INT_RANGES = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
DATETIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2}(\.\d{1,6})?)?$")


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.tables = {}      # (db, table) -> {"columns": [...], "rows": [(txn_id, row, delete_sign, seq)], ...}
        self.labels = {}      # (db, label) -> {"state", "txn_id", "table", "rows", "at"}
        self.txns = {}        # txn_id -> (db, label)
        self.error_logs = {}  # file -> text
        self.next_txn = 1000
        self.next_version = 0  # the publish order of loads: a Unique table applies them in it
        self.fail_requests = []
        self.drop_after_load = 0
        self.publish_timeout = 0
        self.running_ms = 0
        self.requests = {}
        self.loads = 0


STATE = State()
ARGS = None
BE_PORT = 0


def publish(entry, state):
    """A load committed (COMMITTED or VISIBLE): it takes the next version."""
    entry["state"] = state
    if "version" not in entry:
        STATE.next_version += 1
        entry["version"] = STATE.next_version


def visible_rows(db, table):
    t = STATE.tables.get((db, table))
    if t is None:
        return None
    loaded = []
    for position, (txn_id, row, delete_sign, seq) in enumerate(t["rows"]):
        db_label = STATE.txns.get(txn_id)
        if db_label and STATE.labels[db_label]["state"] == "VISIBLE":
            loaded.append((STATE.labels[db_label]["version"], position, row, delete_sign, seq))
    if t.get("keys", "DUPLICATE") != "UNIQUE":
        return [row for _, _, row, _, _ in loaded]
    # One row per key: the loads in their publish order, each in line order; with a sequence
    # column a row replaces its key's row only when its sequence is not smaller (NULL is smallest).
    current = {}
    for _, _, row, delete_sign, seq in sorted(loaded, key=lambda e: (e[0], e[1])):
        key = json.dumps([row.get(k) for k in t["key_columns"]])
        if "sequence_type" in t and key in current:
            held = current[key][2]
            if seq is None or (held is not None and seq < held):
                continue
        current[key] = (row, delete_sign, seq)
    return [row for row, delete_sign, _ in current.values() if not delete_sign]


DELETE_RE = re.compile(r"^\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\s*=\s*(-?\d+|true|false|'[^']*'|\"[^\"]*\")\s*$", re.I)


def delete_condition(text):
    """(column, literal) of a `delete` header, or raises LoadFail."""
    m = DELETE_RE.match(text or "")
    if not m:
        raise LoadFail("[ANALYSIS_ERROR]this contract server understands a delete condition of the form "
                       "column=literal only: %s" % text)
    literal = m.group(2)
    if literal.lower() in ("true", "false"):
        value = literal.lower() == "true"
    elif literal[0] in "'\"":
        value = literal[1:-1]
    else:
        value = int(literal)
    return m.group(1), value


def matches(value, literal):
    if value is None:
        return False
    if isinstance(literal, bool):
        return bool(value) == literal
    if isinstance(literal, int):
        try:
            return float(value) == literal
        except (TypeError, ValueError):
            return False
    return str(value) == literal


def convert(value, col, strict):
    """The column's value, or raises ValueError(reason)."""
    typ = col["type"].upper()
    if value is None:
        return None
    base = typ.split("(")[0]
    try:
        if base in INT_RANGES:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float):
                if value != int(value):
                    raise ValueError
                value = int(value)
            if isinstance(value, str):
                value = int(value.strip())
            if not isinstance(value, int):
                raise ValueError
            bits = INT_RANGES[base]
            if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
                raise ValueError
            return value
        if base in ("FLOAT", "DOUBLE"):
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if base == "BOOLEAN":
            if isinstance(value, bool):
                return value
            if value in (0, 1):
                return bool(value)
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise ValueError
        if base in ("VARCHAR", "CHAR", "STRING", "TEXT"):
            text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            m = re.match(r"^\w+\((\d+)\)$", typ)
            if m and len(text.encode()) > int(m.group(1)):
                raise ValueError
            return text
        if base == "DATETIME":
            if not isinstance(value, str) or not DATETIME_RE.match(value):
                raise ValueError
            return value
        if base == "JSON":
            return value
    except (ValueError, TypeError, OverflowError):
        pass
    raise ValueError


def load_rows(db, table, headers, body):
    """(rows to load, [(reason, src line)] filtered, total) or raises LoadFail(message)."""
    t = STATE.tables[(db, table)]
    fmt = (headers.get("format") or "csv").lower()
    if fmt != "json":
        raise LoadFail("[ANALYSIS_ERROR]this contract server loads json only (format: %s)" % fmt)
    by_line = (headers.get("read_json_by_line") or "false").lower() == "true"
    outer = (headers.get("strip_outer_array") or "false").lower() == "true"
    strict = (headers.get("strict_mode") or "false").lower() == "true"
    text = body.decode("utf-8", errors="replace")
    if by_line:
        sources = [line for line in text.split("\n") if line.strip()]
        objects = []
        for line in sources:
            try:
                objects.append(json.loads(line))
            except ValueError:
                objects.append(ValueError("Parse json data failed"))
    else:
        try:
            doc = json.loads(text)
        except ValueError:
            raise LoadFail("[DATA_QUALITY_ERROR]Parse json data for JsonDoc failed")
        if outer:
            if not isinstance(doc, list):
                raise LoadFail("[DATA_QUALITY_ERROR]JSON data is not an array-object, strip_outer_array must be FALSE")
            objects = doc
        else:
            objects = [doc]
        sources = [json.dumps(o, separators=(",", ":")) for o in objects]
    columns = [c for c in t["columns"]]
    by_name = {c["name"]: c for c in columns}
    targets = columns
    if headers.get("columns"):
        names = [n.strip().strip("`") for n in headers["columns"].split(",") if n.strip()]
        for n in names:
            if n not in by_name:
                raise LoadFail("[ANALYSIS_ERROR]errCode = 2, detailMessage = Unknown column '%s' in '%s'" % (n, table))
        targets = [by_name[n] for n in names]
    paths = None
    if headers.get("jsonpaths"):
        try:
            paths = json.loads(headers["jsonpaths"])
            assert isinstance(paths, list) and all(isinstance(p, str) and p.startswith("$.") for p in paths)
        except (ValueError, AssertionError):
            raise LoadFail("[INVALID_ARGUMENT]Invalid json path: " + headers["jsonpaths"])
        if len(paths) != len(targets):
            raise LoadFail("[INVALID_ARGUMENT]jsonpaths and columns do not match in number")
    # merge_type, delete, function_column.sequence_col (batch-delete-manual, the sequence column).
    merge_type = (headers.get("merge_type") or "APPEND").strip().upper()
    if merge_type not in ("APPEND", "DELETE", "MERGE"):
        raise LoadFail("[INVALID_ARGUMENT]unknown merge type " + merge_type)
    analysis = "[ANALYSIS_ERROR]errCode = 2, detailMessage = "
    if merge_type != "MERGE" and headers.get("delete") is not None:
        raise LoadFail(analysis + "not support DELETE ON clause when merge type is not MERGE.")
    if merge_type == "MERGE" and headers.get("delete") is None:
        raise LoadFail(analysis + "Excepted DELETE ON clause when merge type is MERGE.")
    unique = t.get("keys", "DUPLICATE") == "UNIQUE"
    if merge_type != "APPEND" and not unique:
        raise LoadFail(analysis + "load by MERGE or DELETE is only supported in unique tables.")
    seq_col = headers.get("function_column.sequence_col")
    has_seq = unique and "sequence_type" in t
    if has_seq and not seq_col:
        raise LoadFail(analysis + "Table %s has sequence column, need to specify the sequence column" % table)
    if seq_col and not has_seq:
        raise LoadFail(analysis + "There is no sequence column in the table %s" % table)
    target_names = [c["name"].lower() for c in targets]
    if seq_col and seq_col.strip().lower() not in target_names:
        raise LoadFail(analysis + "There is no sequence column %s in the %s or the COLUMNS and SET clause" % (seq_col, table))
    condition = None
    if merge_type == "MERGE":
        condition = delete_condition(headers["delete"])
        if condition[0].lower() not in target_names:
            raise LoadFail(analysis + "Unknown column '%s' in 'delete condition'" % condition[0])
    seq_name = targets[target_names.index(seq_col.strip().lower())]["name"] if seq_col else None
    cond_name = targets[target_names.index(condition[0].lower())]["name"] if condition else None
    good, bad = [], []
    for src, obj in zip(sources, objects):
        if isinstance(obj, Exception) or not isinstance(obj, dict):
            bad.append(("Parse json data failed. code: 28, error info: The input is not a JSON object", src))
            continue
        row, reason = {}, None
        for i, col in enumerate(targets):
            if paths is not None:
                value = obj
                for part in paths[i][2:].split("."):
                    value = value.get(part) if isinstance(value, dict) else None
            else:
                value = obj.get(col["name"])
            try:
                v = convert(value, col, strict)
            except ValueError:
                if strict:
                    reason = "column(%s) value is incorrect while strict mode is true, value: %s" % (col["name"], json.dumps(value))
                    break
                v = None
            if v is None and not col.get("nullable", True):
                reason = "column(%s) values is null while columns is not nullable" % col["name"]
                break
            row[col["name"]] = v
        if reason:
            bad.append((reason, src))
            continue
        for col in columns:
            row.setdefault(col["name"], None)
            if row[col["name"]] is None and not col.get("nullable", True):
                reason = "column(%s) values is null while columns is not nullable" % col["name"]
        if reason:
            bad.append((reason, src))
            continue
        if merge_type == "DELETE":
            delete_sign = True
        elif merge_type == "MERGE":
            delete_sign = matches(row[cond_name], condition[1])
        else:
            delete_sign = False
        seq = None
        if seq_name is not None and row[seq_name] is not None:
            try:
                seq = convert(row[seq_name], {"type": t["sequence_type"]}, True)
            except ValueError:
                bad.append(("column(%s) value is incorrect for the sequence column" % seq_name, src))
                continue
        good.append((row, delete_sign, seq))
    return good, bad, len(sources)


class LoadFail(Exception):
    pass


def basic_ok(header):
    if not header or not header.startswith("Basic "):
        return False
    try:
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except ValueError:
        return False
    return user == ARGS.user and password == ARGS.password


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    role = "fe"

    def log_message(self, *args):
        pass

    def send_json(self, status, body, extra=None, close=False):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def count(self, method, route):
        with STATE.lock:
            key = "%s %s %s" % (self.role, method, route)
            STATE.requests[key] = STATE.requests.get(key, 0) + 1

    def injected(self, method, path):
        with STATE.lock:
            for rule in STATE.fail_requests:
                if rule.get("count", 1) <= 0:
                    continue
                if rule.get("method") and rule["method"] != method:
                    continue
                if rule.get("where") and rule["where"] != self.role:
                    continue
                if not path.startswith(rule.get("path_prefix", "")):
                    continue
                rule["count"] = rule.get("count", 1) - 1
                return rule.get("status", 503)
        return None

    def fail_now(self, status):
        if status == 0:
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return
        self.send_json(status, {"status": "FAILED", "msg": "injected %d" % status}, close=True)

    # The FE answers a stream load before its body: auth, the 100-continue header, then 307.
    def handle_expect_100(self):
        path = urlsplit(self.path).path
        if self.command == "PUT" and STREAM_LOAD_RE.match(path) and self.role == "fe":
            self.fe_stream_load()
            return False
        return super().handle_expect_100()

    def fe_stream_load(self):
        url = urlsplit(self.path)
        self.count("PUT", "/api/{db}/{table}/_stream_load")
        status = self.injected("PUT", url.path)
        if status is not None:
            return self.fail_now(status)
        if not basic_ok(self.headers.get("Authorization")):
            return self.send_json(401, {"status": "FAILED", "msg": "Access denied for user"}, close=True)
        if (self.headers.get("Expect") or "").lower() != "100-continue":
            return self.send_json(200, {"status": "FAILED", "msg": "There is no 100-continue header"}, close=True)
        location = "http://127.0.0.1:%d%s" % (BE_PORT, self.path)
        self.send_response(307)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.close_connection = True
        self.end_headers()

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(n) if n else b""

    def handle_any(self, method):
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        if path.startswith("/_control/") and self.role == "fe":
            return self.control(method, path, query)
        if self.role == "fe" and method == "PUT" and STREAM_LOAD_RE.match(path):
            # No Expect header: the FE still answers before the body.
            self.read_body()
            return self.fe_stream_load()
        if self.role == "be" and method == "PUT" and STREAM_LOAD_RE.match(path):
            return self.be_stream_load(path)
        if self.role == "be" and method == "GET" and path == "/api/_load_error_log":
            self.count("GET", "/api/_load_error_log")
            text = STATE.error_logs.get((query.get("file") or [""])[0])
            if text is None:
                return self.send_json(404, {"status": "FAILED", "msg": "no such error log"})
            data = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return self.wfile.write(data)
        body = self.read_body()
        if self.role == "fe" and method == "PUT" and TWO_PC_RE.match(path):
            return self.two_phase(TWO_PC_RE.match(path).group(1), path)
        if self.role == "fe" and method == "GET" and LOAD_STATE_RE.match(path):
            self.count("GET", "/api/{db}/get_load_state")
            status = self.injected(method, path)
            if status is not None:
                return self.fail_now(status)
            if not basic_ok(self.headers.get("Authorization")):
                return self.send_json(401, {"msg": "Unauthorized", "code": 401, "data": None, "count": 0})
            db = LOAD_STATE_RE.match(path).group(1)
            label = (query.get("label") or [""])[0]
            if not label:
                return self.send_json(200, {"msg": "No label selected", "code": 1, "data": None, "count": 0})
            with STATE.lock:
                entry = STATE.labels.get((db, label))
                state = entry["state"] if entry else "UNKNOWN"
            return self.send_json(200, {"msg": "success", "code": 0, "data": state, "count": 0})
        del body
        self.send_json(404, {"status": "FAILED", "msg": "no such route: %s %s" % (method, path)})

    def answer(self, txn_id, label, two_pc, status, message, total=0, loaded=0, filtered=0, load_bytes=0,
               error_url=None, existing=None):
        body = {"TxnId": txn_id, "Label": label, "Comment": "", "TwoPhaseCommit": "true" if two_pc else "false",
                "Status": status, "Message": message, "NumberTotalRows": total, "NumberLoadedRows": loaded,
                "NumberFilteredRows": filtered, "NumberUnselectedRows": 0, "LoadBytes": load_bytes,
                "LoadTimeMs": 1, "BeginTxnTimeMs": 0, "StreamLoadPutTimeMs": 0, "ReadDataTimeMs": 0,
                "WriteDataTimeMs": 0, "CommitAndPublishTimeMs": 0}
        if existing is not None:
            body["ExistingJobStatus"] = existing
        if error_url:
            body["ErrorURL"] = error_url
        self.send_json(200, body)

    def be_stream_load(self, path):
        self.count("PUT", "/api/{db}/{table}/_stream_load")
        status = self.injected("PUT", path)
        if status is not None:
            return self.fail_now(status)
        if not basic_ok(self.headers.get("Authorization")):
            return self.send_json(401, {"status": "FAILED", "msg": "Access denied for user"}, close=True)
        body = self.read_body()
        db, table = STREAM_LOAD_RE.match(path).groups()
        h = {k.lower(): v for k, v in self.headers.items()}
        two_pc = (h.get("two_phase_commit") or "false").lower() == "true"
        label = h.get("label")
        with STATE.lock:
            STATE.next_txn += 1
            txn_id = STATE.next_txn
            if label is None:
                label = "contract_%d" % txn_id
        if not LABEL_RE.match(label):
            return self.answer(-1, label, two_pc, "Fail", "[INVALID_ARGUMENT]Label format error. regex: ^[-_A-Za-z0-9:]{1,128}$")
        try:
            ratio = float(h.get("max_filter_ratio") or 0)
        except ValueError:
            return self.answer(-1, label, two_pc, "Fail", "[INVALID_ARGUMENT]Invalid max_filter_ratio")
        with STATE.lock:
            if (db, table) not in STATE.tables:
                known_db = any(d == db for d, _ in STATE.tables)
                return self.answer(-1, label, two_pc, "Fail", "[ANALYSIS_ERROR]errCode = 2, detailMessage = " +
                                   ("Unknown table '%s'" % table if known_db else "Unknown database 'default_cluster:%s'" % db))
            existing = STATE.labels.get((db, label))
            if existing and existing["state"] != "ABORTED":
                job = {"PREPARE": "RUNNING", "PRECOMMITTED": "PRECOMMITTED"}.get(existing["state"], "FINISHED")
                return self.answer(-1, label, two_pc, "Label Already Exists",
                                   "[LABEL_ALREADY_EXISTS]Label [%s] has already been used, relate to txn [%d], status=[%s]"
                                   % (label, existing["txn_id"], existing["state"]), existing=job)
            STATE.labels[(db, label)] = {"state": "PREPARE", "txn_id": txn_id, "table": table, "rows": 0, "at": time.time()}
            STATE.txns[txn_id] = (db, label)
            running_ms = STATE.running_ms
        if running_ms:
            time.sleep(running_ms / 1000.0)
        try:
            with STATE.lock:
                good, bad, total = load_rows(db, table, h, body)
        except LoadFail as e:
            with STATE.lock:
                STATE.labels[(db, label)]["state"] = "ABORTED"
            return self.answer(txn_id, label, two_pc, "Fail", str(e), load_bytes=len(body))
        error_url = None
        if bad:
            name = "__shard_%d/error_log_insert_stmt_%s_%d" % (txn_id % 7, label.replace(":", "_")[:40], txn_id)
            STATE.error_logs[name] = "".join("Reason: %s. src line [%s]; \n" % (why, src) for why, src in bad)
            error_url = "http://127.0.0.1:%d/api/_load_error_log?file=%s" % (BE_PORT, name)
        if total == 0 or (bad and len(bad) / total > ratio):
            with STATE.lock:
                STATE.labels[(db, label)]["state"] = "ABORTED"
            message = "[DATA_QUALITY_ERROR]too many filtered rows" if bad else "[INTERNAL_ERROR]all partitions have no load data"
            return self.answer(txn_id, label, two_pc, "Fail", message, total=total, loaded=len(good),
                               filtered=len(bad), load_bytes=len(body), error_url=error_url)
        with STATE.lock:
            STATE.loads += 1
            t = STATE.tables[(db, table)]
            for row, delete_sign, seq in good:
                t["rows"].append((txn_id, row, delete_sign, seq))
            entry = STATE.labels[(db, label)]
            entry["rows"] = len(good)
            publish_timeout = False
            if two_pc:
                entry["state"] = "PRECOMMITTED"
            elif STATE.publish_timeout > 0:
                STATE.publish_timeout -= 1
                publish(entry, "COMMITTED")
                publish_timeout = True
                threading.Timer(0.3, self.make_visible, args=(db, label)).start()
            else:
                publish(entry, "VISIBLE")
            drop = STATE.drop_after_load > 0
            if drop:
                STATE.drop_after_load -= 1
        if drop:
            return self.fail_now(0)
        status = "Publish Timeout" if publish_timeout else "Success"
        message = "PUBLISH TIMEOUT" if publish_timeout else "OK"
        self.answer(txn_id, label, two_pc, status, message, total=total, loaded=len(good), filtered=len(bad),
                    load_bytes=len(body), error_url=error_url)

    @staticmethod
    def make_visible(db, label):
        with STATE.lock:
            entry = STATE.labels.get((db, label))
            if entry and entry["state"] == "COMMITTED":
                entry["state"] = "VISIBLE"

    def two_phase(self, db, path):
        self.count("PUT", "/api/{db}/_stream_load_2pc")
        status = self.injected("PUT", path)
        if status is not None:
            return self.fail_now(status)
        if not basic_ok(self.headers.get("Authorization")):
            return self.send_json(401, {"status": "FAILED", "msg": "Access denied for user"})
        op = (self.headers.get("txn_operation") or "").lower()
        if op not in ("commit", "abort"):
            return self.send_json(200, {"status": "ANALYSIS_ERROR", "msg": "unsupported txn_operation: " + op})
        with STATE.lock:
            key = None
            if self.headers.get("txn_id"):
                try:
                    key = STATE.txns.get(int(self.headers["txn_id"]))
                except ValueError:
                    key = None
            elif self.headers.get("label"):
                key = (db, self.headers["label"])
            else:
                return self.send_json(200, {"status": "ANALYSIS_ERROR", "msg": "no valid transaction id or label"})
            entry = STATE.labels.get(key) if key and key[0] == db else None
            if entry is None:
                return self.send_json(200, {"status": "ANALYSIS_ERROR", "msg": "transaction not found"})
            txn = entry["txn_id"]
            if op == "commit":
                if entry["state"] in ("COMMITTED", "VISIBLE"):
                    return self.send_json(200, {"status": "ANALYSIS_ERROR",
                                                "msg": "transaction [%d] is already visible, not pre-committed." % txn})
                if entry["state"] != "PRECOMMITTED":
                    return self.send_json(200, {"status": "ANALYSIS_ERROR",
                                                "msg": "transaction [%d] is already %s, could not commit." % (txn, entry["state"].lower())})
                publish(entry, "VISIBLE")
            else:
                if entry["state"] in ("COMMITTED", "VISIBLE"):
                    return self.send_json(200, {"status": "ANALYSIS_ERROR",
                                                "msg": "transaction [%d] is already visible, could not abort." % txn})
                if entry["state"] == "ABORTED":
                    return self.send_json(200, {"status": "ANALYSIS_ERROR", "msg": "transaction [%d] is already aborted" % txn})
                entry["state"] = "ABORTED"
        self.send_json(200, {"status": "Success", "msg": "transaction [%d] %s successfully." % (txn, op)})

    def control(self, method, path, query):
        raw = self.read_body()
        body = json.loads(raw) if raw else {}
        with STATE.lock:
            if path == "/_control/reset":
                STATE.reset()
                return self.send_json(200, {})
            if path == "/_control/table":
                t = {"columns": body["columns"], "rows": [], "keys": body.get("keys", "DUPLICATE").upper(),
                     "key_columns": body.get("key_columns", [])}
                if body.get("sequence_type"):
                    t["sequence_type"] = body["sequence_type"]
                STATE.tables[(body["db"], body["table"])] = t
                return self.send_json(200, {})
            if path == "/_control/rows":
                rows = visible_rows(query["db"][0], query["table"][0])
                if rows is None:
                    return self.send_json(404, {"msg": "no such table"})
                return self.send_json(200, {"rows": rows})
            if path == "/_control/labels":
                db = query["db"][0]
                return self.send_json(200, {"labels": {label: {"state": e["state"], "rows": e["rows"], "txn_id": e["txn_id"]}
                                                       for (d, label), e in STATE.labels.items() if d == db}})
            if path == "/_control/config":
                if body.get("clear_failures"):
                    STATE.fail_requests, STATE.drop_after_load, STATE.publish_timeout = [], 0, 0
                STATE.fail_requests.extend(body.get("fail_requests", []))
                STATE.drop_after_load += int(body.get("drop_after_load", 0))
                STATE.publish_timeout += int(body.get("publish_timeout", 0))
                if "running_ms" in body:
                    STATE.running_ms = int(body["running_ms"])
                return self.send_json(200, {})
            if path == "/_control/stats":
                return self.send_json(200, {"requests": STATE.requests, "loads": STATE.loads})
        self.send_json(404, {"msg": "no such control endpoint"})

    def do_GET(self):
        self.handle_any("GET")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_POST(self):
        self.handle_any("POST")


class BeHandler(Handler):
    role = "be"


def main():
    global ARGS, BE_PORT
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--user", default="root")
    p.add_argument("--password", default="")
    p.add_argument("--exit-on-stdin-eof", action="store_true")
    ARGS = p.parse_args()
    be = ThreadingHTTPServer((ARGS.host, 0), BeHandler)
    be.daemon_threads = True
    BE_PORT = be.server_address[1]
    fe = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    fe.daemon_threads = True
    threading.Thread(target=be.serve_forever, daemon=True).start()
    print(fe.server_address[1], flush=True)
    if ARGS.exit_on_stdin_eof:
        def watch():
            sys.stdin.read()
            fe.shutdown()
        threading.Thread(target=watch, daemon=True).start()
    fe.serve_forever()


if __name__ == "__main__":
    main()
