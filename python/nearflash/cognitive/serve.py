"""Served mode: an HTTP retrieval endpoint in front of a :class:`CognitiveSSD` (the paper's Sec. 5.5 web service,
there built on CROW and load-tested with ApacheBench). The standard library's ``ThreadingHTTPServer`` serves; one
lock serialises the device, as the single DLG-x does.

Endpoints:

- ``POST /search?t=T``: the body is one query image, one of
    - 784 raw bytes (a 28 x 28 uint8 image, row-major), any Content-Type;
    - a ``.npy`` file (``np.save``) of a uint8 array of shape (784,), (28, 28), (1, 784) or (1, 28, 28);
    - a ``.png`` file of a 28 x 28 8-bit greyscale image (mode ``L``).
  The format is recognised by the body's first bytes (the NumPy and PNG magic numbers), not by the Content-Type.
  Answer (200, JSON): ``ids`` (the top-T database ids, nearest first, as ``CognitiveSSD.search``), ``t``,
  ``device_latency_us`` (modelled device time of DLG_hashing + DLG_index), ``device_times_us`` (per command) and
  ``wall_ms`` (time in the server, waiting for the device included).
  An optional ``label=L`` (the query's class, 0-255) counts toward the precision in ``/stats``.
- ``GET /stats``: counters (requests, answers by status, searches, device and wall time in total, the extension's
  counters) and the answers' quality against brute force on the same codes (``quality``: mean recall of brute
  force's top-T, as id sets and with ties at equal distance interchangeable; precision@T of the answers and of
  brute force over the searches that gave a label, where the database's labels are known). The host hashes each
  query with DLG-x's arithmetic (bit-identical) after the answer is sent, so the check costs the client nothing.

Bad input gets a JSON ``{"error": ...}`` naming what was wrong: 400 (wrong body size or format, T missing, not an
integer, 0, or above the database size; a malformed request line or header), 404 (unknown path), 405 (wrong method;
``Allow`` names the right one), 411 (no Content-Length), 413 (body above :data:`MAX_BODY`), 408 (the body stops
coming for ``timeout`` seconds), 414/431/505/501 (request line or headers too long, HTTP version or method not
supported). An unexpected exception answers 500 and the server goes on.

Connections: HTTP/1.1 keeps them open unless the client says ``Connection: close``; HTTP/1.0 keeps one open only
when asked (``Connection: keep-alive``, as ``ab -k`` does) and says so in the answer. The listen backlog
(``backlog``, 128 by default; the standard library's is 5) takes a burst of concurrent connects without the kernel
dropping them.
"""

from __future__ import annotations

import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

import numpy as np

from nearflash import _native

#: Largest request body read (bytes); a PNG or .npy of one 28 x 28 image is far below it.
MAX_BODY = 1 << 20
SIDE = 28
NPY_MAGIC = b"\x93NUMPY"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def whole_number(s: str) -> bool:
    """ASCII digits only (``str.isdigit`` also takes superscripts and other scripts' digits, which ``int`` refuses)."""
    return s.isascii() and s.isdigit()


class BadRequest(Exception):
    """A request the service refuses: HTTP ``status`` and a message for the client."""

    def __init__(self, status: int, message: str, allow: Optional[str] = None) -> None:
        super().__init__(message)
        self.status, self.allow = status, allow


def decode_image(body: bytes) -> np.ndarray:
    """One 28 x 28 uint8 image (784,) from a request body: raw bytes, .npy or .png (see the module's docstring)."""
    n = SIDE * SIDE
    if body.startswith(NPY_MAGIC):
        try:
            a = np.load(io.BytesIO(body), allow_pickle=False)
        except Exception as e:  # a damaged header or truncated data: np.load raises several kinds
            raise BadRequest(400, f"body: a damaged .npy file ({e})") from None
        if not isinstance(a, np.ndarray) or a.dtype != np.uint8:
            raise BadRequest(400, f"body: a .npy array of dtype {getattr(a, 'dtype', type(a).__name__)}; uint8 expected")
        if a.shape not in ((n,), (SIDE, SIDE), (1, n), (1, SIDE, SIDE)):
            raise BadRequest(400, f"body: a .npy array of shape {a.shape}; (784,), (28, 28), (1, 784) or (1, 28, 28) "
                                  "expected")
        return np.ascontiguousarray(a).reshape(n)
    if body.startswith(PNG_MAGIC):
        from PIL import Image  # Pillow comes with matplotlib, a dependency

        try:
            img = Image.open(io.BytesIO(body))
            img.load()
        except Exception as e:  # Pillow raises OSError, SyntaxError, ValueError... on damaged files
            raise BadRequest(400, f"body: a damaged .png file ({e})") from None
        if img.size != (SIDE, SIDE):
            raise BadRequest(400, f"body: a {img.size[0]}x{img.size[1]} .png; 28x28 expected")
        if img.mode != "L":
            raise BadRequest(400, f"body: a .png of mode {img.mode}; 8-bit greyscale (mode L) expected")
        return np.asarray(img, dtype=np.uint8).reshape(n).copy()
    if len(body) != n:
        raise BadRequest(400, f"body: {len(body)} bytes; one 28x28 uint8 image is 784 raw bytes (or send .npy / .png)")
    return np.frombuffer(body, dtype=np.uint8).copy()


def parse_label(query: str) -> Optional[int]:
    """The query's class from ``label=`` (0-255), if given."""
    values = parse_qs(query, keep_blank_values=True).get("label")
    if not values:
        return None
    if len(values) > 1 or not whole_number(values[0].strip()) or int(values[0]) > 255:
        raise BadRequest(400, f"label: {values!r}; one class number from 0 to 255")
    return int(values[0])


def parse_t(query: str, database: int) -> int:
    """T from the query string (``t=``), 1 to the database size."""
    values = parse_qs(query, keep_blank_values=True).get("t")
    if not values:
        raise BadRequest(400, f"t: missing; add ?t=T with T from 1 to {database} (the database size)")
    if len(values) > 1:
        raise BadRequest(400, "t: given more than once")
    s = values[0].strip()
    if not whole_number(s):  # also refuses signs, blanks, exponents and non-ASCII digits
        raise BadRequest(400, f"t: {values[0]!r} is not a whole number; T from 1 to {database}")
    t = int(s)
    if not 1 <= t <= database:
        raise BadRequest(400, f"t: {t}; T from 1 to {database} (the database size)")
    return t


class RetrievalService:
    """The state behind the endpoint: the device, its lock, the counters and the quality check (``labels``: the
    database's classes, for precision)."""

    def __init__(self, ssd: Any, labels: Optional[np.ndarray] = None) -> None:
        if ssd.index is None:
            raise ValueError("ssd: deploy(model, database) first")
        self.ssd = ssd
        self.database = len(ssd.index)
        if labels is not None and len(labels) != self.database:
            raise ValueError(f"labels: {len(labels)}; one per database image ({self.database})")
        self.labels = labels
        self.lock = threading.Lock()
        self.started = time.time()
        self.counters: dict[str, Any] = {"requests": 0, "searches": 0, "by_status": {}, "device_ns": 0,
                                         "wall_s": 0.0}
        self.quality: dict[str, float] = {"checked": 0, "recall_ids": 0.0, "recall_ties": 0.0, "labelled": 0,
                                          "precision": 0.0, "precision_brute_force": 0.0}

    def check(self, image: np.ndarray, t: int, ids: list[int], label: Optional[int]) -> None:
        """Adds one answer to the quality counters: brute force's top-T on the same codes (the query hashed on the
        host with DLG-x's arithmetic), recall, and precision if the query's and the database's labels are known."""
        index = self.ssd.index
        code = int(index.hash(image[None, :])[0])
        bf = _native.cognitive.brute_force(index.codes, code, t)
        got = np.asarray(ids, dtype=np.uint32)
        q = {"recall_ids": len(np.intersect1d(got, bf)) / t,
             "recall_ties": _native.cognitive.distance_recall(index.codes, code, got, bf)}
        if label is not None and self.labels is not None:
            q["precision"] = float((self.labels[got] == label).mean())
            q["precision_brute_force"] = float((self.labels[bf] == label).mean())
        with self.lock:
            self.quality["checked"] += 1
            self.quality["labelled"] += "precision" in q
            for k, v in q.items():
                self.quality[k] += v

    def search(self, image: np.ndarray, t: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        with self.lock:
            ids = self.ssd.search(image[None, :], t)[0]
            device_ns, times = self.ssd.last_latency_ns, dict(self.ssd.last_times)
        wall = time.perf_counter() - t0
        with self.lock:
            self.counters["searches"] += 1
            self.counters["device_ns"] += device_ns
            self.counters["wall_s"] += wall
        return {"t": t, "ids": [int(i) for i in ids], "device_latency_us": device_ns / 1e3,
                "device_times_us": {k: v / 1e3 for k, v in times.items()}, "wall_ms": wall * 1e3}

    def count(self, status: int) -> None:
        with self.lock:
            self.counters["requests"] += 1
            by = self.counters["by_status"]
            by[str(status)] = by.get(str(status), 0) + 1

    def stats(self) -> dict[str, Any]:
        with self.lock:
            c = json.loads(json.dumps(self.counters))
            ext = self.ssd.report().get("stats", {})
            qc = dict(self.quality)
        n = c["searches"]
        checked, labelled = qc.pop("checked"), qc.pop("labelled")
        quality = {"checked": checked, "labelled": labelled}
        for k, v in qc.items():
            count = labelled if k.startswith("precision") else checked
            quality[k] = v / count if count else None
        return {**c, "uptime_s": time.time() - self.started, "database": self.database,
                "layout": self.ssd.layout, "bits": self.ssd.index.bits,
                "mean_device_latency_us": c["device_ns"] / n / 1e3 if n else None,
                "mean_wall_ms": c["wall_s"] / n * 1e3 if n else None, "quality": quality, "extension": ext}


ROUTES = {"/search": "POST", "/stats": "GET"}


class Handler(BaseHTTPRequestHandler):
    server_version = "nearflash-cognitive/1"
    protocol_version = "HTTP/1.1"
    service: RetrievalService  # set on the subclass made by make_server
    verbose = False
    #: Whether each answer is checked against brute force on the host (``/stats`` quality).
    audit = True
    #: Seconds a connection may stay silent (socket timeout): a client that stops sending holds a thread no longer.
    timeout: float = 10.0

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        if self.verbose:
            super().log_message(format, *args)

    def _send(self, status: int, body: dict[str, Any], allow: Optional[str] = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if allow:
            self.send_header("Allow", allow)
        # say what happens to the connection: an HTTP/1.0 client (ab -k) only keeps it if told, and waits for the
        # close otherwise
        if self.close_connection:
            self.send_header("Connection", "close")
        elif self.request_version == "HTTP/1.0":
            self.send_header("Connection", "keep-alive")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.service.count(status)

    def send_error(self, code: int, message: Optional[str] = None, explain: Optional[str] = None) -> None:
        """The standard library's refusals (malformed request line or headers, unsupported version or method) as
        JSON like the others, on a connection that then closes."""
        if self.request_version == "HTTP/0.9":  # no version parsed yet: answer with a status line all the same
            self.request_version = "HTTP/1.0"
        self.close_connection = True
        try:
            self._send(int(code), {"error": message or explain or "bad request"})
        except OSError:
            pass  # the client is gone

    def _body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            self.close_connection = True
            raise BadRequest(411, "Content-Length: required (send the image as the body)")
        if not whole_number(length.strip()):
            self.close_connection = True
            raise BadRequest(400, f"Content-Length: {length!r} is not a whole number")
        n = int(length)
        if n > MAX_BODY:
            self.close_connection = True  # the body is not read
            raise BadRequest(413, f"body: {n} bytes; at most {MAX_BODY}")
        try:
            body = self.rfile.read(n)
        except TimeoutError:
            self.close_connection = True
            raise BadRequest(408, f"body: not all of the {n} bytes of Content-Length came within {self.timeout} s") from None
        if len(body) < n:
            self.close_connection = True
            raise BadRequest(400, f"body: the connection ended after {len(body)} of the {n} bytes of Content-Length")
        return body

    def _handle(self, method: str) -> None:
        try:
            url = urlsplit(self.path)
            want = ROUTES.get(url.path)
            if want is None:
                raise BadRequest(404, f"{url.path}: no such endpoint; POST /search?t=T or GET /stats")
            if method != want:
                self.close_connection = True  # a body sent with it is not read
                raise BadRequest(405, f"{method} {url.path}: use {want}", allow=want)
            if url.path == "/stats":
                self._send(200, self.service.stats())
                return
            body = self._body()  # read first, so that a refusal leaves the connection usable
            t = parse_t(url.query, self.service.database)
            label = parse_label(url.query)
            image = decode_image(body)
            answer = self.service.search(image, t)
            self._send(200, answer)
            if self.audit:
                self.service.check(image, t, answer["ids"], label)
        except BadRequest as e:
            self._send(e.status, {"error": str(e)}, e.allow)
        except ConnectionError:  # the client closed or reset its connection: no one to answer, nothing went wrong
            self.close_connection = True
        except Exception as e:  # never take the server down; the client learns what happened
            self.close_connection = True
            try:
                self._send(500, {"error": f"internal error: {type(e).__name__}: {e}"})
            except ConnectionError:
                pass  # and is gone

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's names)
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._handle("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._handle("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle("PATCH")

    def do_HEAD(self) -> None:  # noqa: N802
        self._handle("HEAD")


class RetrievalServer(ThreadingHTTPServer):
    """A thread per connection, behind a listen backlog of ``backlog`` connects."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type, backlog: int) -> None:
        self.request_queue_size = backlog  # read by server_activate's listen()
        super().__init__(address, handler)


def make_server(ssd: Any, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False,
                timeout: float = 10.0, backlog: int = 128, labels: Optional[np.ndarray] = None,
                audit: bool = True) -> RetrievalServer:
    """An HTTP server (not yet serving) for the deployed ``ssd``; port 0 picks a free port
    (``server.server_address``). Call ``serve_forever()`` (in a thread if need be) and ``shutdown()``. ``timeout``:
    seconds a connection may stay silent before it is answered 408 or dropped; ``backlog``: connects the kernel
    queues before the server accepts them; ``labels``: the database's classes (for precision in ``/stats``);
    ``audit``: check each answer against brute force (``/stats`` quality)."""
    if not timeout > 0:
        raise ValueError(f"timeout: {timeout}; seconds above 0")
    if isinstance(backlog, bool) or not isinstance(backlog, int) or not 1 <= backlog <= 65535:
        raise ValueError(f"backlog: {backlog!r}; connects from 1 to 65535")
    service = RetrievalService(ssd, labels)
    handler = type("CognitiveHandler", (Handler,), {"service": service, "verbose": verbose, "timeout": timeout,
                                                    "audit": audit})
    server = RetrievalServer((host, port), handler, backlog)
    server.service = service  # type: ignore[attr-defined]
    return server
