"""Helpers for the daemon tests (fixtures in ``tests/daemon/conftest.py``): real processes, loopback only, bounded polling.

* :class:`DaemonHarness` writes the config, runs the CLI (``python -m skillopt_sleep``) and
  always stops / kills what it started.
* :class:`GatedProxy` is a loopback HTTP proxy in front of the simulator that holds every
  request until :meth:`GatedProxy.open` is called, so a test can act *during* a night.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import tomlkit

from skillopt_sleep import paths


def wait_for(
    pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def db_rows(sql: str, args: tuple = ()) -> list[tuple]:
    db = paths.db_path()
    if not db.exists():
        return []
    conn = sqlite3.connect(str(db), timeout=30)
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


class GatedProxy:
    def __init__(self, upstream: str):
        self.upstream = urlsplit(upstream)
        self.gate = threading.Event()
        self.seen = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy._lock:
                    proxy.seen += 1
                proxy.gate.wait(120)
                conn = http.client.HTTPConnection(
                    proxy.upstream.hostname, proxy.upstream.port, timeout=60
                )
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
                }
                conn.request("POST", self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def open(self) -> None:
        self.gate.set()

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


class DaemonHarness:
    def __init__(self, home: Path, tmp: Path):
        self.home = home
        self.project = tmp / "webapp"
        self.project.mkdir(parents=True, exist_ok=True)
        self.skill = self.project / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
        self.env = dict(os.environ, SKILLOPT_DAEMON_QUIET="1")
        self.started: list[int] = []

    # ------------------------------------------------------------------ config
    def write_config(self, **extra: Any) -> Path:
        data: dict[str, Any] = {
            "sources": {
                "claude_code": {"roots": [str(self.home / ".claude" / "projects")]},
                "codex": {"roots": [str(self.home / ".codex" / "sessions")]},
            },
            "debounce_seconds": 0.2,
            "rescan_seconds": 60,
            "schedule": (dt.datetime.now() + dt.timedelta(hours=6)).strftime("%H:%M:%S"),
        }
        data.update(extra)
        path = paths.config_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tomlkit.dumps(data), encoding="utf-8")
        return path

    def night_config(self, url: str, **extra: Any) -> Path:
        from skillopt_sleep.demo import demo_settings

        settings = demo_settings(self.home, self.project, url)
        return self.write_config(**settings, **extra)

    def write_demo_sessions(self) -> None:
        from skillopt_sleep.demo import DEMO_CONVERSATIONS
        from skillopt_sleep.testing.sessions import write_conversations

        write_conversations(self.home, self.project, DEMO_CONVERSATIONS)

    def write_live_skill(self) -> bytes:
        self.skill.parent.mkdir(parents=True, exist_ok=True)
        data = b"---\nname: my-skill\ndescription: mine\n---\n\n# Mine\n\nKeep this line.\n"
        self.skill.write_bytes(data)
        return data

    # ------------------------------------------------------------------ processes
    def cli(
        self, *args: str, timeout: float = 90, check: bool = True
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, "-m", "skillopt_sleep", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(self.project),
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def start(self) -> int:
        proc = self.cli("start")
        assert "started (pid" in proc.stdout or "already running" in proc.stdout, proc.stdout
        pid = int(proc.stdout.split("pid ")[1].split(")")[0])
        self.started.append(pid)
        return pid

    def pid(self) -> int | None:
        from skillopt_sleep.daemon.process import running_pid

        return running_pid()

    def status(self) -> dict[str, Any]:
        from skillopt_sleep.daemon_client import daemon_status

        return daemon_status().model_dump()

    def kill9(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        wait_for(
            lambda: (
                not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
            ),
            10,
            what=f"pid {pid} to die",
        )

    def cleanup(self) -> None:
        try:
            self.cli("stop", "--timeout", "20", check=False, timeout=60)
        except subprocess.TimeoutExpired:
            pass
        for pid in self.started:
            try:
                proc = psutil.Process(pid)
                for p in proc.children(recursive=True) + [proc]:
                    p.kill()
            except psutil.NoSuchProcess:
                pass


# ---------------------------------------------------------------------------- transcript appends
def append_claude_turn(path: Path, prompt: str, answer: str) -> None:
    """Append a user prompt and an assistant answer to an existing Claude Code transcript."""
    lines = [json.loads(ln) for ln in path.read_text("utf-8").splitlines() if ln.strip()]
    last = lines[-1]
    env = {
        k: last[k] for k in ("isSidechain", "userType", "cwd", "sessionId", "version", "gitBranch")
    }
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    u1, u2 = str(uuid.uuid4()), str(uuid.uuid4())
    recs = [
        {
            "parentUuid": last["uuid"],
            **env,
            "type": "user",
            "message": {"role": "user", "content": prompt},
            "uuid": u1,
            "timestamp": now,
        },
        {
            "parentUuid": u1,
            **env,
            "type": "assistant",
            "requestId": f"req_{u2[:12]}",
            "message": {
                "id": f"msg_{u2[:16]}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": answer}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 4, "output_tokens": 2},
            },
            "uuid": u2,
            "timestamp": now,
        },
    ]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in recs))


def append_codex_turn(path: Path, prompt: str, answer: str) -> None:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    recs = [
        {
            "timestamp": now,
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            },
        },
        {
            "timestamp": now,
            "type": "event_msg",
            "payload": {"type": "user_message", "message": prompt, "images": []},
        },
        {
            "timestamp": now,
            "type": "event_msg",
            "payload": {"type": "agent_message", "message": answer},
        },
        {
            "timestamp": now,
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": answer}],
            },
        },
    ]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in recs))
