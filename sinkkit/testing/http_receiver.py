#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 receiver for the tests of HTTP sinks (Python 3 standard library only).

    http_receiver.py [--host 127.0.0.1] [--port 0] [--exit-on-stdin-eof] [--verbose]

Listens on a loopback port (0: a free one), prints that port alone on one line of stdout once it
accepts connections, and serves until SIGTERM / SIGINT (or, with --exit-on-stdin-eof, until its
stdin closes: a test binary that dies takes its receiver with it). Every request outside
/_control/ is recorded (method, path, query, headers, decompressed body) and answered by the first
scripted rule that matches it, else by the default answer (200, application/json, "{}").
HTTP/1.1 with keep-alive; request bodies by Content-Length or chunked; "Expect: 100-continue" is
answered; Content-Encoding gzip, deflate and zstd bodies are decompressed for the record (zstd
through the system's libzstd by ctypes), and a body that does not decompress is answered 400.

Control API (JSON bodies and answers; control requests are never recorded):

  POST /_control/script       add rules, after those already there: one rule object or a list
  POST /_control/default      the answer when no rule matches: {"status", "headers", "body"}
  POST /_control/idempotency  {"header": "Idempotency-Key"}: from now on a request repeating a key
                              gets the stored answer to the first one with that key, and counts as
                              a duplicate; {"header": null} turns it off. Stored are answers the
                              server "processed": status < 500 and not 408 / 429, also when the
                              rule then cut the connection (the response was lost, the write was not)
  POST /_control/forward      {"to": "http://127.0.0.1:8181"}: from now on a request no rule answers
                              goes to that server (method, path, query, headers with Host, body
                              as received)
                              and its answer comes back (a recording proxy); {"to": null}: off
  POST /_control/reset        forget rules, records, counters, stored answers, the forward target;
                              default answer back
  GET  /_control/requests     the recorded requests, oldest first (?path=/p keeps one path):
                              [{"method", "path", "query", "headers": [[name, value]...],
                                "body": text or null when not UTF-8, "body_base64",
                                "wire_size": bytes as received, "content_encoding", "chunked",
                                "connection": id of the TCP connection (1, 2...), "duplicate",
                                "answer": the status sent or the action taken}]
  GET  /_control/stats        {"requests", "connections", "in_flight", "max_in_flight", "duplicates",
                               "held", "held_now", "applied_late", "late_answers"}:
                              connections counts those that carried a recorded request; in_flight
                              and max_in_flight count recorded requests being answered; held: requests
                              a "hold" rule took, held_now: those not forwarded yet, applied_late:
                              those forwarded after their client had gone (late_answers: the
                              forward target's statuses to them, {"412": 2, ...})
  GET  /_control/held         the requests held now, oldest first: [{"id", "method", "path", "query",
                              "client_gone"}]
  POST /_control/release      {"ids": [1, 3]} (or {}: every held one): forwards them now, one after
                              the other, each answered by the target before the next goes; answers
                              [{"id", "status"}] with the target's statuses

A rule (every field optional):

  path            exact path, or a prefix ending in "*" ("/index/*"); "*" (default): any path
  path_contains   only requests whose path and query ("/b/k?uploadId=x") contain this text match
  method          "POST"...; default any
  share           the probability (0..1) that the rule takes a request that matches (default 1); a
                  request it leaves goes on to the next rules
  count           how many requests the rule answers before it is used up (default 1; 0: all)
  when_body_over  only requests whose body as received is longer than this many bytes match
                  (the 413 case: {"when_body_over": 1000, "status": 413, "count": 0})
  when_body_contains  only requests whose (decompressed) body contains this text match (a
                  record the endpoint refuses: {"when_body_contains": "\"bad\"", "status": 400, "count": 0})
  status          default: the default answer's status
  headers         {"Retry-After": "2", ...}
  body            text; default "" (with a status) or the default answer's body (without one)
  delay           seconds to wait, after reading the request, before answering
  forward         true: the request first goes to the forward target (its answer is dropped),
                  then the rule answers: a write that happened and whose answer was lost
                  ({"when_body_contains": "add-snapshot", "forward": true, "status": 502})
  action          "respond" (default)
                  "reset"               read the request, then reset the connection (RST), no answer
                  "close"               read the request, then close the connection cleanly, no answer
                  "reset_mid_response"  send the status line, headers and half the body, then reset
                  "stall_body"          send the status line and headers, wait `delay`, then the body
                  "hold"                (with a forward target) keep the request, read whole, until
                                        it is released (POST /_control/release) or `release_after`
                                        passed, then forward it and answer the client with the
                                        target's answer if the client is still connected: a request
                                        of a killed client that lands late, or a slow store
  release_after   "hold": seconds (or [min, max]: a random time between) after which the request is
                  forwarded without a release

Examples: the next 2 POSTs to /bulk get 503 with Retry-After: 1
    {"path": "/bulk", "method": "POST", "count": 2, "status": 503, "headers": {"Retry-After": "1"}}
and the next request anywhere is read, then its connection reset:  {"action": "reset"}
"""

import argparse
import base64
import ctypes
import ctypes.util
import gzip
import http.client
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

DEFAULT_ANSWER = {"status": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}
ACTIONS = ("respond", "reset", "close", "reset_mid_response", "stall_body", "hold")
MAX_BODY = 256 << 20  # a test that sends more is broken


class BadRequest(Exception):
    pass


class ZstdDecoder:
    """zstd frames through the system's libzstd (ctypes): Python before 3.14 has no zstd module."""

    class Buffer(ctypes.Structure):  # ZSTD_inBuffer and ZSTD_outBuffer share this layout
        _fields_ = [("ptr", ctypes.c_void_p), ("size", ctypes.c_size_t), ("pos", ctypes.c_size_t)]

    def __init__(self):
        name = ctypes.util.find_library("zstd") or "libzstd.so.1"
        lib = ctypes.CDLL(name)
        lib.ZSTD_createDStream.restype = ctypes.c_void_p
        lib.ZSTD_freeDStream.argtypes = [ctypes.c_void_p]
        lib.ZSTD_initDStream.argtypes = [ctypes.c_void_p]
        lib.ZSTD_initDStream.restype = ctypes.c_size_t
        lib.ZSTD_decompressStream.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        lib.ZSTD_decompressStream.restype = ctypes.c_size_t
        lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        lib.ZSTD_isError.restype = ctypes.c_uint
        lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
        lib.ZSTD_getErrorName.restype = ctypes.c_char_p
        self.lib = lib

    def decompress(self, data):
        lib = self.lib
        stream = lib.ZSTD_createDStream()
        if not stream:
            raise BadRequest("zstd: cannot create a stream")
        try:
            lib.ZSTD_initDStream(stream)
            source = ctypes.create_string_buffer(data, len(data))
            inp = self.Buffer(ctypes.cast(source, ctypes.c_void_p), len(data), 0)
            chunk = ctypes.create_string_buffer(1 << 17)
            out_parts = []
            last = 1
            while inp.pos < inp.size or last != 0:
                out = self.Buffer(ctypes.cast(chunk, ctypes.c_void_p), len(chunk), 0)
                last = lib.ZSTD_decompressStream(stream, ctypes.byref(out), ctypes.byref(inp))
                if lib.ZSTD_isError(last):
                    raise BadRequest("zstd: " + lib.ZSTD_getErrorName(last).decode())
                out_parts.append(chunk.raw[: out.pos])
                if inp.pos == inp.size and last != 0 and out.pos == 0:
                    raise BadRequest("zstd: the frame is cut short")
            return b"".join(out_parts)
        finally:
            lib.ZSTD_freeDStream(stream)


def decompress_zstd(data):
    try:
        from compression import zstd  # Python 3.14+

        return zstd.decompress(data)
    except ImportError:
        return ZstdDecoder().decompress(data)
    except Exception as e:  # zstd.ZstdError
        raise BadRequest("zstd: %s" % e)


def decode_body(data, content_encoding):
    """The body without its Content-Encoding (codings applied in order, so undone in reverse)."""
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    for coding in reversed(codings):
        try:
            if coding in ("gzip", "x-gzip"):
                data = gzip.decompress(data)
            elif coding == "deflate":
                data = zlib.decompress(data)
            elif coding == "zstd":
                data = decompress_zstd(data)
            elif coding != "identity":
                raise BadRequest("unsupported Content-Encoding %r" % coding)
        except (OSError, EOFError, zlib.error) as e:
            raise BadRequest("%s body does not decompress: %s" % (coding, e))
    return data


class State:
    """Everything the control API reads and writes, behind one lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # a held request was forwarded
        self.stopping = threading.Event()
        self.held_total = 0
        self.reset()

    def reset(self):
        self.rules = []
        self.default = dict(DEFAULT_ANSWER)
        self.records = []
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.duplicates = 0
        self.idempotency_header = None
        self.stored_answers = {}
        self.forward_to = None
        self.held = {}  # id -> {"id", "record", "release": Event, "socket", "status"}
        self.applied_late = 0
        self.late_answers = {}

    def take_rule(self, method, path, wire_size, body=b"", query=""):
        """The first rule matching this request, with its use counted."""
        for rule in self.rules:
            if rule.get("path_contains") is not None and rule["path_contains"] not in path + ("?" + query if query else ""):
                continue
            if rule.get("method") and rule["method"].upper() != method:
                continue
            pattern = rule.get("path", "*")
            if pattern.endswith("*"):
                if not path.startswith(pattern[:-1]):
                    continue
            elif pattern != path:
                continue
            if rule.get("when_body_over") is not None and wire_size <= int(rule["when_body_over"]):
                continue
            if rule.get("when_body_contains") is not None and rule["when_body_contains"].encode() not in body:
                continue
            if rule.get("share") is not None and random.random() >= float(rule["share"]):
                continue
            if rule["left"] is not None:
                rule["left"] -= 1
                if rule["left"] == 0:
                    self.rules.remove(rule)
            return rule
        return None


def checked_rule(rule):
    if not isinstance(rule, dict):
        raise BadRequest("a rule is a JSON object")
    known = {"path", "path_contains", "method", "count", "share", "when_body_over", "when_body_contains", "status", "headers",
             "body", "delay", "action", "forward", "release_after"}
    unknown = set(rule) - known
    if unknown:
        raise BadRequest("unknown rule fields: %s" % ", ".join(sorted(unknown)))
    if rule.get("action", "respond") not in ACTIONS:
        raise BadRequest("action must be one of %s" % ", ".join(ACTIONS))
    rule = dict(rule)
    count = rule.get("count", 1)
    rule["left"] = None if not count else int(count)
    return rule


def client_gone(sock):
    """Whether the client closed its connection (or its process died) while its request waited."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "picomq-http-receiver"
    state = None  # set by main()
    verbose = False

    # ---- plumbing

    def setup(self):
        super().setup()
        self.connection_id = None  # numbered at its first recorded request: control-only ones do not count
        self.was_reset = False

    def finish(self):
        if self.was_reset:
            return  # the socket is gone: nothing to flush
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format, *args):
        if self.verbose:
            sys.stderr.write("receiver: %s\n" % (format % args))

    def read_body(self):
        """(body bytes, chunked?) from Content-Length or chunked transfer coding (RFC 9112 7.1)."""
        transfer_encoding = self.headers.get("Transfer-Encoding")
        length = self.headers.get("Content-Length")
        if transfer_encoding is not None:
            if length is not None:
                raise BadRequest("both Transfer-Encoding and Content-Length")  # RFC 9112 6.1
            if transfer_encoding.strip().lower() != "chunked":
                raise BadRequest("unsupported Transfer-Encoding %r" % transfer_encoding)
            parts, total = [], 0
            while True:
                line = self.rfile.readline(65537)
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise BadRequest("bad chunk size line %r" % line[:40])
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailer fields
                    return b"".join(parts), True
                total += size
                if total > MAX_BODY:
                    raise BadRequest("body over %d bytes" % MAX_BODY)
                parts.append(self.rfile.read(size))
                if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                    raise BadRequest("chunk not followed by CRLF")
        if length is None:
            return b"", False
        if not length.strip().isdigit() or int(length) > MAX_BODY:
            raise BadRequest("bad Content-Length %r" % length)
        body = self.rfile.read(int(length))
        if len(body) != int(length):
            raise BadRequest("body shorter than its Content-Length")
        return body, False

    def send_answer(self, status, headers, body, head=False):
        payload = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        names = {name.lower() for name in headers}
        for name, value in headers.items():
            self.send_header(name, str(value))
        if "content-length" not in names:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if not head:
            self.wfile.write(payload)

    def reset_connection(self):
        """RST instead of FIN: linger on, timeout 0, then close."""
        try:
            self.wfile.flush()
        except OSError:
            pass
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.was_reset = True
        self.close_connection = True

    def reply_json(self, status, value):
        self.send_answer(status, {"Content-Type": "application/json"}, json.dumps(value))

    # ---- requests

    def handle_any(self):
        url = urlsplit(self.path)
        if url.path.startswith("/_control/"):
            return self.control(url)
        state = self.state
        with state.lock:
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            self.serve(url)
        finally:
            with state.lock:
                state.in_flight -= 1

    def serve(self, url):
        state = self.state
        try:
            wire, chunked = self.read_body()
            encoding = self.headers.get("Content-Encoding")
            body = decode_body(wire, encoding)
            problem = None
        except BadRequest as e:
            wire, chunked, body, encoding, problem = b"", False, b"", self.headers.get("Content-Encoding"), str(e)
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        record = {
            "method": self.command,
            "path": url.path,
            "query": url.query,
            "headers": [[name, value] for name, value in self.headers.items()],
            "body": text,
            "body_base64": base64.b64encode(body).decode(),
            "wire_size": len(wire),
            "content_encoding": encoding,
            "chunked": chunked,
            "connection": None,
            "duplicate": False,
            "answer": None,
        }
        with state.lock:
            if self.connection_id is None:
                state.connections += 1
                self.connection_id = state.connections
            record["connection"] = self.connection_id
            state.records.append(record)
            key = self.headers.get(state.idempotency_header) if state.idempotency_header else None
            stored = state.stored_answers.get(key) if key is not None else None
            if stored is not None:
                state.duplicates += 1
                record["duplicate"] = True
            rule = None if (stored is not None or problem) else state.take_rule(self.command, url.path, len(wire), body, url.query)
            default = dict(state.default)
            forward_to = state.forward_to
        if problem:
            record["answer"] = 400
            self.close_connection = True  # the framing of what follows is not to be trusted
            return self.send_answer(400, {"Content-Type": "text/plain"}, problem + "\n")
        if stored is not None:
            record["answer"] = stored["status"]
            return self.send_answer(stored["status"], stored["headers"], stored["body"], self.command == "HEAD")

        if rule is not None and rule.get("action") == "hold":
            return self.hold(rule, record, url, wire, forward_to)
        if forward_to and (rule is None or rule.get("forward")):
            try:
                upstream = self.forward(forward_to, url, wire)
            except OSError as e:
                upstream = (502, {"Content-Type": "text/plain"}, ("forward to %s failed: %s\n" % (forward_to, e)).encode())
            if rule is None:
                record["answer"] = upstream[0]
                return self.send_answer(*upstream, head=self.command == "HEAD")
        rule = rule or {}
        status = int(rule.get("status", default["status"]))
        headers = rule.get("headers", {} if "status" in rule else default["headers"])
        body_out = rule.get("body", "" if "status" in rule else default["body"])
        action = rule.get("action", "respond")
        delay = float(rule.get("delay", 0))
        if key is not None and status < 500 and status not in (408, 429):
            with state.lock:
                state.stored_answers.setdefault(key, {"status": status, "headers": headers, "body": body_out})
        record["answer"] = status if action == "respond" else action

        if delay and action != "stall_body" and state.stopping.wait(delay):
            return self.reset_connection()
        if action == "reset":
            return self.reset_connection()
        if action == "close":
            self.close_connection = True
            return
        if action == "reset_mid_response":
            payload = (body_out or "x" * 64).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, str(value))
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            state.stopping.wait(0.2)  # let the client read what was sent before the RST
            return self.reset_connection()
        if action == "stall_body":
            payload = body_out.encode() if body_out else b"{}"
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, str(value))
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.flush()
            if state.stopping.wait(delay):
                return self.reset_connection()
            self.wfile.write(payload)
            return
        self.send_answer(status, headers, body_out, self.command == "HEAD")

    def hold(self, rule, record, url, wire, target):
        """Keeps the request until it is released (or release_after passed), then forwards it."""
        state = self.state
        if not target:
            record["answer"] = 500
            return self.send_answer(500, {"Content-Type": "text/plain"}, "a hold rule needs a forward target\n")
        with state.lock:
            state.held_total += 1
            entry = {"id": state.held_total, "record": record, "release": threading.Event(), "socket": self.connection,
                     "status": None}
            state.held[entry["id"]] = entry
            record["held"] = entry["id"]
        after = rule.get("release_after")
        if isinstance(after, list):
            after = random.uniform(float(after[0]), float(after[1]))
        entry["release"].wait(float(after) if after is not None else None)
        with state.lock:
            state.held.pop(entry["id"], None)
        gone = client_gone(self.connection)
        try:
            upstream = self.forward(target, url, wire)
        except OSError as e:
            upstream = (502, {"Content-Type": "text/plain"}, ("forward to %s failed: %s\n" % (target, e)).encode())
        with state.lock:
            entry["status"] = upstream[0]
            record["answer"] = upstream[0]
            record["late"] = gone
            if gone:
                state.applied_late += 1
                state.late_answers[str(upstream[0])] = state.late_answers.get(str(upstream[0]), 0) + 1
            state.changed.notify_all()
        if gone:
            self.close_connection = True
            return
        try:
            self.send_answer(*upstream, head=self.command == "HEAD")
        except OSError:
            self.close_connection = True

    def forward(self, target, url, wire):
        """(status, headers, body) of the forward target's answer to this request."""
        parts = urlsplit(target)
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=60)
        try:
            # Host as received: a signed request (SigV4 signs it) stays valid through the proxy.
            skip = {"content-length", "transfer-encoding", "connection", "keep-alive"}
            headers = {name: value for name, value in self.headers.items() if name.lower() not in skip}
            target_path = url.path + ("?" + url.query if url.query else "")
            conn.request(self.command, target_path, body=wire if (wire or self.command in ("POST", "PUT", "PATCH")) else None,
                         headers=headers)
            response = conn.getresponse()
            body = response.read()
            hop = {"transfer-encoding", "connection", "keep-alive", "content-length"}
            return response.status, {n: v for n, v in response.getheaders() if n.lower() not in hop}, body
        finally:
            conn.close()

    def control(self, url):
        state = self.state
        try:
            body, _ = self.read_body()
            value = json.loads(body) if body else None
        except (BadRequest, ValueError) as e:
            return self.reply_json(400, {"error": str(e)})
        name = url.path[len("/_control/"):]
        try:
            with state.lock:
                if self.command == "POST" and name == "script":
                    rules = value if isinstance(value, list) else [value]
                    state.rules.extend(checked_rule(rule) for rule in rules)
                    return self.reply_json(200, {"rules": len(state.rules)})
                if self.command == "POST" and name == "default":
                    if not isinstance(value, dict):
                        raise BadRequest("the default answer is a JSON object")
                    state.default = {
                        "status": int(value.get("status", 200)),
                        "headers": value.get("headers", {}),
                        "body": value.get("body", ""),
                    }
                    return self.reply_json(200, state.default)
                if self.command == "POST" and name == "idempotency":
                    if not isinstance(value, dict) or "header" not in value:
                        raise BadRequest('expected {"header": name or null}')
                    state.idempotency_header = value["header"]
                    return self.reply_json(200, {"header": state.idempotency_header})
                if self.command == "POST" and name == "forward":
                    if not isinstance(value, dict) or "to" not in value:
                        raise BadRequest('expected {"to": URL or null}')
                    state.forward_to = value["to"]
                    return self.reply_json(200, {"to": state.forward_to})
                if self.command == "POST" and name == "reset":
                    state.reset()
                    return self.reply_json(200, {})
                if self.command == "GET" and name == "requests":
                    only = parse_qs(url.query).get("path")
                    records = [r for r in state.records if not only or r["path"] == only[0]]
                    return self.reply_json(200, records)
                if self.command == "GET" and name == "stats":
                    return self.reply_json(200, {
                        "requests": len(state.records),
                        "connections": state.connections,
                        "in_flight": state.in_flight,
                        "max_in_flight": state.max_in_flight,
                        "duplicates": state.duplicates,
                        "held": state.held_total,
                        "held_now": len(state.held),
                        "applied_late": state.applied_late,
                        "late_answers": state.late_answers,
                    })
                if self.command == "GET" and name == "held":
                    return self.reply_json(200, [
                        {"id": e["id"], "method": e["record"]["method"], "path": e["record"]["path"],
                         "query": e["record"]["query"], "client_gone": client_gone(e["socket"])}
                        for e in sorted(state.held.values(), key=lambda e: e["id"])])
                if self.command == "POST" and name == "release":
                    ids = (value or {}).get("ids") or sorted(state.held)
                    entries = [state.held.pop(i) for i in ids if i in state.held]
                    out = []
                    for e in entries:  # in order: each is answered before the next goes
                        e["release"].set()
                        state.changed.wait_for(lambda: e["status"] is not None, timeout=120)
                        out.append({"id": e["id"], "status": e["status"]})
                    return self.reply_json(200, out)
        except BadRequest as e:
            return self.reply_json(400, {"error": str(e)})
        return self.reply_json(404, {"error": "no control endpoint %s %s" % (self.command, url.path)})

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler asleep in a delay does not hold up the exit
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        if Handler.verbose:
            super().handle_error(request, client_address)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--exit-on-stdin-eof", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    state = State()
    Handler.state = state
    Handler.verbose = args.verbose
    server = Server((args.host, args.port), Handler)

    def stop(*_):
        state.stopping.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.exit_on_stdin_eof:
        def watch_stdin():
            while os.read(sys.stdin.fileno(), 4096):
                pass
            stop()

        threading.Thread(target=watch_stdin, daemon=True).start()

    print(server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.2)
    server.server_close()


if __name__ == "__main__":
    main()
