"""Whole answers (skillopt_sleep/mining/integrity.py): what makes an answer no answer, and
that a broken one scores 0 whatever its task's checks say."""

from __future__ import annotations

import os

import pytest

from skillopt_sleep.mining.integrity import broken

CUT_TEST = "import pytest\nfrom dates import parse_date\n\nclass"
GOOD_TEST = (
    "```python\nimport pytest\nfrom dates import parse_date\n\n\n"
    "def test_iso():\n    assert parse_date('2024-01-02').year == 2024\n```\n"
)


@pytest.mark.parametrize(
    "answer,kinds",
    [
        ("", ["empty"]),
        ("  \n\t", ["empty"]),
        ("pytest", ["bare"]),
        ("`pnpm`", ["bare"]),
        (CUT_TEST, ["python"]),
        (GOOD_TEST[:60], ["cut"]),
        ("Here it is:\n```python\ndef f(:\n    pass\n```", ["python"]),
        ('```json\n{"a": 1,}\n```', ["json"]),
        ("```toml\n[tool\nx = 1\n```", ["toml"]),
        ("```bash\nfor f in *.py; do\n  echo $f\n```", ["shell"]),
        # prose cut off: inside a word, after a word no sentence ends on, inside code or quotes
        ("Added a retry mechanism to the fetch client so tha", ["cut"]),
        ("It reads the date and returns the", ["cut"]),
        ("Run `pnpm inst", ["cut"]),
        ('git commit -m "Add retry to the fe', ["cut"]),
        ("The parser handles every date for- ", ["cut"]),
    ],
)
def test_broken_answers_name_their_fault(answer: str, kinds: list[str]) -> None:
    assert [f.kind for f in broken(answer)] == kinds


@pytest.mark.parametrize(
    "answer",
    [
        "Run `pnpm install`.",
        "Fix typo",
        'git commit -m "Add retry to the fetch client"',
        GOOD_TEST,
        "Sure, here it is:\n" + GOOD_TEST + "\nRun it with `pytest -q`.",
        '```json\n{"a": 1}\n```',
        '```bash\nfor f in *.py; do echo "$f"; done\n```',
        "```rust\nfn main( {\n```",  # no parser shipped for it: judged by the checks alone
        "def add(a: int, b: int) -> int:\n    return a + b\n",
        "It parses dates.\n\n- handles ISO\n- handles the",  # a list item may end anywhere
        "Use the `pnpm` package manager for this.",
        "See the docs at https://pnpm.io/cli/install",  # a line may end on a link
    ],
)
def test_whole_answers_have_no_fault(answer: str) -> None:
    assert broken(answer) == []


@pytest.mark.parametrize(
    "subject",
    ["Add retry to the fetch client", "Add retries to the fetch client", "Use pnpm for this"],
)
def test_a_commit_subject_needs_no_period(subject: str) -> None:
    assert broken(subject, "commit_message") == []
    # the same line as the answer to anything else stops before its sentence ends
    assert [f.kind for f in broken(subject)] == ["cut"]


def test_a_last_word_a_word_of_the_task_completes_was_cut() -> None:
    words = frozenset({"client", "dependencies"})
    assert [
        f.kind for f in broken("Add retry logic to the HTTP clie", "commit_message", words)
    ] == ["cut"]
    assert broken("Add retry logic to the HTTP client", "commit_message", words) == []
    assert [f.kind for f in broken("Run `pnpm install` to get the dependen", vocabulary=words)] == [
        "cut"
    ]


def test_a_broken_answer_scores_zero_whatever_its_checks_say(tmp_path) -> None:
    """Through the night's replayer against the simulator: a test file cut in half passes the
    task's checks (it mentions pytest, not unittest) and still scores 0, its fault shown."""
    from skillopt_sleep.backends import get_backend
    from skillopt_sleep.config import BackendConfig
    from skillopt_sleep.models import Check, Task
    from skillopt_sleep.night.replay import Cost, Meter, Replayer
    from skillopt_sleep.simulator import serve
    from skillopt_sleep.simulator.persona import persona_from_dict
    from skillopt_sleep.store import Store

    persona = persona_from_dict(
        {
            "name": "cut",
            "default_answer": "Sure.",
            "answers": [
                {"match": "cut test", "text": CUT_TEST},
                {"match": "whole test", "text": GOOD_TEST},
                {"match": "bare", "text": "pytest"},
            ],
        }
    )
    checks = [Check(kind="contains", value="pytest"), Check(kind="not_contains", value="unittest")]
    tasks = [
        Task(id=key, intent=f"write the {key} for parse_date", checks=checks)
        for key in ("cut test", "whole test", "bare")
    ]
    store = Store(tmp_path / "t.db")
    with serve(persona, api_key="sim-key") as sim:
        backend = get_backend(BackendConfig(name="anthropic", base_url=sim.url, api_key="sim-key"))
        meter = Meter(backend, store, Cost(), max_calls=10, max_tokens=10**9, role="target")
        got = Replayer(meter, None, metric="hard").run(tasks, "# rules\n")
    store.close()
    assert got["whole test"].score == 1.0
    # the cut file defines no test yet (its task asks for one) and does not parse
    for key, kinds in (("cut test", ["no_test", "python"]), ("bare", ["bare"])):
        assert got[key].score == 0.0 and got[key].hard == 0.0
        whole = [c for c in got[key].checks if c["kind"] == "whole"]
        assert [c["value"] for c in whole] == kinds and not any(c["passed"] for c in whole)
        # the task's own checks still say what they saw
        assert all(c["passed"] for c in got[key].checks if c["kind"] != "whole")


def test_tasks_score_shows_how_a_task_judges_an_answer(tmp_path) -> None:
    """``skillopt-sleep tasks score TASK_ID --answer-file F [--json]``: a task mined from a
    correction ("use pnpm") judges a good answer 1.0, the corrected one lower, a bare keyword
    and an empty answer 0 with their fault said; an unknown id is one line, exit 1."""
    import json
    from pathlib import Path

    from skillopt_sleep.testing.sessions import write_conversations
    from tests.helpers.cli_run import skillopt_in_process as skillopt

    home = Path(os.environ["HOME"])
    project = tmp_path / "webapp"
    project.mkdir()
    asks = [
        (
            "claude_code",
            [
                (
                    "how do I install the dependencies?",
                    "Run `npm install`.",
                    "no, use pnpm instead of npm",
                )
            ],
        ),
        ("codex", [("install the dependencies please", "Run `npm install`.", "use pnpm, not npm")]),
    ]
    write_conversations(home, project, asks)
    assert skillopt("harvest").returncode == 0
    [task] = json.loads(skillopt("tasks", "--json").stdout)
    assert task["checks"], task

    def score(text: str, *extra: str):
        answer = tmp_path / "answer.txt"
        answer.write_text(text, encoding="utf-8")
        return skillopt("tasks", "score", task["id"][:8], "--answer-file", str(answer), *extra)

    good = json.loads(score("Run `pnpm install` in the project root.", "--json").stdout)
    assert good["score"] == 1.0 and good["whole"] and good["task_id"] == task["id"]
    corrected = json.loads(score("Run `npm install`.", "--json").stdout)
    assert corrected["score"] < 1.0 and corrected["whole"]
    for text, fault in (("pnpm", "bare"), ("", "empty")):
        got = json.loads(score(text, "--json").stdout)
        assert got["score"] == 0.0 and not got["whole"]
        assert got["verdicts"][0]["kind"] == "whole" and got["verdicts"][0]["value"] == fault
    said = score("pnpm")
    assert said.returncode == 0 and "0.00 (the answer is not whole)" in said.stdout
    assert "FAIL whole: the whole answer is one word" in " ".join(said.stdout.split())
    # at 80 columns a wrapped verdict hangs under its text
    (tmp_path / "answer.txt").write_text("Run `pnpm inst", encoding="utf-8")
    narrow = skillopt(
        "tasks",
        "score",
        task["id"][:8],
        "--answer-file",
        str(tmp_path / "answer.txt"),
        env=dict(os.environ, COLUMNS="80"),
    )
    lines = narrow.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  FAIL  whole: an inline"))
    assert lines[at + 1].startswith(" " * 8 + "off") and all(len(x) <= 80 for x in lines)
    unknown = skillopt("tasks", "score", "nope", "--answer-file", str(tmp_path / "answer.txt"))
    assert unknown.returncode == 1 and "no stored task with the id 'nope'" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1


def test_a_test_task_needs_an_answer_that_defines_a_test() -> None:
    """A task that asks for a test (artifact ``test``) is answered by a test, in the shapes
    agents write them; prose about testing, or a bare import, is no test."""
    for answer in (
        GOOD_TEST,
        "```js\ntest('slugify', () => {\n  expect(slugify('A b')).toBe('a-b');\n});\n```",
        "```python\nclass TestSlug(unittest.TestCase):\n    def test_a(self):\n        pass\n```",
        "```rust\n#[test]\nfn slug() {}\n```",
    ):
        assert broken(answer, "test") == [], answer
    for answer in (
        "I would test the happy path and the empty string.",
        "```python\nimport pytest\n```",
    ):
        assert [f.kind for f in broken(answer, "test")] == ["no_test"], answer
        assert broken(answer) == []  # any other task: whole
