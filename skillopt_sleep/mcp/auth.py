"""Bearer-token auth for the HTTP transport: one shared secret, checked in constant time.

Its own module so :mod:`.server` (which installs it when given a token) and :mod:`.http`
(which creates the token and serves) do not import each other.
"""

from __future__ import annotations

import hmac

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl

from skillopt_sleep.loopback import HOST


class StaticTokenVerifier:
    """The SDK ``TokenVerifier`` for one shared secret (constant-time comparison)."""

    def __init__(self, token: str):
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token.encode()):
            return AccessToken(token=token, client_id="skillopt-sleep-local", scopes=[])
        return None


def auth_settings() -> AuthSettings:
    # Resource-server-only: no OAuth routes, no metadata; just "a valid bearer token".
    return AuthSettings(
        issuer_url=AnyHttpUrl(f"http://{HOST}"), resource_server_url=None, required_scopes=[]
    )
