"""The errors of cairn_client: one type, with the daemon's stable code."""

from __future__ import annotations

from typing import Optional

__all__ = ["CairnError", "CairnUnavailable"]


class CairnError(Exception):
    """An answer that is not a success.

    For every non-2xx answer, ``code`` and ``message`` are the daemon's own
    (``{"code", "message"}``, protocol/socket-api.md, "Errors": clients switch on ``code``)
    and ``status`` is the HTTP status. Errors the client itself detects use codes of
    its own: ``bad_answer`` (the daemon's answer does not decode as the protocol says)
    and ``protocol_error`` (the HTTP exchange broke), with ``status`` None unless an
    HTTP status was read. An argument JSON cannot carry (NaN, infinity) is refused before
    anything is sent, with the code cairnd gives (``bad_min_similarity``, else ``bad_json``)
    and ``status`` None.
    """

    def __init__(self, code: str, message: str, status: Optional[int] = None) -> None:
        # One line, as the daemon's messages are.
        message = " ".join(str(message).splitlines())
        super().__init__(code, message, status)
        self.code = code
        self.message = message
        self.status = status

    def __str__(self) -> str:
        if self.status is None:
            return f"{self.code}: {self.message}"
        return f"{self.code}: {self.message} (HTTP {self.status})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, status={self.status!r})"


class CairnUnavailable(CairnError):
    """cairnd cannot be reached: the socket is missing, refuses the connection, cannot be
    opened (permissions), closes without answering (code ``unavailable``), or does not
    answer in time (code ``timeout``). ``status`` is None."""

    def __init__(self, code: str, message: str, socket_path: Optional[str] = None) -> None:
        super().__init__(code, message, None)
        self.socket_path = socket_path
