"""Raw reads of the store's tables for tests (the package itself reads through the
repositories; a test may look at the rows directly)."""

from __future__ import annotations

from typing import Any

from skillopt_sleep.store import Store


def db_rows(
    store: Store,
    table: str,
    where: str | None = None,
    args: list | None = None,
    order_by: str | None = None,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """``table``'s rows matching the SQL ``where`` (with ``args``)."""
    return list(store.db.table(table).rows_where(where, args or [], order_by=order_by, limit=limit))


def db_get(store: Store, table: str, pk: Any) -> dict[str, Any] | None:
    """The row of ``table`` whose primary key is ``pk``, or None."""
    pkcol = store.db.table(table).pks[0]
    found = db_rows(store, table, f"[{pkcol}] = ?", [pk], limit=1)
    return found[0] if found else None


def clear_response_cache(store: Store) -> None:
    """Empty the model response cache: the next night makes every call again."""
    with store.write():
        store.db.execute("delete from rollout_cache")


def tamper(store: Store, table: str, pk: Any, **values: Any) -> None:
    """Change a row behind the package's back (what a process with write access to the
    database could do), for the tests that check nothing trusts it blindly."""
    with store.write():
        store.db.table(table).update(pk, values)


def ensure_night(store: Store, night_id: int, **fields: Any) -> None:
    """A night row with id ``night_id`` (a finished night), so rows staged for it (a proposal,
    rollouts, edits) satisfy the store's foreign keys."""
    with store.write():
        if store.db.execute("select 1 from nights where id = ?", [night_id]).fetchone() is None:
            store.db.table("nights").insert(
                {"id": night_id, "status": "succeeded", "trigger": "cli", "dry_run": 0, **fields}
            )


def save_turns(
    store: Store,
    key: str,
    turns: list[tuple[str, str]],
    *,
    source: str = "claude_code",
    project: str = "/home/u/app",
    day: int = 28,
) -> str:
    """Store one session of ``source`` made of ``(role, text)`` turns (``user`` prompts,
    ``assistant`` answers) on June ``day`` 2025, a minute apart; returns its session id."""
    from skillopt_sleep.models import HarvestedMessage, HarvestedSession

    store.sessions.save(
        HarvestedSession(
            source=source,
            key=key,
            project=project,
            started_at=f"2025-06-{day:02d}T10:00:00Z",
            messages=[
                HarvestedMessage(
                    uid=f"{key}-{i}",
                    role=role,
                    kind="prompt" if role == "user" else "answer",
                    text=text,
                    timestamp=f"2025-06-{day:02d}T10:{i:02d}:00Z",
                )
                for i, (role, text) in enumerate(turns)
            ],
        ),
        file_path=f"/logs/{source}-{key}.jsonl",
    )
    return f"{source}:{key}"
