"""Who may write feedback (the page, its JSON API, the served model): one rule, one token, compared in constant time.

Reading (searching) is open to whoever reaches the server. Writing is open without a token only on loopback, where
nobody but this machine's users can send a request; a server with a token (always needed on any other address) takes
writes only from requests carrying it. And what the page may say as its own: a notice its redirect signed with a key
of this server, not any text a link carries.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field

TOKEN_VARIABLE = "TICKETSIM_FEEDBACK_TOKEN"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Access:
    """Who may write feedback: anyone on loopback without a token; with a token (always needed off loopback) only
    requests carrying it, as `Authorization: Bearer <token>` or the cookie the page's token form sets. And which
    notices the page shows: those it signed with `key`."""

    host: str
    token: str | None
    # Signs the page's notices. Made with the Access, before gunicorn forks: every worker checks what another signed.
    key: bytes = field(default_factory=lambda: secrets.token_bytes(32), repr=False, compare=False)

    @property
    def needs_token(self) -> bool:
        return self.token is not None or not is_loopback(self.host)

    def refusal(self, given: str | None) -> str | None:
        """Why a write is refused (None: allowed)."""
        if not self.needs_token:
            return None
        if self.token is None:
            return (f"this server listens on {self.host} and was started without a feedback token: nobody may write "
                    f"feedback (start it with --token or {TOKEN_VARIABLE})")
        if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            return "feedback needs this server's token: " + ("the one given is wrong" if given else "none was given")
        return None

    def signature(self, notice: str) -> str:
        return hmac.new(self.key, notice.encode(), hashlib.sha256).hexdigest()

    def signs(self, notice: str, signature: str) -> bool:
        """`signature` is this server's for `notice` (an empty notice is never shown)."""
        return bool(notice) and hmac.compare_digest(self.signature(notice).encode(), signature.encode())
