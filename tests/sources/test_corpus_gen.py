"""The benchmark corpus generator: deterministic, in formats the harvesters read whole."""

from __future__ import annotations

import re
from pathlib import Path

from skillopt_sleep.config import Settings
from skillopt_sleep.sources.ingest import harvest
from skillopt_sleep.store import Store
from skillopt_sleep.testing.corpus_gen import generate_corpus


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_the_same_seed_writes_the_same_bytes(tmp_path: Path) -> None:
    a = generate_corpus(tmp_path / "a", 12, seed=5, size_scale=0.05)
    b = generate_corpus(tmp_path / "b", 12, seed=5, size_scale=0.05)
    c = generate_corpus(tmp_path / "c", 12, seed=6, size_scale=0.05)
    tree_a, tree_b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    assert tree_a == tree_b and len(tree_a) == a["files"]
    assert sum(map(len, tree_a.values())) == a["bytes"]
    assert {k: v for k, v in a.items() if not k.endswith("_root")} == {
        k: v for k, v in b.items() if not k.endswith("_root")
    }
    assert _tree(tmp_path / "c") != tree_a and c["sessions"] == 12
    assert a["claude_sessions"] + a["codex_sessions"] == 12


def test_every_session_is_harvested_and_its_planted_secrets_redacted(
    isolated_home: Path, tmp_path: Path
) -> None:
    made = generate_corpus(isolated_home, 40, seed=11, size_scale=0.15)
    assert made["claude_sessions"] and made["codex_sessions"]
    planted = re.compile(r"AKIA[A-Z0-9]{16}|ghp_[A-Za-z0-9]{36}|sk-proj-[A-Za-z0-9]{41}")
    raw = b"".join(_tree(isolated_home).values()).decode()
    assert planted.search(raw)  # the logs hold secrets to redact
    store = Store(tmp_path / "s.db")
    try:
        report = harvest(store, Settings(), sources=["claude_code", "codex"])
        cc, cx = report.sources["claude_code"], report.sources["codex"]
        assert cc.sessions_new == made["claude_sessions"]
        assert cx.sessions_new == made["codex_sessions"]
        assert cc.files_seen + cx.files_seen == made["files"]
        assert not cc.files_skipped and not cx.files_skipped
        assert cc.sessions_filtered == {} and cx.sessions_filtered == {}
        assert 0 < report.total("messages") <= made["messages_approx"]
        texts = [
            m.text + str(m.context or "")
            for s in store.sessions.all()
            for m in store.sessions.messages(s.id)
        ]
        blob = "\n".join(texts)
        assert not planted.search(blob) and "[REDACTED:" in blob
    finally:
        store.close()
