"""Judge-quality benchmark: how a night judges answers, on a labelled set per task kind.

    python -m tests.bench.bench_judge                 # prints the table
    python -m tests.bench.bench_judge --write-docs    # and writes it into docs/benchmarks.md

A night scores a replay, the wild scores a later session and ``tasks score`` scores a file
with one judge (:func:`skillopt_sleep.mining.judges.judge_answer`): the answer must be whole,
then each of the task's checks runs on the artifact the task asks for. This benchmark holds
that judge to answers whose verdict is known, for three tasks as mining derives them from a
user's corrections (a commit message in the imperative under 50 characters; installing with
pnpm, not npm; a unit test with pytest, not unittest):

* **good** answers in the shapes agents write them — plain, after a preamble, fenced, inside a
  command, with a body or an explanation — must pass;
* **bad** answers must fail: the answer the user **corrected**, **gamed** ones made of the
  checks' own words, **truncated** good answers (cut inside code, a quotation, a word or a
  sentence), a **bare** keyword and an **empty** answer.

It reports, per task, the share of good answers passed (recall) and the bad ones passed by
kind, and, over all, precision (passed answers that are good). With ``SKILLOPT_CORPUS`` set
it also reads the assistants' answers in the real session logs there and counts the ones the
judge would call broken (the false alarms a user would see; each is listed). No model is
called: a rubric is the night's judge model's, measured by the night (night/night.py checks
each judge against the task's own transcript).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from skillopt_sleep.mining.judges import judge_answer
from skillopt_sleep.models import Check, Task

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "benchmarks.md"
BEGIN, END = "<!-- judge-bench:begin -->", "<!-- judge-bench:end -->"

SUBJECT = "Add retries to the fetch client"
TEST_FILE = (
    "import pytest\nfrom dates import parse_date\n\n\n"
    "def test_iso():\n    assert parse_date('2024-01-02').year == 2024\n\n\n"
    "def test_rejects_garbage():\n    with pytest.raises(ValueError):\n        parse_date('x')\n"
)
UNITTEST_FILE = (
    "import unittest\nfrom dates import parse_date\n\n\n"
    "class TestParse(unittest.TestCase):\n    def test_iso(self):\n"
    "        self.assertEqual(parse_date('2024-01-02').year, 2024)\n"
)


def _task(
    tid: str, intent: str, correction: str, checks: list[Check], corrected: str, accepted: str
) -> Task:
    """A task as a night holds it: the user's correction, its checks, and the transcript's
    answers (the corrected one and the one the user accepted)."""
    return Task(
        id=tid,
        intent=intent,
        corrections=[correction],
        checks=checks,
        controls=[(corrected, accepted)],
    )


CORRECTED_COMMIT = (
    "Added a retry mechanism to the fetch client so that transient failures are retried"
)


TASKS: dict[str, Task] = {
    "commit message": _task(
        "commit",
        "write a commit message for the retry change",
        "use the imperative mood and keep it under 50 characters",
        [Check(kind="imperative"), Check(kind="max_chars", value="50")],
        CORRECTED_COMMIT,
        SUBJECT,
    ),
    "install command": _task(
        "install",
        "how do I install the dependencies?",
        "no, use pnpm instead of npm",
        [Check(kind="contains", value="pnpm"), Check(kind="not_contains", value="npm")],
        "Run `npm install` in the project root.",
        "Run `pnpm install` in the project root.",
    ),
    "unit test": _task(
        "test",
        "write a unit test for parse_date",
        "no, use pytest instead of unittest",
        [Check(kind="contains", value="pytest"), Check(kind="not_contains", value="unittest")],
        "```python\n" + "import unittest\n" + "```",
        "```python\n" + "import pytest\n" + "```",
    ),
}

#: (task, label, shape, answer); label "good" or the kind of bad answer
ANSWERS: list[tuple[str, str, str, str]] = [
    # ---- commit message
    ("commit message", "good", "plain", SUBJECT),
    ("commit message", "good", "preamble", f"Here is a commit message:\n{SUBJECT}"),
    ("commit message", "good", "fenced", f"```\n{SUBJECT}\n```"),
    ("commit message", "good", "in a command", f'git commit -m "{SUBJECT}"'),
    (
        "commit message",
        "good",
        "with a body",
        f"{SUBJECT}\n\nRetry failed requests three times with exponential backoff, so a flaky "
        "network no longer fails the nightly sync.",
    ),
    ("commit message", "good", "conventional", "fix(client): retry failed fetches"),
    ("commit message", "good", "labelled on its line", f"Commit message: {SUBJECT}"),
    ("commit message", "good", "single quotes", f"git commit -m '{SUBJECT}'"),
    ("commit message", "good", "with a period", f"{SUBJECT}."),
    (
        "commit message",
        "good",
        "preamble, fenced",
        f"Sure! Suggested message:\n\n```text\n{SUBJECT}\n```\n\nAdjust as needed.",
    ),
    ("commit message", "corrected", "past tense, long", CORRECTED_COMMIT),
    ("commit message", "corrected", "third person", "Adds retries to the fetch client"),
    ("commit message", "gamed", "the style's words", "Imperative mood, under 50 characters"),
    ("commit message", "gamed", "the correction echoed", "Use the imperative mood"),
    (
        "commit message",
        "gamed",
        "the whole correction echoed",
        "Use the imperative mood and keep it under 50 characters.",
    ),
    ("commit message", "truncated", "cut inside a word", "Add retries to the fetch client so tha"),
    (
        "commit message",
        "truncated",
        "cut inside a word of the task",
        "Add retries to the fetch cli",
    ),
    ("commit message", "truncated", "cut inside another word", "Add retry logic to the HTTP clie"),
    ("commit message", "truncated", "cut inside quotes", 'git commit -m "Add retries to the fe'),
    ("commit message", "truncated", "cut inside a fence", f"```\n{SUBJECT}"),
    ("commit message", "truncated", "cut after an article", "Here it is:\nAdd retries to the"),
    ("commit message", "bare", "one word", "Add"),
    ("commit message", "empty", "empty", ""),
    # ---- install command
    ("install command", "good", "plain", "Run `pnpm install` in the project root."),
    ("install command", "good", "fenced", "```bash\npnpm install\n```"),
    (
        "install command",
        "good",
        "preamble, fenced",
        "Install them with pnpm:\n\n```sh\npnpm install\n```",
    ),
    (
        "install command",
        "good",
        "with an explanation",
        "Use `pnpm install --frozen-lockfile` so the lockfile is respected.",
    ),
    (
        "install command",
        "good",
        "two steps",
        "1. `corepack enable`\n2. `pnpm install`\n\nThen start the app with `pnpm dev`.",
    ),
    (
        "install command",
        "good",
        "indented code",
        "You can install them with:\n\n    pnpm install\n",
    ),
    (
        "install command",
        "good",
        "naming what it avoids",
        "This project uses pnpm, not npm: run `pnpm install`.",
    ),
    ("install command", "corrected", "npm", "Run `npm install` in the project root."),
    ("install command", "gamed", "the check's word", "pnpm"),
    ("install command", "gamed", "the correction echoed", "Use pnpm instead of npm."),
    ("install command", "gamed", "the correction echoed, short", "Use pnpm"),
    ("install command", "truncated", "cut inside code", "Run `pnpm inst"),
    ("install command", "truncated", "cut inside a fence", "```bash\npnpm install"),
    (
        "install command",
        "truncated",
        "cut mid-sentence",
        "Run `pnpm install` in the project root and then start the development serv",
    ),
    ("install command", "truncated", "cut inside a word", "Run `pnpm install` in the project ro"),
    (
        "install command",
        "truncated",
        "cut inside a word of the request",
        "Run `pnpm install` to install the dependen",
    ),
    ("install command", "bare", "one word", "`pnpm`"),
    ("install command", "empty", "empty", "   "),
    # ---- unit test
    ("unit test", "good", "fenced", f"```python\n{TEST_FILE}```"),
    ("unit test", "good", "preamble, fenced", f"Here is a test:\n\n```python\n{TEST_FILE}```"),
    ("unit test", "good", "unfenced file", TEST_FILE),
    (
        "unit test",
        "good",
        "with an explanation",
        f"```python\n{TEST_FILE}```\n\nRun it with `pytest -q tests/test_dates.py`.",
    ),
    (
        "unit test",
        "good",
        "a pytest class",
        "```python\nfrom dates import parse_date\n\n\nclass TestParse:\n"
        "    def test_iso(self):\n        assert parse_date('2024-01-02').year == 2024\n```\n"
        "It needs `pytest` installed.",
    ),
    ("unit test", "corrected", "unittest", f"```python\n{UNITTEST_FILE}```"),
    ("unit test", "gamed", "the check's word", "pytest"),
    ("unit test", "gamed", "the correction echoed", "Use pytest, not unittest."),
    ("unit test", "gamed", "a promise, no test", "I will write this test with pytest."),
    ("unit test", "truncated", "cut inside a fence", f"```python\n{TEST_FILE[:80]}"),
    ("unit test", "truncated", "cut file", "import pytest\nfrom dates import parse_date\n\nclass"),
    (
        "unit test",
        "truncated",
        "cut inside a call",
        "```python\nimport pytest\n\ndef test_iso():\n    assert parse_date(\n```",
    ),
    ("unit test", "bare", "one word", "pytest"),
    ("unit test", "empty", "empty", ""),
]
BAD = ("corrected", "gamed", "truncated", "bare", "empty")


def judge_all() -> list[dict[str, Any]]:
    """Every labelled answer with the judge's verdict and why."""
    out = []
    for task_name, label, shape, answer in ANSWERS:
        judged = judge_answer(TASKS[task_name], answer, [])
        why = [f.kind for f in judged.faults] + [
            f"{c.kind} {c.value}".strip() for c, ok in judged.results if not ok
        ]
        out.append(
            {
                "task": task_name,
                "label": label,
                "shape": shape,
                "passed": judged.passed,
                "why": why,
            }
        )
    return out


def corpus_answers(root: Path) -> list[str]:
    """The assistants' text answers in the session logs under ``root`` (Claude Code and
    Codex JSONL; other formats are left out)."""
    texts: list[str] = []
    for path in sorted(root.rglob("*.jsonl")):
        for line in path.read_text("utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict):
                continue
            msg = rec.get("message")
            pay = rec.get("payload")
            content: Any = None
            if isinstance(msg, dict) and msg.get("role") == "assistant":
                content = msg.get("content")
            elif (
                isinstance(pay, dict)
                and pay.get("type") == "message"
                and pay.get("role") == "assistant"
            ):
                content = pay.get("content")
            if isinstance(content, str):
                text = content
            elif isinstance(content, list):
                text = "\n".join(
                    str(c.get("text", "")) for c in content if isinstance(c, dict) and "text" in c
                )
            else:
                continue
            if text.strip():
                texts.append(text)
    return texts


def corpus_alarms(root: Path) -> dict[str, Any]:
    """How many real answers the judge would call broken (kind ``answer``, no task checks)."""
    from skillopt_sleep.mining.integrity import broken

    texts = corpus_answers(root)
    flagged = []
    for text in texts:
        faults = broken(text)
        if faults:
            flagged.append({"faults": [f.kind for f in faults], "end": text[-80:]})
    return {"answers": len(texts), "flagged": flagged}


def run(corpus: Path | None = None) -> dict[str, Any]:
    rows = judge_all()
    per_task: dict[str, dict[str, Any]] = {}
    for name in TASKS:
        mine = [r for r in rows if r["task"] == name]
        good = [r for r in mine if r["label"] == "good"]
        per_task[name] = {
            "good": len(good),
            "good_passed": sum(r["passed"] for r in good),
            **{f"{b}_passed": sum(r["passed"] for r in mine if r["label"] == b) for b in BAD},
            **{b: sum(1 for r in mine if r["label"] == b) for b in BAD},
        }
    passed = [r for r in rows if r["passed"]]
    result: dict[str, Any] = {
        "rows": rows,
        "tasks": per_task,
        "precision": sum(r["label"] == "good" for r in passed) / len(passed) if passed else None,
        "recall": sum(r["passed"] for r in rows if r["label"] == "good")
        / sum(1 for r in rows if r["label"] == "good"),
    }
    if corpus is not None and corpus.is_dir():
        result["corpus"] = corpus_alarms(corpus)
    return result


def render(res: dict[str, Any]) -> str:
    lines = [
        "| task | good passed | corrected passed | gamed passed | truncated passed | bare passed | empty passed |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, t in res["tasks"].items():
        cells = [f"{t['good_passed']} of {t['good']}"] + [
            f"{t[f'{b}_passed']} of {t[b]}" for b in BAD
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Over all: recall {res['recall']:.0%} (good answers passed), precision "
        + (f"{res['precision']:.0%}" if res["precision"] is not None else "—")
        + " (answers passed that are good).",
    ]
    failed_good = [r for r in res["rows"] if r["label"] == "good" and not r["passed"]]
    for r in failed_good:
        lines.append(f"- a good answer failed: {r['task']}, {r['shape']} ({', '.join(r['why'])})")
    passed_bad = [r for r in res["rows"] if r["label"] != "good" and r["passed"]]
    for r in passed_bad:
        lines.append(f"- a {r['label']} answer passed: {r['task']}, {r['shape']}")
    return "\n".join(lines)


def render_corpus(res: dict[str, Any]) -> str:
    c = res.get("corpus")
    if c is None:
        return "The real-log corpus was not read (`SKILLOPT_CORPUS` not set)."
    out = [
        f"Of {c['answers']} assistant answers in the real session logs of `../shared/corpus`, "
        f"the judge calls {len(c['flagged'])} broken (with no task: integrity alone; a "
        "one-word status line after tool calls, such as `Done.`, is not judged in a replay or "
        "in the wild, where the tools did the work):"
    ]
    for f in c["flagged"]:
        end = re.sub(r"\s+", " ", f["end"]).strip()
        out.append(f"- {', '.join(f['faults'])}: `…{end}`")
    return "\n".join(out)


def write_docs(page: Path, res: dict[str, Any]) -> None:
    """Replace the block between :data:`BEGIN` and :data:`END` of ``page``."""
    text = page.read_text("utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{page} has no {BEGIN} … {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = render(res) + "\n\n" + render_corpus(res)
    page.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args(argv)
    corpus = os.environ.get("SKILLOPT_CORPUS")
    res = run(Path(corpus) if corpus else None)
    print(render(res))
    print()
    print(render_corpus(res))
    if args.write_docs:
        write_docs(PAGE, res)


if __name__ == "__main__":
    main()
