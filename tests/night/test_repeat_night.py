"""A repeat night with nothing new makes no model call, over a generated corpus
(:func:`~skillopt_sleep.testing.corpus_gen.generate_corpus`: Claude Code and Codex sessions in
many projects) plus requests corrected in two projects, trained as the default night does it:
the user's memory file every project shares, one block per project. The first night's gate
rejects edits in each block (the persona's harmful and useless ones); the repeat night must not
show the optimizer those rejections as an earlier night's (its reflect prompts would change,
and with them the edits it proposes and their val replays), since the night that rejected
them had the very same inputs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from skillopt_sleep import paths
from skillopt_sleep.config import load_settings
from skillopt_sleep.demo import DEMO_CONVERSATIONS, demo_settings
from skillopt_sleep.night.run import run_night
from skillopt_sleep.simulator import serve
from skillopt_sleep.store import Store
from skillopt_sleep.testing.corpus_gen import generate_corpus
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.night import YARN_CONVERSATIONS, write_persona
from tests.helpers.store import db_rows


def test_a_repeat_night_over_a_generated_corpus_makes_no_model_call(
    tmp_path: Path, isolated_home: Path
) -> None:
    # the corpus's sessions end an hour ago, inside the night's lookback
    end = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(hours=1)
    made = generate_corpus(isolated_home, 200, seed=14, projects=20, size_scale=0.03, end=end)
    assert made["sessions"] == 200
    web, api = (tmp_path / "src" / "web").resolve(), (tmp_path / "src" / "api").resolve()
    for project, conversations in ((web, DEMO_CONVERSATIONS), (api, YARN_CONVERSATIONS)):
        project.mkdir(parents=True)
        write_conversations(isolated_home, project, conversations)
    live = isolated_home / ".claude" / "CLAUDE.md"
    live.write_text("# My rules\n", encoding="utf-8")
    store = Store(paths.db_path())
    lines: list[str] = []
    with serve(write_persona(tmp_path)) as sim:
        overrides = demo_settings(isolated_home, web, sim.url)
        del overrides["project"]  # the default night: every project's sessions
        overrides["document"] = {"kind": "memory", "agent": "claude_code"}
        # the corpus's 30 days end an hour ago: no session leaves the lookback between nights
        overrides["lookback_days"] = 31
        settings = load_settings(Path("/nonexistent/config.toml"), **overrides)
        first = run_night(store, settings)
        assert first.status == "succeeded", first.summary
        trained = {b.section for b in first.summary.blocks if b.train}
        assert {str(web), str(api)} <= trained, first.summary.blocks
        rejected = db_rows(store, "edits", "night_id = ? and status = 'rejected'", [first.night_id])
        assert {e["section"] for e in rejected} >= {str(web), str(api)}, rejected
        assert sim.stats.by_role["reflect"] >= 2

        sim.reset()
        again = run_night(store, settings, progress=lines.append)
        assert sum(sim.stats.by_role.values()) == 0, dict(sim.stats.by_role)
        assert again.cost.calls == 0
    store.close()
    assert not any("rejected by earlier nights" in line for line in lines), lines
    # the same proposals, not staged again
    assert [b.proposal_id for b in again.summary.blocks] == [
        b.proposal_id for b in first.summary.blocks
    ]
