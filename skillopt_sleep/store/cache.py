"""``rollout_cache``: model responses by request hash, so an unchanged re-run costs nothing."""

from __future__ import annotations

from dataclasses import dataclass

from skillopt_sleep.store._base import Repository, now_iso


@dataclass(frozen=True)
class CachedResponse:
    """A stored model response. ``tool_calls`` is JSON text; ``seconds`` the original wall
    time of the call; ``acts`` JSON text of what an agent CLI did with its tools ("" when it
    only answered; m018)."""

    text: str
    tool_calls: str
    input_tokens: int
    output_tokens: int
    seconds: float
    acts: str = ""


class ResponseCache(Repository):
    """Keys are sha256 hex of the request (see ``night.replay.CachedBackend.key``)."""

    def get(self, key: str) -> CachedResponse | None:
        """The response stored under ``key``, or None."""
        r = self._one("rollout_cache", "key = ?", [key])
        if r is None:
            return None
        return CachedResponse(
            text=r["text"] or "",
            tool_calls=r["tool_calls"] or "[]",
            input_tokens=r["input_tokens"] or 0,
            output_tokens=r["output_tokens"] or 0,
            seconds=r["seconds"] or 0.0,
            acts=r.get("acts") or "",
        )

    def put(self, key: str, response: CachedResponse) -> None:
        """Store (or replace) the response under ``key``."""
        self.db.table("rollout_cache").upsert(
            {
                "key": key,
                "text": response.text,
                "tool_calls": response.tool_calls,
                "input_tokens": response.input_tokens,
                "output_tokens": response.output_tokens,
                "seconds": response.seconds,
                "acts": response.acts or None,
                "created_at": now_iso(),
            },
            pk="key",
        )
