"""A client of cairnd's socket API: HTTP/1.1 + JSON over a Unix domain socket
(protocol/socket-api.md), written with the standard library only."""

from __future__ import annotations

import http.client
import json
import math
import os
import selectors
import socket as _socket
from typing import Any, Dict, Iterable, Optional, Union
from urllib.parse import quote

from .errors import CairnError, CairnUnavailable
from .models import Chunk, SearchAnswer, Status

__all__ = ["Cairn", "DEFAULT_SOCKET", "default_socket"]

#: cairnd's socket when neither an explicit path nor ``CAIRN_SOCKET`` is given.
DEFAULT_SOCKET = "/run/cairn/cairnd.sock"

_USER_AGENT = "cairn-client-python/0.1.0"

_HINT = "start cairnd, or set CAIRN_SOCKET to the path of its socket"


def default_socket() -> str:
    """``$CAIRN_SOCKET`` when set and not empty, else ``/run/cairn/cairnd.sock``."""
    return os.environ.get("CAIRN_SOCKET") or DEFAULT_SOCKET


class _UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection whose transport is a Unix domain socket (the Host header is
    ``localhost``; cairnd ignores it)."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.unix_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class Cairn:
    """A client of one cairnd.

    ``socket`` is the path of cairnd's Unix socket (default: ``$CAIRN_SOCKET``, else
    ``/run/cairn/cairnd.sock``); ``timeout`` the seconds a connect, send or receive may
    block. Each call opens its own connection, so one ``Cairn`` may be shared by threads.

    Every method raises :class:`CairnError` for a non-2xx answer (with the daemon's stable
    ``code``, its ``message`` and the HTTP ``status``) and :class:`CairnUnavailable` when
    cairnd cannot be reached (code ``unavailable``) or does not answer in time (code
    ``timeout``).
    """

    def __init__(self, socket: Union[str, "os.PathLike[str]", None] = None, timeout: Optional[float] = 30.0) -> None:
        self.socket = os.fspath(socket) if socket is not None else default_socket()
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"Cairn(socket={self.socket!r}, timeout={self.timeout!r})"

    # MARK: Endpoints

    def search(
        self,
        query: str,
        k: int = 5,
        mode: str = "hybrid",
        scenario: Optional[str] = None,
        tags: Union[Iterable[str], str, None] = None,
        min_similarity: Optional[float] = None,
        channels: Union[Iterable[str], str, None] = None,
    ) -> SearchAnswer:
        """``POST /v1/search``: the ``k`` best chunks of the installed version for ``query``.

        ``mode`` is ``hybrid``, ``lexical``, ``dense`` or ``rrf``; ``scenario`` keeps chunks
        of that scenario (and ``general``); ``tags`` keeps chunks carrying every tag;
        ``min_similarity`` drops dense matches below that cosine; ``channels`` searches only
        those knowledge bases of a cairnd that follows several (default: all of them). Arguments
        are sent as given: the daemon validates them (e.g. ``bad_k``, ``bad_mode``,
        ``empty_query``, ``unknown_channel``). A ``min_similarity`` of NaN or infinity, which
        JSON cannot carry, raises ``bad_min_similarity`` here, as cairnd would.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, not {type(query).__name__}")
        body: Dict[str, Any] = {"query": query, "k": k, "mode": mode}
        search_filter: Dict[str, Any] = {}
        if scenario is not None:
            search_filter["scenario"] = scenario
        if tags is not None:
            search_filter["tags"] = [tags] if isinstance(tags, str) else list(tags)
        if search_filter:
            body["filter"] = search_filter
        if min_similarity is not None:
            if isinstance(min_similarity, float) and not math.isfinite(min_similarity):
                raise CairnError("bad_min_similarity",
                                 f"min_similarity is not a finite number in -1...1: {min_similarity!r}")
            body["min_similarity"] = min_similarity
        if channels is not None:
            body["channels"] = [channels] if isinstance(channels, str) else list(channels)
        answer = self._request("POST", "/v1/search", body)
        return self._decode(SearchAnswer.from_json, answer, "POST /v1/search")

    def get(self, chunk_id: str, channel: Optional[str] = None, version: Optional[int] = None) -> Chunk:
        """``GET /v1/chunks/{id}``: one chunk of the installed version, with the ``version``
        and ``state_root`` it came from. 404 ``chunk_not_found`` for an unknown id.

        ``channel``: the channel a search result came from (cairnd following several).
        ``version``: the version a search answered from; when another serves now, the error
        ``version_changed`` (409), rather than that version's text under the same id (also
        when a cairnd from before 2026-12-06, which ignores it, answers from another)."""
        if not isinstance(chunk_id, str):
            raise TypeError(f"chunk_id must be a str, not {type(chunk_id).__name__}")
        if not chunk_id:
            raise ValueError("chunk_id is empty")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
            raise ValueError(f"version must be a version number (1 or more), not {version!r}")
        encoded = quote(chunk_id, safe="")
        if chunk_id in (".", ".."):
            # Keep dot segments from being read as path navigation.
            encoded = chunk_id.replace(".", "%2E")
        query = ([f"channel={quote(channel, safe='')}"] if channel is not None else []) + (
            [f"version={version}"] if version is not None else [])
        answer = self._request("GET", "/v1/chunks/" + encoded + ("?" + "&".join(query) if query else ""))
        chunk = self._decode(Chunk.from_json, answer, "GET /v1/chunks/{id}")
        if version is not None and chunk.version != version:
            raise CairnError("version_changed",
                             f"version {version} no longer answers (version {chunk.version} does): "
                             "search again for the passage as it is now", 409)
        return chunk

    def status(self) -> Status:
        """``GET /v1/status``: the installed version, model, sync state, trust and
        freshness (answers also before the first install, with ``installed`` False)."""
        answer = self._request("GET", "/v1/status")
        return self._decode(Status.from_json, answer, "GET /v1/status")

    def sync(self) -> bool:
        """``POST /v1/sync``: asks the sync component to poll now and returns at once
        (watch :meth:`status` for the outcome). True when accepted; 503
        ``sync_unavailable`` when cairnd runs without a sync component."""
        answer = self._request("POST", "/v1/sync", None, send_empty_body=True)
        return bool(isinstance(answer, dict) and answer.get("accepted"))

    def health(self) -> bool:
        """``GET /healthz``: True while the process serves requests."""
        answer = self._request("GET", "/healthz")
        return bool(isinstance(answer, dict) and answer.get("ok"))

    # MARK: Transport

    def _request(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
                 send_empty_body: bool = False) -> Any:
        headers = {"Accept": "application/json", "Connection": "close", "User-Agent": _USER_AGENT}
        payload: Optional[bytes] = None
        if body is not None:
            try:
                payload = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
            except ValueError as exc:
                # NaN or infinity (k=float("nan")): JSON cannot carry it; sent as Python writes
                # it, cairnd would refuse the body as bad_json.
                raise CairnError("bad_json", f"the request holds a number JSON cannot carry: {exc}") from exc
            headers["Content-Type"] = "application/json"
        elif send_empty_body:
            payload = b""

        where = self.socket
        connection = _UnixHTTPConnection(where, self.timeout)
        try:
            try:
                connection.connect()
            except _socket.timeout as exc:
                raise CairnUnavailable(
                    "timeout", f"cairnd at {where} did not accept a connection within {self.timeout} s; "
                               f"is it running? {_HINT}", where) from exc
            except FileNotFoundError as exc:
                raise CairnUnavailable(
                    "unavailable", f"no cairnd socket at {where}: {_HINT}", where) from exc
            except ConnectionRefusedError as exc:
                raise CairnUnavailable(
                    "unavailable", f"cairnd is not listening on {where} (connection refused): {_HINT}",
                    where) from exc
            except PermissionError as exc:
                raise CairnUnavailable(
                    "unavailable", f"permission denied opening {where} (the socket's mode and group decide "
                                   f"who may connect): {_HINT}", where) from exc
            except OSError as exc:
                reason = exc.strerror or str(exc)
                raise CairnUnavailable(
                    "unavailable", f"cannot connect to cairnd at {where} ({reason}): {_HINT}", where) from exc

            try:
                connection.putrequest(method, path)
                for name, value in headers.items():
                    connection.putheader(name, value)
                if payload is not None:
                    connection.putheader("Content-Length", str(len(payload)))
                connection.endheaders()
                if payload:
                    _send_body(connection.sock, payload, self.timeout)
                response = connection.getresponse()
                data = response.read()
            except _socket.timeout as exc:
                raise CairnUnavailable(
                    "timeout", f"cairnd at {where} did not answer {method} {_route(path)} within {self.timeout} s", where) from exc
            except (http.client.RemoteDisconnected, ConnectionError) as exc:
                raise CairnUnavailable(
                    "unavailable", f"cairnd at {where} closed the connection without answering", where) from exc
            except http.client.HTTPException as exc:
                raise CairnError(
                    "protocol_error", f"cairnd at {where} broke the HTTP exchange ({type(exc).__name__})") from exc
            except OSError as exc:
                reason = exc.strerror or str(exc)
                raise CairnUnavailable(
                    "unavailable", f"lost the connection to cairnd at {where} ({reason})", where) from exc
        finally:
            connection.close()

        status = response.status
        parsed: Any
        try:
            parsed = json.loads(data.decode("utf-8")) if data else None
            decoded = True
        except (UnicodeDecodeError, ValueError):
            parsed, decoded = None, False

        if 200 <= status < 300:
            if not decoded:
                raise CairnError("bad_answer", f"cairnd answered {method} {_route(path)} with a body that is not JSON",
                                 status)
            return parsed

        if isinstance(parsed, dict) and isinstance(parsed.get("code"), str):
            message = parsed.get("message")
            raise CairnError(parsed["code"], message if isinstance(message, str) else "", status)
        raise CairnError(f"http_{status}",
                         f"cairnd answered HTTP {status} {response.reason} without a Cairn error body", status)

    @staticmethod
    def _decode(decode, answer: Any, route: str):
        try:
            return decode(answer)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CairnError("bad_answer", f"cairnd's answer to {route} does not match protocol/socket-api.md "
                                           f"({type(exc).__name__}: {exc})", 200) from exc


def _route(path: str) -> str:
    """The route of a request path, without a chunk id (messages never carry it)."""
    return "/v1/chunks/{id}" if path.startswith("/v1/chunks/") else path


def _send_body(sock: _socket.socket, payload: bytes, timeout: Optional[float]) -> None:
    """Writes ``payload``, stopping as soon as cairnd answers: it refuses a body over its limit
    (413 ``body_too_large``) from the ``Content-Length`` and stops reading the connection, so a
    client that kept writing would wait out its timeout and never read why."""
    view = memoryview(payload)
    sent = 0
    # A selector, not select(): that one refuses a descriptor past 1023 (a busy process).
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
        while sent < len(view):
            events = selector.select(timeout)
            if not events:
                raise _socket.timeout("timed out")
            if any(mask & selectors.EVENT_READ for _, mask in events):
                return
            try:
                sent += sock.send(view[sent:sent + 65536])
            except (BrokenPipeError, ConnectionResetError):
                # It answered and closed between the two: the answer is read next.
                return
