#!/usr/bin/env python3
"""ClickHouse's HTTP interface in front of chDB (PyPI `chdb`: the current ClickHouse engine,
in-process, which cannot listen), for the tests: the sink's suites run against the current
engine through it (sinks/clickhouse/server.sh with PICOMQ_CLICKHOUSE_ENGINE=chdb).

What it serves, as the server does: POST / and GET / with the query in `query=` (then the body is
an INSERT's data, plain or chunked) or as the body; `database=`; other URL parameters are
settings of the query; the user from `user=`/`password=` or basic auth ("default" and "readonly"
without a password, "writer" with picomq-test-password; readonly refuses writes, code 164);
errors as a 500 (404 for unknown tables, 401/403 for authentication) with the server's
"Code: N. DB::Exception: ..." text and the X-ClickHouse-Exception-Code header; GET /ping; and,
for the tests only, POST /_test/lose-insert-answers?n=N (below).
An INSERT's data goes to a file first and into the table by `INSERT ... FROM INFILE` with the
query's settings (insert_deduplication_token among them): the whole body or nothing, as the
server does for a one-block insert. One query at a time (chDB's session is one); a client that
goes away mid-body inserts nothing. The answer to an insert comes --insert-answer-delay ms (100)
after its rows are in the table, outside the lock: the time in which a crash of the client
leaves written rows uncommitted, which the kill tests need (a real server's answer and the
network take some time too; here it would be too quick to catch).

Usage: chdb_http.py --port N --path DIR [--insert-answer-delay MS]
"""
import argparse
import base64
import gzip
import http.server
import os
import re
import socket
import tempfile
import threading
import time
import urllib.parse

import zstandard
from chdb import session

USERS = {"default": "", "readonly": "", "writer": "picomq-test-password"}
# URL parameters that are not settings of the query.
NOT_SETTINGS = {"query", "database", "user", "password", "query_id", "default_format"}
# Settings the engine has no use for here (no async inserts in one process).
IGNORED = {"async_insert", "wait_for_async_insert"}
INSERT_FORMAT = re.compile(r"^(?P<head>\s*INSERT\s+INTO\s.*?)\s+FORMAT\s+(?P<format>\w+)\s*$", re.I | re.S)
CODE = re.compile(r"Code: (\d+)\.")


class Engine:
    def __init__(self, path):
        self.session = session.Session(path)
        self.lock = threading.Lock()
        self.tmp = os.path.join(path, "inserts")
        os.makedirs(self.tmp, exist_ok=True)

    def run(self, sql, database, settings, data=None):
        with self.lock:
            if database:
                self.session.query("USE " + quote_identifier(database))
            names = []
            try:
                for name, value in settings.items():
                    self.session.query("SET %s = %s" % (name, quote_value(value)))
                    names.append(name)
                if data is None:
                    return self.session.query(sql, "TabSeparated").bytes()
                m = INSERT_FORMAT.match(sql)
                if not m:
                    raise EngineError(62, "only INSERT ... FORMAT <format> takes data here: " + sql[:200])
                fd, file = tempfile.mkstemp(dir=self.tmp)
                try:
                    with os.fdopen(fd, "wb") as f:
                        f.write(data)
                    return self.session.query(
                        "%s FROM INFILE %s FORMAT %s" % (m["head"], quote_value(file), m["format"]), "TabSeparated"
                    ).bytes()
                finally:
                    os.unlink(file)
            finally:
                for name in names:
                    self.session.query("SET %s = DEFAULT" % name)


class EngineError(Exception):
    def __init__(self, code, message):
        super().__init__("Code: %d. DB::Exception: %s" % (code, message))
        self.code = code


def quote_identifier(name):
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def quote_value(value):
    if re.fullmatch(r"-?\d+(\.\d+)?", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def is_write(sql):
    word = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    return word in {"INSERT", "CREATE", "DROP", "ALTER", "TRUNCATE", "RENAME", "OPTIMIZE", "DELETE", "SET"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine = None
    insert_answer_delay = 0.1
    # POST /_test/lose-insert-answers?n=N: the next N inserts are written and their connections
    # closed without an answer (an answer lost on the way: the client cannot tell it was written).
    lose_answers = 0
    faults = threading.Lock()

    def log_message(self, *args):  # quiet: the tests read the sink's log, not this
        pass

    def do_GET(self):
        if self.path.startswith("/ping"):
            return self.answer(200, b"Ok.\n")
        self.handle_query(b"")

    def do_POST(self):
        if self.path.startswith("/_test/lose-insert-answers"):  # a test's fault: see lose_answers
            n = int(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query)).get("n", "1"))
            self.read_body()
            with Handler.faults:
                Handler.lose_answers = n
            return self.answer(200, b"Ok.\n")
        try:
            body = self.read_body()
        except (ConnectionError, ValueError):
            self.close_connection = True  # the client went away mid-body: nothing is inserted
            return
        self.handle_query(body)

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                line = self.rfile.readline()
                if not line:
                    raise ConnectionError("the body ended early")
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                chunk = self.rfile.read(size)
                if len(chunk) != size:
                    raise ConnectionError("the body ended early")
                out += chunk
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if len(body) != length:
            raise ConnectionError("the body ended early")
        return body

    def handle_query(self, body):
        params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query, keep_blank_values=True))
        user, password = params.get("user", "default"), params.get("password", "")
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
        if USERS.get(user) != password:
            return self.fail(EngineError(516, "%s: Authentication failed: password is incorrect, or there is no "
                                              "user with such name. (AUTHENTICATION_FAILED)" % user))
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "zstd":
            body = zstandard.ZstdDecompressor().decompressobj().decompress(body)
        elif encoding not in ("", "identity"):
            return self.fail(EngineError(89, "Unknown compression method: %s (UNKNOWN_COMPRESSION_METHOD)" % encoding))
        settings = {k: v for k, v in params.items() if k not in NOT_SETTINGS and k not in IGNORED}
        if "query" in params:
            sql, data = params["query"], body
            if not is_write(sql) and not data:
                data = None
            elif not INSERT_FORMAT.match(sql):
                sql, data = sql + "\n" + body.decode(), None
        else:
            sql, data = body.decode(), None
        if user == "readonly" and is_write(sql):
            return self.fail(EngineError(164, "%s: Cannot execute query in readonly mode. (READONLY)" % user))
        try:
            out = self.engine.run(sql, params.get("database", ""), settings, data)
            if data is not None:
                time.sleep(self.insert_answer_delay)
                with Handler.faults:
                    lose = Handler.lose_answers > 0
                    Handler.lose_answers -= lose
                if lose:  # written, and the connection closed without an answer
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
        except EngineError as e:
            return self.fail(e)
        except Exception as e:  # chDB's errors carry the server's text
            m = CODE.search(str(e))
            return self.fail(EngineError(int(m.group(1)) if m else 1000, str(e).split("DB::Exception: ", 1)[-1]))
        self.answer(200, out)

    def fail(self, e):
        status = {60: 404, 81: 404, 516: 401, 164: 403}.get(e.code, 500)
        self.answer(status, (str(e) + "\n").encode(), {"X-ClickHouse-Exception-Code": str(e.code)})

    def answer(self, status, body, headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "text/tab-separated-values; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--insert-answer-delay", type=int, default=100, help="ms")
    args = parser.parse_args()
    Handler.engine = Engine(args.path)
    Handler.insert_answer_delay = args.insert_answer_delay / 1000
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
