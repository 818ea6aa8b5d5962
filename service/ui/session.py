"""Who is looking at the dashboard: a bearer token, or a session cookie that stands for one.

The cookie is ``<token name, base64>.<expiry>.<signature>``: an HMAC-SHA256, under a key
drawn when the process starts, of the name, the expiry and the token's current secret.
So a session ends when it expires, when the service restarts, when the token is removed
from the configuration or when its secret is rotated; and the secret itself is never in
the cookie. The cookie is ``HttpOnly`` and ``SameSite=Strict`` (``Secure`` over HTTPS).

Checking costs one HMAC: a request without a valid token or session is refused before
anything is read from the database.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time

from fastapi import Request

from cpsched.service.auth import bearer, find_token
from cpsched.service.settings import TokenConfig

COOKIE = "cpsched_session"
SESSION_SECONDS = 8 * 3600
"""How long a session lasts: a working day."""


class LoginRequired(Exception):
    """No valid token or session: a browser is sent to the login form, others get 401."""

    def __init__(self, next_path: str) -> None:
        super().__init__("log in with a token")
        self.next_path = next_path


def new_key() -> bytes:
    """A signing key for one process's sessions."""
    return secrets.token_bytes(32)


def _signature(key: bytes, payload: str, secret: str) -> str:
    message = f"{payload}\0{secret}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def session_cookie(key: bytes, token: TokenConfig, now: float) -> str:
    """The cookie value for a session of ``token`` starting at ``now``."""
    name = base64.urlsafe_b64encode(token.name.encode()).decode().rstrip("=")
    payload = f"{name}.{int(now) + SESSION_SECONDS}"
    return f"{payload}.{_signature(key, payload, token.secret.get_secret_value())}"


def session_token(
    key: bytes, tokens: list[TokenConfig], value: str, now: float
) -> TokenConfig | None:
    """The token a cookie value stands for, if it is genuine, unexpired and the token
    still exists with the secret it was signed with."""
    try:
        name_b64, expires, signature = value.split(".")
        name = base64.urlsafe_b64decode(name_b64 + "=" * (-len(name_b64) % 4)).decode()
        expiry = int(expires)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if expiry < now:
        return None
    token = next((t for t in tokens if t.name == name), None)
    if token is None:
        return None
    expected = _signature(key, f"{name_b64}.{expires}", token.secret.get_secret_value())
    return token if hmac.compare_digest(expected, signature) else None


def viewer(request: Request) -> TokenConfig:
    """The token behind this request (bearer header or session cookie); else
    :class:`LoginRequired`. A dependency of every dashboard page."""
    tokens: list[TokenConfig] = request.app.state.settings.tokens
    presented = bearer(request)
    token = find_token(tokens, presented) if presented is not None else None
    cookie = request.cookies.get(COOKIE)
    if token is None and cookie:
        token = session_token(request.app.state.ui_key, tokens, cookie, time.time())
    if token is None:
        raise LoginRequired(request.url.path)
    return token


def safe_next(path: str | None) -> str:
    """Where to go after logging in: a dashboard path, never another site."""
    if path and path.startswith("/ui/") and "//" not in path and "\\" not in path:
        return path
    return "/ui/"
