"""The outbox records every outbound model call of a night (one row per request the model
endpoint — the simulator — received), shown by ``skillopt-sleep outbox``; the redacted text
sent is kept for ``privacy.outbox_days`` days only."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from skillopt_sleep.demo import DEMO_CONVERSATIONS
from skillopt_sleep.simulator import serve
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.cli_run import skillopt_in_process as skillopt


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return skillopt(*args, env=env, timeout=300)


def _config(path: Path, home: Path, project: Path, base_url: str, days: int) -> Path:
    backend = f'name = "openai_compatible"\nbase_url = "{base_url}"\nmodel = "sim"\n'
    backend += 'api_key = "sk-test"\nmax_retries = 0\ntimeout = 20\n'
    path.write_text(
        f'project = "{project}"\nepochs = 1\n'
        f'[sources.claude_code]\nroots = ["{home / ".claude" / "projects"}"]\n'
        f"[target]\n{backend}[optimizer]\n{backend}"
        f'[document]\nkind = "path"\npath = "{project / "AGENTS.md"}"\n'
        f"[privacy]\noutbox_days = {days}\n",
        encoding="utf-8",
    )
    return path


def test_every_outbound_call_is_in_the_outbox(isolated_home: Path, tmp_path: Path) -> None:
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(isolated_home, project, DEMO_CONVERSATIONS)
    env = dict(os.environ, HOME=str(isolated_home))
    with serve("demo") as sim:
        cfg = _config(tmp_path / "c.toml", isolated_home, project, sim.url + "/v1", 14)
        res = _cli(env, "--config", str(cfg), "run", "--json")
        assert res.returncode == 0, res.stderr[-2000:]
        endpoints = [r["endpoint"] for r in sim.stats.requests]
    # the reachability check (GET /models) carries no text: every other request is a call
    sent = len([e for e in endpoints if not e.endswith("/models")])
    assert sent > 0 and len(endpoints) - sent <= 2, endpoints
    shown = _cli(env, "--config", str(cfg), "outbox", "--json", "--limit", "10000")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)
    assert len(rows) == sent  # one row per request the endpoint received
    assert {r["role"] for r in rows} == {"target", "optimizer"}
    assert {"target", "reflect"} <= {r["purpose"] for r in rows}
    for r in rows:
        assert r["backend"] == "openai_compatible" and r["model"] == "sim"
        assert r["endpoint"] == "127.0.0.1" and r["status"] == "ok"
        assert r["chars"] == len(r["prompt"]) > 0
        assert r["sha256"] == hashlib.sha256(r["prompt"].encode()).hexdigest()
    text = _cli(env, "--config", str(cfg), "outbox").stdout
    assert text.count("openai_compatible sim @127.0.0.1") == min(sent, 50)
    # at 80 columns each call takes two lines that fit, nothing dropped
    narrow = _cli(env | {"COLUMNS": "80"}, "--config", str(cfg), "outbox").stdout
    assert max(len(line) for line in narrow.splitlines()) <= 80, narrow
    assert narrow.count("openai_compatible sim @127.0.0.1") == min(sent, 50)
    assert narrow.count("sha256 ") == min(sent, 50) and "optimizer/reflect  ok" in narrow

    # a shorter retention empties the kept texts; the calls stay recorded
    cfg = _config(tmp_path / "c.toml", isolated_home, project, "http://127.0.0.1:9/v1", 0)
    rows = json.loads(_cli(env, "--config", str(cfg), "outbox", "--json").stdout)
    assert rows and all(r["prompt"] == "" and r["sha256"] for r in rows)
