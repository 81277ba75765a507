"""The artifact a task asks for (skillopt_sleep/mining/artifact.py): a commit message's checks
judge its subject wherever the answer puts it, and never pass the style's own words."""

from __future__ import annotations

import pytest

from skillopt_sleep.mining.artifact import kind_of, text_for
from skillopt_sleep.mining.judges import run_check
from skillopt_sleep.models import Check
from tests.helpers.commit import ACCEPTED, CORRECTED, GAMED, PROMPT

CHECKS = [Check(kind="imperative", value=""), Check(kind="max_chars", value="50")]


def score(answer: str) -> float:
    kind = kind_of(PROMPT)
    return sum(run_check(c, text_for(c.kind, kind, answer), []) for c in CHECKS) / len(CHECKS)


def test_the_requests_tell_their_artifact() -> None:
    assert kind_of(PROMPT) == "commit_message"
    assert kind_of("give me a good commit subject for this") == "commit_message"
    assert kind_of("how do I upgrade pip itself? answer with one command") == "command"
    assert kind_of("write a unit test for parse_date") == "test"
    assert kind_of("add tests for slugify") == "test"
    assert kind_of("schreib einen Test für parse_date") == "test"
    assert kind_of("run the tests") == "answer"  # running tests asks for no test file
    assert kind_of("explain the tests in this file") == "answer"


@pytest.mark.parametrize(
    "answer",
    [
        ACCEPTED,
        f"Here is a commit message for the staged changes:\n{ACCEPTED}",
        f'git commit -m "{ACCEPTED}"',
        f"{ACCEPTED}\n\nRetry failed requests three times with exponential backoff, so a flaky "
        "network no longer fails the nightly sync.",
        f"```\n{ACCEPTED}\n```",
        f"`{ACCEPTED}`",
    ],
)
def test_a_good_subject_passes_in_every_shape(answer: str) -> None:
    assert score(answer) == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        CORRECTED,  # past tense and too long: the answer the user corrected
        GAMED,  # the style's own words
        "Adds retry to fetch client",  # third person
        f"Here is a commit message:\n{CORRECTED}",
    ],
)
def test_a_bad_subject_fails_in_every_shape(answer: str) -> None:
    assert score(answer) < 1.0


def test_an_agent_that_acted_is_judged_on_the_artifact_it_made():
    """A test file the agent wrote is the answer (whole or cut off, whatever the text says);
    the message of the ``git commit -m`` it ran is the commit message."""
    from skillopt_sleep.mining.judges import judge_answer
    from skillopt_sleep.models import Acts, Task

    test = Task(
        id="t",
        intent="add a unit test for slugify",
        checks=[Check(kind="contains", value="slugify")],
    )
    whole = Acts(
        files={"tests/test_slug.py": "def test_slugify():\n    assert slugify('A') == 'a'\n"}
    )
    cut = Acts(
        files={"tests/test_slug.py": "def test_slugify():\n    assert slugify('A') == ('a'\n"}
    )
    other = Acts(files={"notes.md": "def test_slugify(): pass\n"})  # not a test file
    assert judge_answer(test, "Done.", ["Write"], acts=whole).passed
    assert not judge_answer(test, "Done.", ["Write"], acts=cut).passed
    assert not judge_answer(test, "Done.", ["Write"], acts=other).passed
    assert not judge_answer(test, "Done.", ["Write"]).passed  # the text alone defines no test

    commit = Task(
        id="c",
        intent=PROMPT,
        checks=[Check(kind="max_chars", value="50"), Check(kind="imperative")],
    )
    ran = Acts(commands=['git add -A && git commit -m "Add retries to the fetch client"'])
    long = Acts(
        commands=['git commit -m "Added retries to the fetch client because it failed often"']
    )
    assert judge_answer(commit, "Committed.", ["Bash"], acts=ran).passed
    assert not judge_answer(commit, "Committed.", ["Bash"], acts=long).passed
