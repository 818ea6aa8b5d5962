"""The dashboard's session cookie: signed, expiring, bound to the token's current secret."""

from __future__ import annotations

from pydantic import SecretStr

from cpsched.service.settings import TokenConfig
from cpsched.service.ui.session import (
    SESSION_SECONDS,
    new_key,
    safe_next,
    session_cookie,
    session_token,
)

TOKENS = [
    TokenConfig(name="ops", secret=SecretStr("ops-secret-123"), read_only=True),
    TokenConfig(name="bridge", secret=SecretStr("bridge-secret-123")),
]


def test_a_cookie_stands_for_its_token_until_it_expires():
    key = new_key()
    cookie = session_cookie(key, TOKENS[0], now=1000)
    assert session_token(key, TOKENS, cookie, now=1000) is TOKENS[0]
    assert session_token(key, TOKENS, cookie, now=1000 + SESSION_SECONDS) is TOKENS[0]
    assert session_token(key, TOKENS, cookie, now=1001 + SESSION_SECONDS) is None
    assert "ops-secret" not in cookie


def test_tampered_or_foreign_cookies_are_refused():
    key = new_key()
    cookie = session_cookie(key, TOKENS[0], now=1000)
    name, expires, signature = cookie.split(".")
    assert session_token(new_key(), TOKENS, cookie, now=1000) is None  # another process
    other = session_cookie(key, TOKENS[1], now=1000).split(".")[0]
    assert session_token(key, TOKENS, f"{other}.{expires}.{signature}", 1000) is None
    assert session_token(key, TOKENS, f"{name}.{int(expires) + 9999}.{signature}", 1000) is None
    for junk in ("", "a.b", "a.b.c.d", "!!.1.x", f"{name}.soon.{signature}"):
        assert session_token(key, TOKENS, junk, now=1000) is None


def test_after_sign_in_only_dashboard_paths():
    assert (
        safe_next("/ui/clusters/a/decisions?fallbacks=true")
        == "/ui/clusters/a/decisions?fallbacks=true"
    )
    for path in (None, "", "/v1/clusters/a/dispatch", "//evil/ui/", "https://x/ui/", "/ui/\\x"):
        assert safe_next(path) == "/ui/"
