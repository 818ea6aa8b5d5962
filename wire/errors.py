"""Errors of a client of the service's API: the bridge and the replay over HTTP both
raise these.

Hierarchy::

    CpschedError (cpsched.errors)
    └── ServiceError                the cpsched service did not answer usefully
        ├── ServiceUnavailable      unreachable, 5xx or past the deadline (fallback applies)
        └── ServiceRejected         4xx: the request itself is wrong (fix the token or data)
"""

from __future__ import annotations

from cpsched.errors import CpschedError


class ServiceError(CpschedError):
    """The cpsched service did not give a usable answer."""


class ServiceUnavailable(ServiceError):
    """The service is unreachable, failing (5xx) or missed the deadline."""


class ServiceRejected(ServiceError):
    """The service refused the request (4xx): fix the token, the cluster name or the data."""

    def __init__(self, status: int, detail: str) -> None:
        self.status = status
        self.detail = detail
        super().__init__(
            f"service refused the request with HTTP {status}: {detail[:500]}; {self.what_to_fix}"
        )

    @property
    def what_to_fix(self) -> str:
        if self.status == 401:
            return (
                "the service does not know the bridge's token: set `token` in the bridge's "
                "TOML (or CPSCHED_BRIDGE_TOKEN) to a token in the service's config"
            )
        if self.status == 403:
            return (
                "the bridge's token may not act on this cluster: allow it in the service's config"
            )
        if self.status == 404:
            return "the service has no such cluster: set `cluster` to a name in its config"
        if self.status == 423:
            return (
                "another bridge dispatches for this cluster (it holds the writer lease): "
                "this bridge waits as a standby; stop one of them if that is not meant"
            )
        if self.status == 413:
            return "the request is over the service's body limit: raise max_body_bytes there"
        return "the service refused the data sent (see the detail); report it with the bridge's log"
