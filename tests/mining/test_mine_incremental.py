"""Mining across nights: a night compares only the prompts new since the last one (the
project's clustering is kept in the store, ``mining_state``) and mines the same tasks as
mining everything from scratch."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from pathlib import Path

import pytest

from skillopt_sleep.config import Settings
from skillopt_sleep.mining.corrections import Feedback
from skillopt_sleep.mining.mine import Intent, MineReport, _cluster, cluster_all_pairs, mine
from skillopt_sleep.models import Check
from skillopt_sleep.store import Store
from tests.helpers.mining import intents, prompts, save_sessions


def _tasks(report: MineReport, ids: bool = True) -> list[tuple]:
    """The tasks; without ``ids`` for another store (a store's earlier tasks lend their
    ids to the clusters that continue them)."""
    return [
        (
            t.id if ids else "",
            t.intent,
            t.sessions,
            [(o.session_id, o.seq, o.split) for o in t.occurrences],
        )
        for t in report.tasks
    ]


def _at(day: int) -> dt.datetime:
    return dt.datetime(2025, 6, 1, tzinfo=dt.UTC) + dt.timedelta(days=day - 1)


def test_new_prompts_only_are_compared_and_tasks_match_scratch(tmp_path: Path) -> None:
    texts = prompts(1300, seed=5)
    old, new = texts[:1200], texts[1200:]
    settings = Settings(lookback_days=40, max_tasks=200)
    store = Store(tmp_path / "nightly.db")
    save_sessions(store, old, first_day=1, last_day=20)
    first = mine(store, settings, now=_at(21))
    assert first.prompts_reused == 0 and first.pairs_compared > 0
    save_sessions(store, new, first_day=22, last_day=24, key="n")
    second = mine(store, settings, now=_at(25))

    scratch = Store(tmp_path / "scratch.db")
    save_sessions(scratch, old, first_day=1, last_day=20)
    save_sessions(scratch, new, first_day=22, last_day=24, key="n")
    once = mine(scratch, settings, now=_at(25))
    assert _tasks(second, ids=False) == _tasks(once, ids=False)
    assert second.clusters == once.clusters and len(second.tasks) > 20
    store.mining.clear()  # and from scratch in the same store
    assert _tasks(mine(store, settings, now=_at(25))) == _tasks(second)
    # the old prompts kept their clusters; only the new ones were compared, each with at
    # most every cluster
    assert second.prompts_reused == first.prompts - first.dropped.get("correction_by_role", 0)
    assert second.pairs_compared <= len(new) * second.clusters
    assert second.pairs_compared * 5 < once.pairs_compared
    store.close()
    scratch.close()


def test_prompts_leaving_the_lookback_still_match_scratch(tmp_path: Path) -> None:
    texts = prompts(900, seed=9)
    settings = Settings(lookback_days=20)
    store = Store(tmp_path / "nightly.db")
    save_sessions(store, texts[:800], first_day=1, last_day=20)
    mine(store, settings, now=_at(20))
    save_sessions(store, texts[800:], first_day=22, last_day=24, key="n")
    later = mine(store, settings, now=_at(25))  # days 1-4 have left the lookback

    scratch = Store(tmp_path / "scratch.db")
    save_sessions(scratch, texts[:800], first_day=1, last_day=20)
    save_sessions(scratch, texts[800:], first_day=22, last_day=24, key="n")
    once = mine(scratch, settings, now=_at(25))
    assert later.dropped.get("outside_lookback", 0) > 0
    assert _tasks(later, ids=False) == _tasks(once, ids=False)
    assert later.clusters == once.clusters
    assert later.prompts_reused > 0 and later.pairs_compared * 2 < once.pairs_compared
    store.close()
    scratch.close()


def test_a_changed_threshold_or_forgotten_sessions_cluster_from_scratch(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    save_sessions(store, prompts(200, seed=3), first_day=1, last_day=10)
    first = mine(store, Settings(), now=_at(12))
    again = mine(store, Settings(), now=_at(12))
    intents = first.prompts - first.dropped.get("correction_by_role", 0)
    assert again.prompts_reused == intents and again.pairs_compared == 0
    other = mine(store, Settings(similarity=0.8), now=_at(12))
    assert other.prompts_reused == 0
    store.forget.delete(["claude_code:k0"], [])
    assert store.mining.states(["/home/u/app"]) == {}
    assert mine(store, Settings(similarity=0.8), now=_at(12)).prompts_reused == 0
    store.close()


def _with_stances(group: list[Intent], seed: int) -> list[Intent]:
    """Give some intents corrections that want or forbid npm / pnpm (contradicting ones
    keep requests apart)."""
    r = random.Random(seed)
    for it in group:
        if r.random() < 0.15:
            kind = r.choice(["contains", "not_contains"])
            check = Check(kind=kind, value=r.choice(["npm", "pnpm"]), origin="correction")
            it.corrections.append(Feedback(label="correction", text="no", checks=[check]))
    return group


@pytest.mark.parametrize("seed", range(8))
def test_two_runs_cluster_as_all_pairs_from_scratch(seed: int) -> None:
    # a first run over a window of time, a second over a later one (the oldest left, new
    # ones came): the second equals comparing every pair of its intents from scratch (with
    # stances leaving the lookback it may decide everything again: equal all the same)
    r = random.Random(seed)
    n = r.choice([400, 900])
    group = _with_stances(intents(prompts(n, seed=seed + 50, names=r.choice([0, 300]))), seed)
    first_end, second_start = int(n * r.uniform(0.5, 0.9)), r.randint(0, n // 3)
    states: dict[str, dict] = {}
    _cluster(group[:first_end], 72.0, Counter(), states)
    again = _cluster(group[second_start:], 72.0, Counter(), states)
    reference = cluster_all_pairs(group[second_start:], 72.0)
    assert [[(i.session_id, i.seq) for i in c] for c in again] == [
        [(i.session_id, i.seq) for i in c] for c in reference
    ]
