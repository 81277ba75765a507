"""Canary suite: ≥ 60 secret shapes in every placement each agent's log has (user text,
assistant text, streamed parts, tool input and output, titles, cwd / workspace metadata),
harvested by the real ingester into a real store and searched through the service: no piece
of any secret is in the database files (the main file, the WAL and the shared-memory file,
read as raw bytes, FTS index included) nor in any search result. A store written before
redaction held (raw rows) is re-redacted by migration m004.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from skillopt_sleep import paths
from skillopt_sleep.service import Service
from skillopt_sleep.sources.ingest import harvest_file
from skillopt_sleep.store import Store
from tests.helpers.canaries import MARK, WRITERS, canaries, db_bytes, leaks, placements
from tests.helpers.store import ensure_night

CANARIES = canaries()


def test_the_suite_covers_the_shapes_the_issue_names() -> None:
    names = {c.name for c in CANARIES}
    assert len(names) == len(CANARIES) >= 60
    named = {
        "azure_sas",
        "discord_bot",
        "shopify",
        "digitalocean",
        "telegram_bot",
        "atlassian",
        "age",
        "vault",
        "mailgun",
        "google_oauth_secret",
        "doppler",
        "anthropic",
    }
    assert named <= names
    # the secrets are fresh and distinct: no two share a 12-character piece
    pieces = [set(c.windows()[1:]) for c in CANARIES]
    for i, a in enumerate(pieces):
        for b in pieces[i + 1 :]:
            assert not a & b


@pytest.mark.parametrize("source", sorted(WRITERS))
def test_no_canary_reaches_the_store_or_search(
    source: str, isolated_home: Path, tmp_path: Path
) -> None:
    paths = [WRITERS[source](isolated_home, c, n) for n, c in enumerate(CANARIES)]
    raw = b"".join(p.read_bytes() for p in paths)
    assert len(leaks(raw, CANARIES)) == len(CANARIES)  # the logs do hold every secret

    db = tmp_path / "store.db"
    store = Store(db)
    for p in paths:
        res = harvest_file(store, source, p)
        assert res.status == "read" and res.messages > 0, (p, res)
    sessions = store.sessions.all()
    assert len(sessions) == len(CANARIES)
    # every placement was stored (redacted), not dropped: titles, answers, tool output
    texts = [m.text for s in sessions for m in store.sessions.messages(s.id)]
    assert sum("[REDACTED:" in t for t in texts) >= 2 * len(CANARIES)
    assert sum(MARK in t for t in texts) >= 2 * len(CANARIES)
    if source not in ("copilot_cli", "cursor"):  # their logs hold no title
        assert all(s.title and "[REDACTED:" in s.title for s in sessions)
    assert leaks(db_bytes(db), CANARIES) == []  # WAL still open: read as it is

    svc = Service(store_path=db)
    found = svc.search(MARK, limit=100).hits
    assert found and all(MARK in h.snippet for h in found)
    blob = "\n".join(h.snippet for h in found)
    for c in CANARIES:
        blob += "\n".join(h.snippet for h in svc.search(c.secret[:40], limit=20).hits)
    assert leaks(blob.encode(), CANARIES) == []
    store.close()
    assert leaks(db_bytes(db), CANARIES) == []  # after the checkpoint on close


def test_no_canary_comes_back_from_mcp_search_sessions(isolated_home: Path, tmp_path: Path) -> None:
    """Every source's canary logs harvested into the user's store; the real MCP server (a
    subprocess, the SDK's client) answers ``search_sessions`` for the marker word and for
    each secret: no piece of any secret in what it returns."""
    store = Store(paths.db_path())
    for source, write in WRITERS.items():
        for n, c in enumerate(CANARIES):
            assert harvest_file(store, source, write(isolated_home, c, n)).status == "read"
    store.close()
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "SKILLOPT_SLEEP_HOME", "PATH")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "skillopt_sleep", "mcp"], env=env, cwd=str(tmp_path)
    )
    answers: list[str] = []

    async def main() -> None:
        with open(tmp_path / "mcp-stderr.log", "a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    for query in [MARK] + [c.secret[:40] for c in CANARIES]:
                        res = await session.call_tool(
                            "search_sessions", {"query": query, "limit": 100}
                        )
                        assert not res.is_error, res.content
                        assert res.structured_content is not None
                        assert res.structured_content["query"] == query  # echoed: not stored
                        answers.append(json.dumps(res.structured_content["hits"]))

    anyio.run(main)
    hits = json.loads(answers[0])
    assert len(hits) == 100 and all(MARK in h["snippet"] for h in hits)
    assert leaks("\n".join(answers).encode(), CANARIES) == []


def test_m004_re_redacts_a_store_written_before(tmp_path: Path) -> None:
    """Raw rows as an older version stored them (messages with their FTS rows, a title, a
    parse state holding the raw ``customTitle``, a task, a rollout): reopening runs m004
    and no piece of any secret is left in the files."""
    db = tmp_path / "old.db"
    store = Store(db)
    texts = [placements(c) for c in CANARIES]
    store.db.table("sessions").insert(
        {
            "id": "claude_code:s1",
            "source": "claude_code",
            "key": "s1",
            "title": texts[0],
            "self_generated": 0,
        }
    )
    for n, text in enumerate(texts):
        store.db.table("messages").insert(
            {
                "session_id": "claude_code:s1",
                "source": "claude_code",
                "uid": f"u{n}",
                "seq": n,
                "role": "user",
                "kind": "prompt",
                "text": text,
                "tool_names": "[]",
            }
        )
    store.db.table("source_files").insert(
        {
            "path": "/x.jsonl",
            "source": "copilot_vscode",
            "state": f'{{"title": "{CANARIES[1].text}"}}',
        }
    )
    store.db.table("tasks").insert({"id": "t1", "intent": texts[2], "corrections": "[]"})
    ensure_night(store, 1)
    store.db.table("rollouts").insert({"night_id": 1, "task_id": "t1", "answer": texts[3]})
    store.db.table("_sqlite_migrations").delete_where("name = ?", ["m004_reredact"])
    store.close()
    assert len(leaks(db_bytes(db), CANARIES)) == len(CANARIES)  # the old store leaks all

    store = Store(db)
    assert leaks(db_bytes(db), CANARIES) == []  # at once, while the store is open
    names = [r["name"] for r in store.db["_sqlite_migrations"].rows]
    assert names[-1] == "m004_reredact"
    assert store.sessions.search(MARK, limit=100)  # still searchable, redacted
    row = store.db.execute("select text from messages where uid = 'u5'").fetchone()
    assert row and "[REDACTED:" in row[0] and MARK in row[0]
    store.close()
    assert leaks(db_bytes(db), CANARIES) == []
