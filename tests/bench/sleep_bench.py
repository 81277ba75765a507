"""sleep-bench: a public offline benchmark of learning (docs/benchmarks.md, "sleep-bench").

    python -m tests.bench.sleep_bench --quick --json   # the simulator as target and optimizer
    python -m tests.bench.sleep_bench --target real    # the real 1.5B as target (slow)
    python -m tests.bench.sleep_bench --record         # write the users' sessions again

**Users.** Fictional users (:data:`USERS`), each with recurring tasks asked four times in other
words and corrected each time in other words ("no, use pnpm instead of npm", "we use pytest
here, not unittest" …), and *everyday probes*: requests no correction is about ("write a
haiku about the build"), one of them an answer that must legitimately name the tool a careless
rule forbids ("how do I publish the package to the npm registry?"). Their sessions are stored
in ``tests/bench/sleep_bench_users/<user>.json.xz``, as the pinned real CLIs (``claude -p``,
``codex exec``, against the simulator on loopback) wrote them (:func:`record`); loading one
moves it to a fresh HOME and project (paths and times), nothing else. ``claude -p`` and
``codex exec`` sessions are headless, so the bench mines them with ``mine_headless = true``.

**Held out** is the project's own split (docs/mining.md): each task's latest occurrence is
its test occurrence, never trained or gated on. The held-out items are those test
occurrences; the probes are scored beside them.

**Arms**, each per user per seed in a fresh store, HOME and project:

* ``no_document``: the document as the user has it (no rules);
* ``one_shot``: one optimizer call (the night's reflect prompt) given every corrected task
  of the train and val occurrences with its corrections and failed checks, asked for one
  rule per corrected task; its rules written into the document, no replay, no gate;
* ``gate_off``: :func:`~skillopt_sleep.night.run.run_night` with the val gate accepting every
  edit (the bench swaps the trainer's ``gate`` for one that says yes; the poisoning screen
  and the token budget still apply), its proposal adopted;
* ``full_night``: ``run_night`` as shipped, its proposal adopted.

**Scores.** Every item (held-out occurrences and probes) is replayed through the target
under the arm's document with the night's own :class:`~skillopt_sleep.night.replay.Replayer`
(the document where the agent loads it, the task's checks), through a response cache shared
by the arms of one user and seed (the same document and prompt: one answer). ``heldout``:
the share of held-out occurrences whose checks all pass; ``heldout_score``: their mean
check score (the night's test score); ``collateral``: items (held-out occurrences of any task
and probes) scoring lower under the arm's document than under no document; ``tokens_per_turn``:
the estimated tokens of the trained document (memory: loaded whole in every turn);
``calls``: the model calls the arm made to train (scoring not counted: ``eval_calls``).

**Seeds** change two things: the optimizer's order of edits (which of its derived, harmful
and useless edits it proposes first; seed 0 derived first, 1 harmful first, 2 useless first,
later seeds a shuffle) and which wording of each task is held out (the time order of each
task's four sessions is shuffled by the seed; seed 0 keeps the recorded order).

The aggregate per arm: ``heldout`` and ``heldout_score`` the mean over seeds (each seed's
value pools the users' items), ``collateral`` and ``calls`` totals over users and seeds,
``tokens_per_turn`` the mean over users and seeds; ``per_seed`` holds each seed's values.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import lzma
import os
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]
USERS_DIR = Path(__file__).resolve().parent / "sleep_bench_users"
ARMS = ("no_document", "one_shot", "gate_off", "full_night")
#: the optimizer's edit orders of seeds 0, 1, 2 (later seeds: a seeded shuffle)
ORDERS = (
    ("derived", "harmful", "useless"),
    ("harmful", "derived", "useless"),
    ("useless", "derived", "harmful"),
)
#: where each arm's HOME and project are built, the same path every time (one run at a time:
#: a file lock beside it)
WORLD = Path(tempfile.gettempdir()) / "sleep-bench-world"
#: the user's document before any night
DOCUMENT = "# Project rules\n"
#: the model name the real CLIs were configured with when the sessions were recorded
SIM_MODEL = "sim-demo"
#: the real model's backend (``base_url`` set when served); answers are one command long
REAL_TARGET: dict[str, Any] = {
    "name": "openai_compatible",
    "model": "qwen2.5-coder-1.5b-instruct",
    "api_key": "local",
    "max_tokens": 32,
    "temperature": 0.7,
    "timeout": 900,
}


# ------------------------------------------------------------------------------ the users
@dataclass(frozen=True)
class Recurring:
    """A recurring task: the target's characteristic answer (``answer``, to requests matching
    ``match``), each time asked (``asks``) and the user's correction after it (``fixes``)."""

    key: str
    match: str
    answer: str
    asks: tuple[str, ...]
    fixes: tuple[str, ...]


@dataclass(frozen=True)
class Probe:
    """An everyday request no correction is about, with the checks its answer must pass."""

    key: str
    prompt: str
    match: str
    answer: str
    checks: tuple[tuple[str, str], ...]
    #: what a careless rule would break here
    note: str = ""


@dataclass(frozen=True)
class User:
    name: str
    project: str
    about: str
    tasks: tuple[Recurring, ...]
    probes: tuple[Probe, ...]
    #: the optimizer's careless edits for this user and its vacuous ones
    harmful: tuple[str, ...]
    useless: tuple[str, ...] = ("Be helpful and precise.",)


_PNPM = (
    "no, use pnpm instead of npm",
    "we use pnpm here, not npm",
    "no, pnpm not npm",
    "use pnpm instead of npm",
)
#: how each of a task's four asks is framed around its core words (mining clusters by content
#: words, so the framings share at most one content word across tasks)
FRAMES = (
    "how do I {}?",
    "how can I {} quickly?",
    "can you {}?",
    "how should I {} here?",
)


def _asks(core: str) -> tuple[str, ...]:
    return tuple(f.format(core) for f in FRAMES)


USERS: tuple[User, ...] = (
    User(
        name="maya",
        project="storefront",
        about="a Node user: pnpm, not npm; vitest, not jest",
        tasks=(
            Recurring(
                "install",
                r"install the dependencies",
                "Run `npm install`.",
                _asks("install the dependencies"),
                _PNPM,
            ),
            Recurring(
                "tests",
                r"unit tests",
                "Run `npx jest`.",
                _asks("run the unit tests"),
                (
                    "no, we use vitest, not jest",
                    "use vitest instead of jest",
                    "no, vitest not jest",
                    "we use vitest here, not jest",
                ),
            ),
            Recurring(
                "dev",
                r"dev server",
                "Run `npm run dev`.",
                _asks("start the dev server"),
                (_PNPM[3], _PNPM[0], _PNPM[2], _PNPM[1]),
            ),
        ),
        probes=(
            Probe(
                "publish",
                "how do I publish the package to the npm registry? answer with one command",
                r"publish",
                "Run `npm publish`; it uploads to registry.npmjs.org.",
                (("regex", r"\bp?npm\b"),),
                "the answer must name npm (or pnpm): a rule never to mention npm breaks it",
            ),
            Probe(
                "regex",
                "explain what the regex ^[a-z]+$ matches, in one sentence",
                r"regex",
                "It matches a whole line of lowercase letters only, such as `hello`.",
                (("contains", "lowercase"),),
            ),
            Probe(
                "haiku",
                "write a haiku about the build",
                r"haiku",
                "Green checks at midnight / the bundle compiles at last / ship it before dawn",
                (("min_chars", "40"),),
            ),
        ),
        harmful=("Never mention `npm`.",),
    ),
    User(
        name="ravi",
        project="ledger",
        about="a Python user: pytest, not unittest; ruff, not flake8; uv, not pip",
        tasks=(
            Recurring(
                "tests",
                r"run the tests",
                "Run `python -m unittest discover`.",
                _asks("run the tests"),
                (
                    "we use pytest here, not unittest",
                    "no, use pytest instead of unittest",
                    "no, pytest not unittest",
                    "use pytest instead of unittest",
                ),
            ),
            Recurring(
                "lint",
                r"lint the code",
                "Run `flake8 .`.",
                _asks("lint the code"),
                (
                    "no, use ruff instead of flake8",
                    "we use ruff here, not flake8",
                    "no, ruff not flake8",
                    "use ruff instead of flake8",
                ),
            ),
            Recurring(
                "add",
                r"requests package",
                "Run `pip install requests`.",
                _asks("add the requests package"),
                (
                    "no, use uv, not pip",
                    "use uv instead of pip",
                    "we use uv here, not pip",
                    "no, uv not pip",
                ),
            ),
        ),
        probes=(
            Probe(
                "upgrade-pip",
                "how do I upgrade pip itself? answer with one command",
                r"upgrade pip",
                "Run `python -m pip install --upgrade pip`.",
                (("contains", "pip"),),
                "the answer must name pip: a rule to use uv instead of pip everywhere breaks it",
            ),
            Probe(
                "stash",
                "what does git stash do, in one sentence?",
                r"stash",
                "It shelves your uncommitted changes; bring them back with `git stash pop`.",
                (("contains", "stash"),),
            ),
            Probe(
                "haiku",
                "write a haiku about the nightly build",
                r"haiku",
                "Green checks at midnight / the wheel builds clean at last / ship it before dawn",
                (("min_chars", "40"),),
            ),
        ),
        harmful=("Keep answers under 12 characters.",),
    ),
)


def _user(name: str) -> User:
    return next(u for u in USERS if u.name == name)


def order_of(seed: int) -> tuple[str, ...]:
    """The optimizer's order of edit groups for ``seed``."""
    if seed < len(ORDERS):
        return ORDERS[seed]
    groups = list(ORDERS[0])
    random.Random(f"order:{seed}").shuffle(groups)
    return tuple(groups)


def persona(user: User, order: tuple[str, ...] = ORDERS[0], models: tuple[str, ...] = ()) -> str:
    """The simulator persona for ``user``: the probes' answers first, then the tasks'
    characteristic mistakes; the optimizer proposes ``order``'s groups."""
    answers = [(p.match, p.answer) for p in user.probes] + [(t.match, t.answer) for t in user.tasks]
    body = "".join(
        f"\n[[answers]]\nmatch = {json.dumps(m)}\ntext = {json.dumps(a)}\n" for m, a in answers
    )
    return (
        f"name = {json.dumps('sleep-bench-' + user.name)}\nmodels = {json.dumps(list(models))}\n"
        'default_answer = "Understood, I will do that."\n'
        + body
        + f"\n[optimizer]\norder = {json.dumps(list(order))}\n"
        + f"useless_edits = {json.dumps(list(user.useless))}\n"
        + f"harmful_edits = {json.dumps(list(user.harmful))}\n"
    )


def conversations(user: User) -> list[tuple[str, int, str, str, str]]:
    """The user's sessions in the order recorded: ``(task, ask index, agent, prompt,
    correction)``; round ``i`` asks every task's ``i``-th wording, the agents alternating."""
    out = []
    for i in range(min(len(t.asks) for t in user.tasks)):
        for k, t in enumerate(user.tasks):
            agent = ("claude_code", "codex")[(i + k) % 2]
            out.append((t.key, i, agent, t.asks[i], t.fixes[i]))
    return out


# ------------------------------------------------------------------------------ recording
_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)?")


def _session_files(home: Path) -> set[Path]:
    return {
        *home.glob(".claude/projects/*/*.jsonl"),
        *home.glob(".codex/sessions/**/*.jsonl"),
    }


def _slug(project: Path) -> str:
    return "".join(c if c.isalnum() else "-" for c in str(project))


def record(names: list[str], real: bool = True, out: Path = USERS_DIR) -> list[Path]:
    """Write each user's sessions again: ``real``: asked with the pinned real CLIs (``claude
    -p``, ``codex exec``; ``npm ci`` installs them) in a sandbox HOME against the simulator
    playing the user's target; else written by ``skillopt_sleep.testing.sessions`` (the
    stand-in when the CLIs are missing). Paths become placeholders. Returns the files."""
    from skillopt_sleep.simulator import serve
    from skillopt_sleep.simulator.persona import persona_from_dict
    from skillopt_sleep.testing.sessions import write_claude_session, write_codex_session

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        user = _user(name)
        with tempfile.TemporaryDirectory(prefix="sleep-bench-rec-") as tmp:
            root = Path(tmp).resolve()
            home, project = root / "home", root / user.project
            home.mkdir()
            project.mkdir()
            saved = {k: os.environ.get(k) for k in ("HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR")}
            os.environ["HOME"] = str(home)
            os.environ.pop("CODEX_HOME", None)
            os.environ.pop("CLAUDE_CONFIG_DIR", None)
            sessions: list[dict[str, Any]] = []
            versions: dict[str, str] = {}
            try:
                import tomllib

                from tests.helpers.deployed import SIM_KEY, ask

                spec = persona_from_dict(tomllib.loads(persona(user, models=(SIM_MODEL,))))
                with serve(spec, api_key=SIM_KEY) as sim:
                    start = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
                    for n, (task, i, agent, prompt, fix) in enumerate(conversations(user)):
                        before = _session_files(home)
                        if real:
                            answer = ask(agent, sim.url, project, prompt)
                            ask(agent, sim.url, project, fix, more=True)
                        else:
                            answer = next(t.answer for t in user.tasks if t.key == task)
                            writer = (
                                write_claude_session
                                if agent == "claude_code"
                                else write_codex_session
                            )
                            when = start + dt.timedelta(minutes=10 * n)
                            writer(home, project, [(prompt, answer, fix)], when=when)
                        new = sorted(_session_files(home) - before)
                        assert new, f"{agent} wrote no session for {prompt!r}"
                        for f in new:
                            text = f.read_text("utf-8")
                            for old, ph in (
                                (_slug(project), "__SLUG__"),
                                (str(project), "__PROJECT__"),
                                (str(home), "__HOME__"),
                                (str(root), "__ROOT__"),
                            ):
                                text = text.replace(old, ph)
                            sessions.append(
                                {
                                    "task": task,
                                    "ask": i,
                                    "agent": agent,
                                    "prompt": prompt,
                                    "correction": fix,
                                    "answered": answer.strip()[:200],
                                    "file": f.name,
                                    "text": text,
                                }
                            )
                if real:
                    versions = _cli_versions()
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        path = out / f"{name}.json.xz"
        data = {
            "user": name,
            "project": user.project,
            "written_by": "the real CLIs" if real else "skillopt_sleep.testing.sessions",
            "cli_versions": versions,
            "sessions": sessions,
        }
        # xz: the CLIs' sessions repeat their system prompts (~1 MB a user as JSON, ~40 kB)
        raw = (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
        path.write_bytes(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))
        written.append(path)
    return written


def _cli_versions() -> dict[str, str]:
    import subprocess

    from tests.helpers.clis import agent_binary, cli_env

    got = {}
    for name in ("claude", "codex"):
        done = subprocess.run(
            [agent_binary(name), "--version"],
            capture_output=True,
            text=True,
            env=cli_env(),
            timeout=60,
            check=False,
        )
        got[name] = done.stdout.strip()
    return got


# ------------------------------------------------------------------------------ a world
def _shift(text: str, to: dt.datetime) -> str:
    """Every ISO time in ``text`` moved by the same amount, the first one to ``to``."""
    first = _ISO.search(text)
    if first is None:
        return text
    delta = to - _parse(first.group(0))

    def moved(m: re.Match[str]) -> str:
        raw = m.group(0)
        when = _parse(raw) + delta
        if raw.endswith("Z"):
            frac = raw[19:-1]
            return (
                when.strftime("%Y-%m-%dT%H:%M:%S")
                + (f".{when.microsecond:06d}"[: len(frac)] if frac else "")
                + "Z"
            )
        return when.isoformat()

    return _ISO.sub(moved, text)


def _parse(raw: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def load_sessions(name: str) -> dict[str, Any]:
    return dict(json.loads(lzma.decompress((USERS_DIR / f"{name}.json.xz").read_bytes())))


def held_out_order(user: User, seed: int) -> dict[str, list[int]]:
    """Per task, its asks in the time order of ``seed`` (seed 0: as recorded): the last one
    is held out as the test occurrence, the one before it as val."""
    out = {}
    for t in user.tasks:
        order = list(range(len(t.asks)))
        if seed:
            random.Random(f"{seed}:{user.name}:{t.key}").shuffle(order)
        out[t.key] = order
    return out


def build_world(root: Path, user: User, seed: int) -> tuple[Path, Path]:
    """The user's recorded sessions moved into ``root/home`` and ``root/<project>``, each
    task's asks in ``seed``'s time order, all within the last two days. Returns (home,
    project)."""
    data = load_sessions(user.name)
    home, project = root / "home", root / user.project
    home.mkdir(parents=True)
    project.mkdir(parents=True)
    (project / "CLAUDE.md").write_text(DOCUMENT, encoding="utf-8")
    order = held_out_order(user, seed)
    keys = [t.key for t in user.tasks]
    base = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(days=2)
    for s in data["sessions"]:
        slot = order[s["task"]].index(s["ask"])
        when = base + dt.timedelta(minutes=15 * (slot * len(keys) + keys.index(s["task"])))
        text = s["text"]
        for ph, real in (
            ("__SLUG__", _slug(project)),
            ("__PROJECT__", str(project)),
            ("__HOME__", str(home)),
            ("__ROOT__", str(root)),
        ):
            text = text.replace(ph, real)
        text = _shift(text, when)
        if s["agent"] == "claude_code":
            path = home / ".claude" / "projects" / _slug(project) / s["file"]
        else:
            tail = s["file"].split("-", 6)[-1] if s["file"].startswith("rollout-") else s["file"]
            stamp = when.strftime("%Y-%m-%dT%H-%M-%S")
            path = home / ".codex" / "sessions" / when.strftime("%Y/%m/%d")
            path = path / f"rollout-{stamp}-{tail}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return home, project


# ------------------------------------------------------------------------------ the arms
@dataclass
class Scoring:
    """Replays items under a document through the target, with the night's replayer, cached
    in ``store`` (one per user and seed: the arms share answers to the same requests)."""

    settings: Any
    store: Any
    target_path: Path
    calls: int = 0
    _replayer: Any = None
    _cost: Any = None

    def __post_init__(self) -> None:
        from skillopt_sleep.backends import get_backend
        from skillopt_sleep.delivery.where import where_loaded
        from skillopt_sleep.night.replay import Cost, Meter, Replayer

        s = self.settings
        target = get_backend(s.target)
        where = where_loaded(self.target_path, agent=s.document.agent, project=s.project)
        self._cost = Cost()
        meter = Meter(
            target, self.store, self._cost, max_calls=10**6, max_tokens=10**12, role="target"
        )
        self._replayer = Replayer(
            meter, None, metric=s.gate_metric, place=where.place if where else None
        )

    def score(self, items: list[Any], text: str) -> dict[str, float]:
        got = self._replayer.run(items, text)
        self.calls = self._cost.calls
        return {tid: sc.score for tid, sc in got.items()}

    def samples(self, items: list[Any], text: str, n: int) -> dict[str, list[float]]:
        """Each item's score at samples 0..n-1 under ``text`` (the sample index is the
        request's ``x-skillopt-sample``: the real model's seed for it)."""
        runs = self._replayer.run_many([(items, text)] * n, samples=list(range(n)))
        self.calls = self._cost.calls
        return {t.id: [run[t.id].score for run in runs] for t in items}


def probe_tasks(user: User) -> list[Any]:
    from skillopt_sleep.models import Check, Task

    return [
        Task(
            id=f"probe:{p.key}",
            intent=p.prompt,
            checks=[Check(kind=k, value=v, origin="answer") for k, v in p.checks],
            split="test",
            synthetic=True,
        )
        for p in user.probes
    ]


@contextlib.contextmanager
def gate_off() -> Iterator[None]:
    """The night's val gate accepting every edit (bench only: the trainer's ``gate`` swapped
    for the duration)."""
    from skillopt_sleep.night import train
    from skillopt_sleep.night.gate import Verdict
    from skillopt_sleep.night.replay import mean

    real = train.gate

    def yes(current: dict[str, Any], candidate: dict[str, Any], **_: Any) -> Verdict:
        before, after = mean(current), mean(candidate)
        return Verdict(True, f"gate off: val {before:.3f} -> {after:.3f}", before, after, [])

    train.gate = yes
    try:
        yield
    finally:
        train.gate = real


def one_shot(store: Any, settings: Any, tasks: list[Any], budget: int) -> tuple[list[str], int]:
    """One optimizer call: the night's reflect prompt with every corrected task (its train and
    val occurrences' prompts, corrections, the answer the user corrected and the checks it
    failed), asking for ``budget`` rules. Returns (rules, model calls)."""
    from skillopt_sleep.backends import get_backend
    from skillopt_sleep.delivery.document import apply_edit, parse_edits
    from skillopt_sleep.models import CompletionRequest
    from skillopt_sleep.night import prompts
    from skillopt_sleep.night.replay import Cost, Meter

    failures = []
    for t in tasks:
        answer = _corrected_answer(store, t)
        failures.append(
            {
                "task": t.intent,
                "answer": answer,
                "score": 0.0,
                "failed_checks": [
                    {"kind": c.kind, "value": c.value, "evidence": c.evidence} for c in t.checks
                ],
                "corrections": t.corrections[:5],
            }
        )
    prompt = prompts.reflect_prompt(
        contrasts=[],
        rules=[],
        failures=failures,
        successes=[],
        rejected=[],
        budget=budget,
        user_refused=[],
        skill=None,
    )
    cost = Cost()
    meter = Meter(
        get_backend(settings.optimizer),
        store,
        cost,
        max_calls=10,
        max_tokens=10**9,
        role="optimizer",
    )
    comp, _ = meter.complete(CompletionRequest(prompt=prompt, purpose="reflect", max_tokens=2000))
    data = prompts.extract_json(comp.text, backend=meter.backend.name)
    rules: list[str] = []
    for e in parse_edits(data)[:budget]:
        if e.op in ("add", "replace", "delete"):
            rules = apply_edit(rules, e) or rules
    return rules, cost.calls


def _corrected_answer(store: Any, task: Any) -> str:
    """The agent's answer the user corrected, from the stored session of the task's first
    corrected occurrence ("" when not found)."""
    for occ in task.occurrences:
        if not occ.corrected:
            continue
        msgs = store.sessions.messages(occ.session_id)
        after = [m for m in msgs if m.seq > occ.seq and m.role == "assistant"]
        if after:
            return str(after[0].text)[:1500]
    return ""


@dataclass
class Run:
    """One user and seed: each arm's document and scores."""

    user: str
    seed: int
    arms: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_user_seed(
    root: Path, user: User, seed: int, target: dict[str, Any] | None, say: Callable[[str], None]
) -> Run:
    """Every arm for ``user`` at ``seed``; ``target``: the target backend (None: the
    simulator)."""
    import tomllib  # noqa: F401  (the persona is checked by the simulator)

    from skillopt_sleep.delivery.document import Document, delivery_cost
    from skillopt_sleep.mining.judges import scorable
    from skillopt_sleep.mining.mine import mine
    from skillopt_sleep.mining.split import views
    from skillopt_sleep.night.run import run_night
    from skillopt_sleep.proposals import adopt
    from skillopt_sleep.simulator import serve
    from skillopt_sleep.sources.ingest import harvest
    from skillopt_sleep.store import Store
    from tests.helpers.night import api_backend, night_settings

    out = Run(user.name, seed)
    root.mkdir(parents=True)
    persona_file = root / "persona.toml"
    persona_file.write_text(persona(user, order_of(seed)), encoding="utf-8")
    with serve(persona_file) as sim:
        sim_backend = api_backend(sim.url, 1)
        tgt = target or sim_backend

        def world(arm: str) -> tuple[Any, Any, Path]:
            """The arm's store and settings, its HOME and project built again in
            :data:`WORLD` (every arm and every run the same paths: a task's id hashes its
            project's path, and a night's mini-batches follow the ids)."""
            shutil.rmtree(WORLD, ignore_errors=True)
            home, project = build_world(WORLD, user, seed)
            doc = project / "CLAUDE.md"
            settings = night_settings(
                home, project, doc, sim.url, target=tgt, optimizer=sim_backend, mine_headless=True
            )
            (root / arm).mkdir()
            return Store(root / arm / "skillopt.db"), settings, doc

        # the items, mined as a night mines them: each task's test occurrence, and the probes
        store, settings, doc = world("eval")
        harvest(store, settings)
        tasks = [t for t in mine(store, settings).tasks if scorable(t, settings.rubric)]
        replayed = views(tasks)
        heldout = [t for t in replayed if t.split == "test"]
        probes = probe_tasks(user)
        items = heldout + probes
        scoring = Scoring(settings, store, doc)

        def scored(arm: str, text: str, calls: int, extra: dict[str, Any]) -> None:
            t0 = time.perf_counter()
            got = scoring.score(items, text)
            rules = Document.parse(text).rules
            out.arms[arm] = {
                "scores": got,
                "rules": rules,
                "tokens_per_turn": delivery_cost(doc, text, rules, 10**6)["per_turn_tokens"],
                "calls": calls,
                "score_seconds": round(time.perf_counter() - t0, 3),
                **extra,
            }

        scored("no_document", DOCUMENT, 0, {})
        say(f"{user.name} seed {seed}: {len(heldout)} held-out occurrences, {len(probes)} probes")

        # one-shot: one optimizer call over the corrected tasks of train and val
        learn = [
            t
            for t in tasks
            if any(o.corrected and o.split in ("train", "val") for o in t.occurrences)
        ]
        rules, calls = one_shot(store, settings, learn, budget=len(learn))
        scored("one_shot", Document.parse(DOCUMENT).render(rules), calls, {})

        # the night, with the gate off and as shipped
        for arm in ("gate_off", "full_night"):
            arm_store, arm_settings, arm_doc = world(arm)
            # its own state folder too (staged proposals, the night lock, logs)
            os.environ["SKILLOPT_SLEEP_HOME"] = str(root / arm / "skillopt-home")
            t0 = time.perf_counter()
            with gate_off() if arm == "gate_off" else contextlib.nullcontext():
                result = run_night(arm_store, arm_settings)
            adopted = bool(result.proposal_id and str(result.status) == "succeeded")
            if adopted:
                assert result.proposal_id is not None
                adopt(arm_store, result.proposal_id, settings=arm_settings)
            text = arm_doc.read_text("utf-8")
            arm_store.close()
            scored(
                arm,
                text,
                result.cost.calls or 0,
                {
                    "status": str(result.status),
                    "adopted": adopted,
                    "night_test": [result.test_before, result.test_after],
                    # why the night ended as it did, and why its gate could not decide
                    "reason": result.summary.reason or result.error or None,
                    "undecided": result.summary.undecided,
                    "noise": result.summary.noise.model_dump() if result.summary.noise else None,
                    "night_seconds": round(time.perf_counter() - t0, 3),
                },
            )
        out.arms["_items"] = {
            "heldout": [t.id for t in heldout],
            "probes": [t.id for t in probes],
            "eval_calls": scoring.calls,
            # what a report calls each item: the held-out occurrence's words, the probe's key
            "labels": {t.id: t.intent for t in heldout} | {t.id: t.id for t in probes},
        }
        store.close()
    return out


# ------------------------------------------------------------------------------ numbers
def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _night_said(arm: dict[str, Any]) -> str:
    """How an arm's night ended, in a few words ("" for an arm without a night)."""
    if "status" not in arm:
        return ""
    why = arm.get("undecided") or arm.get("reason") or ""
    return f"{arm['status']}: {why}" if why else str(arm["status"])


def summarise(runs: list[Run], seeds: list[int]) -> dict[str, Any]:
    """The per-arm numbers (see the module docstring) from every user and seed."""
    arms: dict[str, Any] = {}
    for arm in ARMS:
        per_seed: list[dict[str, Any]] = []
        for seed in seeds:
            mine = [r for r in runs if r.seed == seed]
            held: list[float] = []
            score: list[float] = []
            tokens: list[float] = []
            worse: dict[str, list[str]] = {}
            calls = 0
            for r in mine:
                a, base, items = r.arms[arm], r.arms["no_document"], r.arms["_items"]
                held += [1.0 if a["scores"][i] >= 1.0 else 0.0 for i in items["heldout"]]
                score += [a["scores"][i] for i in items["heldout"]]
                worse[r.user] = [
                    items["labels"][i]
                    for i in items["heldout"] + items["probes"]
                    if a["scores"][i] < base["scores"][i] - 1e-9
                ]
                tokens.append(a["tokens_per_turn"])
                calls += a["calls"]
            per_seed.append(
                {
                    "seed": seed,
                    "order": list(order_of(seed)),
                    "heldout": round(_mean(held), 4),
                    "heldout_score": round(_mean(score), 4),
                    "collateral": sum(len(w) for w in worse.values()),
                    "tokens_per_turn": round(_mean(tokens), 1),
                    "calls": calls,
                    "worse": worse,
                    "rules": {r.user: r.arms[arm]["rules"] for r in mine},
                    "nights": {r.user: _night_said(r.arms[arm]) for r in mine},
                }
            )
        hs = [p["heldout"] for p in per_seed]
        arms[arm] = {
            "heldout": round(_mean(hs), 4),
            "collateral": sum(p["collateral"] for p in per_seed),
            "tokens_per_turn": round(_mean([p["tokens_per_turn"] for p in per_seed]), 1),
            "calls": sum(p["calls"] for p in per_seed),
            "heldout_score": round(_mean([p["heldout_score"] for p in per_seed]), 4),
            "heldout_min": min(hs),
            "heldout_max": max(hs),
            "per_seed": per_seed,
        }
    return arms


def run_benchmark(
    seeds: int = 3,
    users: tuple[str, ...] = (),
    target: str = "sim",
    say: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Every arm for every user and seed, in a temporary folder (its own HOME and
    ``SKILLOPT_SLEEP_HOME``); returns the JSON the command prints."""
    t0 = time.perf_counter()
    users = users or tuple(u.name for u in USERS)
    saved = {k: os.environ.get(k) for k in ("HOME", "SKILLOPT_SLEEP_HOME")}
    runs: list[Run] = []
    with (
        FileLock(str(WORLD) + ".lock"),
        tempfile.TemporaryDirectory(prefix="sleep-bench-") as tmp,
        _target(target, Path(tmp)) as tgt,
    ):
        os.environ["HOME"] = str(Path(tmp) / "nohome")
        os.environ["SKILLOPT_SLEEP_HOME"] = str(Path(tmp) / "skillopt-home")
        try:
            for seed in range(seeds):
                for name in users:
                    root = Path(tmp) / f"{name}-{seed}"
                    runs.append(run_user_seed(root, _user(name), seed, tgt, say))
                    shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(WORLD, ignore_errors=True)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    seed_list = list(range(seeds))
    return {
        "arms": summarise(runs, seed_list),
        "target": "simulator" if target == "sim" else REAL_TARGET["model"],
        "optimizer": "simulator",
        "users": list(users),
        "seeds": seed_list,
        "eval_calls": sum(r.arms["_items"]["eval_calls"] for r in runs),
        "sessions": {n: load_sessions(n)["written_by"] for n in users},
        "seconds": round(time.perf_counter() - t0, 2),
    }


@contextlib.contextmanager
def _target(kind: str, tmp: Path) -> Iterator[dict[str, Any] | None]:
    """The target backend: None (the simulator) or the real model, served for the run."""
    if kind == "sim":
        yield None
        return
    from tests.helpers import realmodel

    model = realmodel.fetch()
    with realmodel.serve(model, tmp / "realmodel.log") as server:
        yield {**REAL_TARGET, "base_url": server.base_url + "/v1"}


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> dict[str, Any]:
    p = argparse.ArgumentParser(
        prog="python -m tests.bench.sleep_bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="the simulator as target, 3 seeds")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--seeds", type=int, default=3, help="seeds (at least 1; default 3)")
    p.add_argument("--target", choices=("sim", "real"), default="sim")
    p.add_argument("--users", default=",".join(u.name for u in USERS))
    p.add_argument("--record", action="store_true", help="record the users' sessions again")
    p.add_argument(
        "--stand-in", action="store_true", help="with --record: write the sessions in-process"
    )
    p.add_argument(
        "--write-docs",
        nargs="?",
        const=str(ROOT / "docs" / "benchmarks.md"),
        metavar="PAGE",
        help="write the run's tables into the page's sleep-bench block for its target "
        "(default docs/benchmarks.md)",
    )
    args = p.parse_args(argv)
    users = tuple(x for x in args.users.split(",") if x)
    if args.record:
        for path in record(list(users), real=not args.stand_in):
            out(f"wrote {path} ({path.stat().st_size} bytes)")
        return {}
    target = "sim" if args.quick else args.target
    res = run_benchmark(
        seeds=max(1, args.seeds),
        users=users,
        target=target,
        say=(lambda m: None) if args.json else out,
    )
    if args.json:  # exactly {"arms": {arm: {heldout, collateral, tokens_per_turn, calls, …}}}
        out(json.dumps({"arms": res["arms"]}, indent=1))
    else:
        out(render_docs(res))
    if args.write_docs:
        write_docs(Path(args.write_docs), res)
        if not args.json:
            out(f"wrote the {target} block of {args.write_docs}")
    return res


def _block_marks(target: str) -> tuple[str, str]:
    return f"<!-- sleep-bench:{target}:begin -->", f"<!-- sleep-bench:{target}:end -->"


def write_docs(page: Path, res: dict[str, Any]) -> None:
    """Put :func:`render_docs` of ``res`` between the page's markers for its target
    (``<!-- sleep-bench:sim:begin -->`` … ``end``); nothing else of the page changes."""
    kind = "sim" if res["target"] == "simulator" else "real"
    begin, end = _block_marks(kind)
    text = page.read_text("utf-8")
    if begin not in text or end not in text:
        raise SystemExit(f"{page} has no {begin} … {end} block")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    page.write_text(f"{head}{begin}\n{render_docs(res)}\n{end}{tail}", encoding="utf-8")


def render_docs(res: dict[str, Any]) -> str:
    """The run as docs/benchmarks.md shows it: what ran, the arms × seeds table, each seed's
    documents and the items they made worse, and where the full night does not win."""
    import subprocess

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    who = ", ".join(f"{u} ({w})" for u, w in res["sessions"].items())
    lines = [
        f"Generated by `python -m tests.bench.sleep_bench{' --quick' if res['target'] == 'simulator' else ' --target real'} "
        f"--write-docs` on {when}, commit {commit}: target **{res['target']}**, optimizer "
        f"**{res['optimizer']}**; users {who}; seeds {', '.join(map(str, res['seeds']))}; "
        f"{res['eval_calls']} scoring calls; {res['seconds']:.1f} s.",
        "",
        render_table(res),
        "",
        "Each seed's documents (the rules each arm ended with) and the items they made worse "
        "than no document (a held-out occurrence by its words, a probe by its key):",
        "",
        "| seed (optimizer order) | arm | user | rules | made worse | the night |",
        "|---|---|---|---|---|---|",
    ]
    for arm in ARMS[1:]:
        for p in res["arms"][arm]["per_seed"]:
            for user, rules in p["rules"].items():
                lines.append(
                    f"| {p['seed']} ({', '.join(p['order'])}) | {arm} | {user} | "
                    + (" ".join(rules) or "—")
                    + " | "
                    + ("; ".join(p["worse"][user]) or "—")
                    + " | "
                    + (p.get("nights", {}).get(user) or "—").replace("|", "/")
                    + " |"
                )
    lines += ["", "Where the full night does not beat another arm (computed from the table):", ""]
    lines += [f"- {x}" for x in not_won(res)] or ["- nowhere in this run"]
    return "\n".join(lines)


def not_won(res: dict[str, Any]) -> list[str]:
    """Each seed and metric where the full night is not strictly better than one-shot or
    gate-off (held-out: higher is better; collateral, tokens, calls: lower)."""
    night = res["arms"]["full_night"]["per_seed"]
    out = []
    for other in ("one_shot", "gate_off"):
        for mine, theirs in zip(night, res["arms"][other]["per_seed"], strict=True):
            for metric, higher in (
                ("heldout", True),
                ("collateral", False),
                ("tokens_per_turn", False),
                ("calls", False),
            ):
                a, b = mine[metric], theirs[metric]
                if (a <= b) if higher else (a >= b):
                    word = "equal" if a == b else "worse"
                    out.append(
                        f"seed {mine['seed']}, {metric}: full_night {a} vs {other} {b} ({word})"
                    )
    return out


def render_table(res: dict[str, Any]) -> str:
    """The arms × seeds table of docs/benchmarks.md (mean and min–max over seeds)."""
    seeds = res["seeds"]
    head = "| arm | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | min–max |"
    lines = [head, "|---" * (len(seeds) + 3) + "|"]
    for metric, label, fmt in (
        ("heldout", "held-out pass rate", "{:.2f}"),
        ("collateral", "collateral (items made worse)", "{:d}"),
        ("tokens_per_turn", "document tokens per turn", "{:.1f}"),
        ("calls", "model calls to train", "{:d}"),
    ):
        lines.append(f"| **{label}** |" + " |" * (len(seeds) + 2))
        for arm in ARMS:
            a = res["arms"][arm]
            vals = [p[metric] for p in a["per_seed"]]
            cells = [fmt.format(v) for v in vals]
            lo, hi = min(vals), max(vals)
            mean = _mean([float(v) for v in vals])
            lines.append(
                f"| {arm} | "
                + " | ".join(cells)
                + f" | {mean:.2f} | {fmt.format(lo)}–{fmt.format(hi)} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
