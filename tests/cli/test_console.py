"""``print_json`` writes piped JSON without rich: the very text rich's ``print_json`` writes
to a file that is no terminal (issue 14: ``harvest --json`` does not import rich)."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import pytest
from rich.console import Console

from skillopt_sleep.cli import console

#: characters rich might treat apart: controls, C1, zero-width, combining, wide, emoji, RTL
_CHARS = [chr(c) for c in range(0x20, 0x7F)] + [
    chr(c)
    for c in (0x0, 0x7, 0x8, 0x9, 0xA, 0xB, 0xC, 0xD, 0x1B, 0x7F, 0x85, 0x9B, 0xA0, 0xAD)
    + (0x200B, 0x200D, 0x2028, 0xFEFF, 0x301, 0x5D0, 0x4E2D, 0xFF21, 0x1F600, 0xE000, 0xFFFD)
]


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(6 if depth < 3 else 4)
    if kind == 0:
        return "".join(rng.choice(_CHARS) for _ in range(rng.randrange(0, 300)))
    if kind == 1:
        return rng.choice([rng.randrange(-(10**12), 10**12), rng.random() * 1e9, None, True])
    if kind == 2:
        return "[bold]not markup[/] :smile: " + "x" * rng.randrange(150, 400)
    if kind == 3:
        return rng.choice([0.1, -0.0, 1e-7, 12345678901234567890, "", "\n"])
    if kind == 4:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    return {str(_value(rng, 3))[:40]: _value(rng, depth + 1) for _ in range(rng.randrange(0, 5))}


def test_piped_print_json_is_what_rich_writes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(console.out, "_console", None)  # not made yet: the plain path
    rng = random.Random(14)
    for _ in range(400):
        data = _value(rng)
        console.print_json(data)
        written = capsys.readouterr().out
        buf = io.StringIO()
        Console(file=buf, highlight=False, soft_wrap=True, width=160).print_json(
            json.dumps(data, default=str, ensure_ascii=False)
        )
        assert written == buf.getvalue(), data
    assert console.out._console is None  # rich's console was never needed


def test_rich_writes_when_colour_is_forced(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``FORCE_COLOR`` makes rich colour piped output: then rich writes it."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setattr(console.out, "_console", None)
    console.print_json({"a": [1, "b"]})
    assert "\x1b[" in capsys.readouterr().out
    assert console.out._console is not None
