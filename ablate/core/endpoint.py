"""Whether the API endpoint the sessions reach is ablate's simulated one (``ablate.sim``): its dollar figures
are then what the simulated usage would cost, not money spent, and every place that shows them says so."""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from urllib.parse import urlsplit

#: The ``Server`` header ablate.sim answers with (ablate/sim/server.py).
SIM_SERVER = "ablate-sim"
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def is_simulated(base_url: str | None, timeout_s: float = 2.0) -> bool:
    """True when ``base_url`` is an ablate.sim server: a loopback URL whose ``HEAD /api/hello`` answers with
    ``Server: ablate-sim``. A remote endpoint is never asked (no network call, no delay)."""
    if not base_url:
        return False
    parts = urlsplit(base_url)
    if parts.scheme != "http" or parts.hostname not in _LOOPBACK:
        return False
    try:
        conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout_s)
        try:
            conn.request("HEAD", parts.path.rstrip("/") + "/api/hello")
            server = conn.getresponse().getheader("Server") or ""
        finally:
            conn.close()
    except (OSError, http.client.HTTPException):
        return False
    return server.startswith(SIM_SERVER)


def environ_simulated(environ: Mapping[str, str]) -> bool:
    """:func:`is_simulated` for the endpoint ablate passes to every cell (``ANTHROPIC_BASE_URL``)."""
    return is_simulated(environ.get("ANTHROPIC_BASE_URL"))


def money(usd: float | None, *, simulated: bool, digits: int = 2) -> str:
    """A dollar figure, marked when it comes from the simulated endpoint: ``$0.84 (simulated)``."""
    if usd is None:
        return "unknown cost"
    return f"${usd:.{digits}f}" + (" (simulated)" if simulated else "")
