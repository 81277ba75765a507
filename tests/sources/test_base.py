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
