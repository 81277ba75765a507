"""Correction / positive / neutral classification and the checks derived from corrections."""

from __future__ import annotations

import pytest

from skillopt_sleep.mining.corrections import (
    analyze,
    classify,
    derive_checks,
    is_trivial,
    mentions,
    rubric_line,
)

NPM_ANSWER = "Run `npm install` and then `npm test` to check the build."


@pytest.mark.parametrize(
    "text",
    [
        "no, use pnpm",
        "No. Use pnpm",
        "nope, wrong file",
        "use pnpm instead of npm",
        "use pnpm, not npm",
        "pnpm not npm",
        "don't use sudo",
        "Do not use sudo here",
        "never use var in JS",
        "that's wrong",
        "That is not what I asked for",
        "wrong, the config lives in pyproject",
        "still failing",
        "tests are still failing",
        "it doesn't work",
        "this isn't working",
        "why doesn't it work?",
        "nope",
        "thanks but it still fails",
        "same error as before",
        "shorter please",
        "way too long",
        "make it shorter",
        "keep it under 50 characters",
        "at most 20 words",
        "you forgot the tests",
        "You didn't run the linter",
        "I said pnpm",
        "revert that",
        "try uv instead",
    ],
)
def test_corrections_are_recognised(text: str) -> None:
    assert classify(text) == "correction"


@pytest.mark.parametrize(
    "text",
    [
        "perfect",
        "Perfect!",
        "thanks, that works",
        "great",
        "awesome, thank you!",
        "looks good",
        "lgtm",
        "it works now, thanks",
    ],
)
def test_positive_feedback(text: str) -> None:
    assert classify(text) == "positive"


@pytest.mark.parametrize(
    "text",
    [
        "no worries",
        "no problem, next task: add a changelog entry",
        "no, thanks",
        "No. Now let's work on the parser",
        "no, that's fine",
        "no need to worry about windows",
        "Don't forget to add tests to the new module",
        "now add a test",
        "great, now add a test for the parser",
        "thanks! can you also update the README?",
        "fix the bug where the login button doesn't work on mobile",
        "write a commit message under 50 chars for the staged changes",
        "add a shorter alias for the deploy command",
        "refactor the parser to use dataclasses",
        "explain what this regex does",
        "why not",
        "",
        "ok",
        # A long new request that merely contains a weak phrase further in.
        "implement the export feature: "
        + "it should write csv files with headers " * 8
        + "and it still fails on windows",
    ],
)
def test_neutral_requests(text: str) -> None:
    assert classify(text) == "neutral"


def kv(checks) -> list[tuple[str, str]]:
    return [(c.kind, c.value) for c in checks]


@pytest.mark.parametrize(
    ("text", "previous", "expected"),
    [
        ("use pnpm instead of npm", "", [("contains", "pnpm"), ("not_contains", "npm")]),
        (
            "use `pnpm install` instead of `npm install`",
            "",
            [("contains", "pnpm"), ("not_contains", "npm")],
        ),
        ("instead of yarn, use pnpm", "", [("contains", "pnpm"), ("not_contains", "yarn")]),
        ("use black, not ruff", "", [("contains", "black"), ("not_contains", "ruff")]),
        ("pnpm not npm", "", [("contains", "pnpm"), ("not_contains", "npm")]),
        ("no, use pnpm", NPM_ANSWER, [("contains", "pnpm"), ("not_contains", "npm")]),
        ("no, use pnpm", "Sure, done.", [("contains", "pnpm")]),
        (
            "no, use uv",
            "pip install -r requirements.txt",
            [("contains", "uv"), ("not_contains", "pip")],
        ),
        ("don't use sudo", "", [("not_contains", "sudo")]),
        ("never use var in JS", "", [("not_contains", "var")]),
        (
            "use uv run pytest instead of python -m pytest",
            "",
            [("contains", "uv run"), ("not_contains", "python -m")],
        ),
        ("use `uv run pytest` instead", "", [("contains", "uv run pytest")]),
        ("keep it under 50 characters", "x" * 500, [("max_chars", "50")]),
        ("under 20 words please", "", [("max_chars", "120")]),
        ("shorter please", "y" * 200, [("max_chars", "120")]),
        ("shorter please", "", []),
        ("also, make it shorter", "Done. ✓", []),  # a short reply: "it" is something else
        ("shorter please", "z" * 40, [("max_chars", "24")]),
        ("still failing", NPM_ANSWER, []),
        ("that's wrong", NPM_ANSWER, []),
        ("you forgot the tests", "", []),
        ("you forgot to run `ruff check`", "", [("contains", "ruff check")]),
        # vague or too long values never become checks
        ("use a different approach instead", "", []),
        ("use the same thing instead of that", "", []),
        ("use the API, not the CLI", "", [("contains", "API")]),
        ("use the new streaming json parser module instead of the old one", "", []),
        # a negative that would also reject the wanted value is dropped
        ("use uv run pytest instead of pytest", "", [("contains", "uv run pytest")]),
    ],
)
def test_derived_checks(text: str, previous: str, expected: list[tuple[str, str]]) -> None:
    checks = derive_checks(text, previous)
    assert kv(checks) == expected
    for check in checks:
        assert check.origin == "correction"
        assert check.evidence == text


def test_negative_values_are_never_contained_in_the_wanted_value() -> None:
    for text in [
        "use pnpm instead of npm",
        "use uv run pytest instead of python -m pytest",
        "use `pnpm install` instead of `npm install`",
        "no, use pnpm",
    ]:
        checks = derive_checks(text, NPM_ANSWER)
        wanted = [c.value for c in checks if c.kind == "contains"]
        assert wanted
        for c in checks:
            if c.kind == "not_contains":
                assert not any(mentions(w, c.value) for w in wanted)


def test_tool_called_only_for_known_tools() -> None:
    assert kv(derive_checks("no, use the Grep tool", "", ["Grep", "Bash"])) == [
        ("tool_called", "Grep")
    ]
    assert kv(derive_checks("use Grep instead of Bash", "", ["Grep", "Bash"])) == [
        ("tool_called", "Grep")
    ]
    assert derive_checks("no, use the Grep tool", "", []) == []
    # a lowercase common word is not taken for a tool without "tool" or backticks
    assert derive_checks("no, run read first", "", ["Read"]) == []
    assert kv(derive_checks("no, run `read` first", "", ["Read"])) == [("tool_called", "Read")]


def test_rubric_names_values_in_backticks() -> None:
    assert rubric_line("no, use pnpm", NPM_ANSWER) == (
        'The user corrected: "no, use pnpm". The answer should use `pnpm` and not `npm`.'
    )
    assert rubric_line("don't use sudo") == (
        'The user corrected: "don\'t use sudo". The answer should not use `sudo`.'
    )
    assert rubric_line("keep it under 50 characters") == (
        'The user corrected: "keep it under 50 characters". '
        "The answer should be at most 50 characters long."
    )
    assert rubric_line("still failing").startswith('The user corrected: "still failing".')


def test_analyze_bundles_label_checks_and_rubric() -> None:
    fb = analyze("no, use pnpm", NPM_ANSWER)
    assert fb.label == "correction"
    assert kv(fb.checks)[0] == ("contains", "pnpm")
    assert "`pnpm`" in fb.rubric
    assert analyze("perfect").label == "positive" and analyze("perfect").checks == []
    neutral = analyze("now add a test")
    assert neutral.label == "neutral" and neutral.rubric == ""


def test_evidence_is_trimmed_to_one_line() -> None:
    text = "no, use pnpm\n" + "because " * 100
    (check, *_) = derive_checks(text)
    assert "\n" not in check.evidence and len(check.evidence) <= 300


@pytest.mark.parametrize("text", ["yes", "OK", "continue", "go ahead", "/clear", "  "])
def test_trivial_prompts(text: str) -> None:
    assert is_trivial(text)


@pytest.mark.parametrize("text", ["run the tests", "/review the diff", "yes, and add a test"])
def test_not_trivial(text: str) -> None:
    assert not is_trivial(text)
