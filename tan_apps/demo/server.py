"""The demo's HTTP side, on the standard library: the page's files, its JSON calls, uploads,
and the videos themselves with byte ranges (so that the page's player can seek).

Another web site open in the same browser must not drive the server. Calls that make it work
(grounding, uploads) must carry a JSON content type or a custom header, which a browser sends
across sites only after asking, and this server never agrees; and while it listens on the
loopback address it answers only requests addressed to a loopback name, so a site whose name
is made to point at 127.0.0.1 (DNS rebinding) is refused too."""
import ipaddress
import json
import logging
import mimetypes
import os
import re
import socket
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from tan.errors import TanError
from tan.utils.logger import get_logger

PAGE_FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "page")
PAGE_FILES = {"index.html": "text/html; charset=utf-8", "demo.js": "text/javascript; charset=utf-8",
              "demo.css": "text/css; charset=utf-8"}
VIDEO_TYPES = {".mkv": "video/x-matroska", ".ts": "video/mp2t", ".m4v": "video/mp4", ".webm": "video/webm"}
MAX_JSON_BYTES = 1 << 20
SEND_CHUNK = 1 << 16
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")
IDLE_SECONDS = 300  # a connection silent this long (a stalled upload) is closed
logger = get_logger("demo")


class DemoServer(ThreadingHTTPServer):
    """A threaded HTTP server over a DemoSession; each request in its own thread."""
    daemon_threads = True

    def __init__(self, host, port, session):
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), DemoHandler)
        self.session = session
        self.loopback = ipaddress.ip_address(self.server_address[0]).is_loopback

    @property
    def url(self):
        host, port = self.server_address[:2]
        host = "localhost" if host in ("127.0.0.1", "::1") else host
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


class DemoHandler(BaseHTTPRequestHandler):
    server_version = "tan-demo"
    protocol_version = "HTTP/1.1"
    timeout = IDLE_SECONDS

    def do_GET(self):
        self._answer(self._get)

    def do_HEAD(self):
        self._answer(self._get)

    def do_POST(self):
        self._answer(self._post)

    def _get(self, path):
        session = self.server.session
        if path in ("/", "/index.html"):
            return self._page("index.html")
        if path.startswith("/page/"):
            return self._page(path[len("/page/"):])
        if path == "/api/offer":
            return self._json(session.offer())
        if path.startswith("/api/checkpoints/"):
            return self._json(session.checkpoint_info(path.rsplit("/", 1)[1]))
        if path.startswith("/videos/"):
            return self._video(session.videos.get(path.rsplit("/", 1)[1]).path)
        return self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}")

    def _post(self, path):
        session = self.server.session
        if path == "/api/ground":
            question = self._json_body()
            return self._json(session.ground(question.get("checkpoint"), question.get("video"),
                                             question.get("sentences"), question.get("topk", 5)))
        if path == "/api/upload":
            name = self.headers.get("X-File-Name")
            if not name:
                raise TanError("an upload names its file in the X-File-Name header")
            video = session.videos.receive(unquote(name), self.rfile, self._length())
            logger.info("received %s (%d bytes) as %s", video.name, os.path.getsize(video.path), video.path)
            return self._json({"video": video.as_json()})
        return self._fail(HTTPStatus.NOT_FOUND, f"no such call: POST {path}")

    def _answer(self, route):
        """Run ``route``; a user's mistake (TanError) is a 400 whose JSON says what was wrong."""
        self._answered = False
        try:
            if not self._addressed_to_us():
                return self._fail(HTTPStatus.FORBIDDEN, "this server answers requests addressed to localhost or to an IP address only")
            route(urlsplit(self.path).path)
        except TanError as e:
            self._fail(HTTPStatus.BAD_REQUEST, str(e))
        except (ConnectionError, TimeoutError, socket.timeout):  # the page went away (a seek cancels a video
            self.close_connection = True                           # request) or stalled
        except Exception as e:  # a bug: the page says so, the console has the traceback
            logger.exception("%s %s failed", self.command, self.path)
            self._fail(HTTPStatus.INTERNAL_SERVER_ERROR, f"the demo failed: {type(e).__name__}: {e}")

    def _addressed_to_us(self):
        """Any Host while listening on an outside address; on the loopback, an address (which no
        DNS answer can put there) or localhost."""
        if not self.server.loopback:
            return True
        host = (self.headers.get("Host") or "").strip().lower()
        if host.startswith("["):
            host = host[1:].split("]", 1)[0]
        elif host.count(":") == 1:
            host = host.split(":", 1)[0]
        if host == "localhost" or host.endswith(".localhost"):
            return True
        try:
            ipaddress.ip_address(host)
            return True
        except ValueError:
            return False

    def send_response(self, code, message=None):
        self._answered = True
        super().send_response(code, message)

    def _fail(self, status, message):
        """An error answer, and the connection closed: what is left of the request's body (a refused
        upload) goes unread. Nothing is sent once an answer has begun (a video cut short)."""
        self.close_connection = True
        if self._answered:
            return
        try:
            self._error(status, message)
        except (ConnectionError, TimeoutError, socket.timeout):
            pass

    def _length(self):
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise TanError("the request gives no Content-Length") from None
        if length < 0:
            raise TanError(f"Content-Length {length}: expected 0 or more")
        return length

    def _json_body(self):
        if self.headers.get_content_type() != "application/json":
            raise TanError("this call takes a JSON body (Content-Type: application/json)")
        length = self._length()
        if length > MAX_JSON_BYTES:
            raise TanError(f"a request of {length} bytes: at most {MAX_JSON_BYTES}")
        try:
            body = json.loads(self.rfile.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TanError(f"the request's body is not JSON ({e})") from None
        if not isinstance(body, dict):
            raise TanError("the request's body must be a JSON object")
        return body

    def _page(self, name):
        if name not in PAGE_FILES:
            return self._error(HTTPStatus.NOT_FOUND, f"no such page file: {name}")
        with open(os.path.join(PAGE_FOLDER, name), "rb") as f:
            self._send(HTTPStatus.OK, f.read(), PAGE_FILES[name], {"Cache-Control": "no-cache"})

    def _json(self, value):
        self._send(HTTPStatus.OK, json.dumps(value).encode(), "application/json")

    def _error(self, status, message):
        self._send(status, json.dumps({"error": message}).encode(), "application/json")

    def _send(self, status, body, content_type, headers=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _video(self, path):
        """The file, or the byte range asked for (206), as players ask when they seek."""
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            raise TanError(f"the video file {path!r} is no longer there") from None
        start, end, status = 0, size - 1, HTTPStatus.OK
        asked = _byte_range(self.headers.get("Range"), size)
        if asked == "unsatisfiable":
            self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            return self.end_headers()
        if asked:
            (start, end), status = asked, HTTPStatus.PARTIAL_CONTENT
        self.send_response(status)
        kind = VIDEO_TYPES.get(os.path.splitext(path)[1].lower()) or mimetypes.guess_type(path)[0]
        self.send_header("Content-Type", kind or "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start + 1))
        if status == HTTPStatus.PARTIAL_CONTENT:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if self.command == "HEAD":
            return
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = f.read(min(SEND_CHUNK, left))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)

    def log_message(self, format, *args):  # noqa: A002 (the base class's name): requests at debug level
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s %s", self.address_string(), format % args)


def _byte_range(header, size):
    """(first, last) byte of a Range header's one range, "unsatisfiable" when it starts past the end,
    None for no header or one to ignore (another unit, several ranges, malformed: RFC 9110 says
    to answer those with the whole file)."""
    match = _RANGE.fullmatch((header or "").strip())
    if not match or not (match.group(1) or match.group(2)):
        return None
    if not match.group(1):  # the last N bytes
        length = int(match.group(2))
        return (max(size - length, 0), size - 1) if length and size else "unsatisfiable"
    first, last = int(match.group(1)), int(match.group(2)) if match.group(2) else size - 1
    if first >= size:
        return "unsatisfiable"
    return (first, min(last, size - 1)) if last >= first else None
