"""The Source base class declares every method the ingester and discovery call."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillopt_sleep.sources import get_source
from skillopt_sleep.sources.base import ParseResult, Source


class _Minimal(Source):
    name = "minimal"

    def default_roots(self, env, home):
        return [home / ".minimal"]

    def discover(self, root):
        yield from ()

    def parse(self, path, lines, state):
        return ParseResult(state=dict(state))


def test_defaults_of_a_line_source(tmp_path: Path):
    src = _Minimal()
    assert src.mode == "jsonl" and src.read_mode(tmp_path / "a.jsonl") == "jsonl"
    assert src.count_sessions(tmp_path / "a.jsonl") == 1
    assert ParseResult().bytes_read == 0
    with pytest.raises(NotImplementedError, match="minimal"):
        src.signature(tmp_path / "a.jsonl")
    with pytest.raises(NotImplementedError, match="minimal"):
        src.read_snapshot(tmp_path / "a.jsonl", {})


def test_a_source_must_implement_the_abstract_methods():
    class Incomplete(Source):
        name = "incomplete"

    with pytest.raises(TypeError):
        Incomplete()  # type: ignore[abstract]


def test_per_file_read_modes(tmp_path: Path):
    vscode = get_source("copilot_vscode")
    assert vscode.read_mode(tmp_path / "s.json") == "whole_file"
    assert vscode.read_mode(tmp_path / "s.jsonl") == "jsonl"
    assert get_source("devin").read_mode(tmp_path / "t.json") == "whole_file"
    assert get_source("opencode").read_mode(tmp_path / "opencode.db") == "snapshot"


@pytest.mark.parametrize("name", ["claude_code", "codex"])
def test_discover_paths_lists_what_discover_lists_as_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The ingester's string listing (no ``Path`` per file) names the files ``discover``
    yields, in its order, as ``os.path.abspath`` gives them: from an absolute root, a
    relative one and one with ``..`` in it."""
    import os

    from skillopt_sleep.testing.corpus_gen import generate_corpus

    generate_corpus(tmp_path, 12, seed=3, size_scale=0.05)
    src = get_source(name)
    (root,) = [r for r in src.default_roots({}, tmp_path) if r.is_dir()][:1]
    # a zst rollout beside its plain file, a transcript-named folder, a pruned tool-results
    (root / "x" / "tool-results").mkdir(parents=True)
    (root / "x" / "tool-results" / "rollout-a.jsonl").write_text("{}\n")
    (root / "x" / "rollout-b.jsonl").write_text("{}\n")
    (root / "x" / "rollout-b.jsonl.zst").write_bytes(b"")
    (root / "x" / "rollout-c.jsonl.zst").write_bytes(b"")
    (root / "x" / "d.jsonl").mkdir()
    monkeypatch.chdir(tmp_path)
    relative = Path(os.path.relpath(root, tmp_path))
    detour = root.parent / "x" / ".." / root.name
    (root.parent / "x").mkdir(exist_ok=True)
    for top in (root, relative, detour):
        expected = [os.path.abspath(p) for p in src.discover(top)]
        assert len(expected) > 5
        assert list(src.discover_paths(top)) == expected, top
