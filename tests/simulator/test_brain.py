"""The simulator's deterministic behaviour, role by role (no HTTP)."""

from __future__ import annotations

import json

import pytest

from skillopt_sleep.night import prompts
from skillopt_sleep.simulator import Brain, Turn, judge_score, load_persona, parse_rules
from skillopt_sleep.simulator.brain import apply_rules, consolidate, derive_edits, detect_role


@pytest.fixture
def brain() -> Brain:
    return Brain(load_persona("demo"))


def turn(prompt: str, system: str = "", tools: list[str] | None = None) -> Turn:
    return Turn(
        model="m",
        system=system,
        messages=[("user", prompt)],
        last_user=prompt,
        prompt=prompt,
        tools=tools or [],
    )


def test_target_persona_answers_and_default(brain: Brain) -> None:
    assert (
        brain.respond(turn("How do I install dependencies?")).text
        == "Run `npm install` in the project root."
    )
    assert brain.respond(turn("please RUN THE TESTS")).text == "Run `npm test` to run the suite."
    assert brain.respond(turn("lint it")).text == "Run `npm run lint`."
    default = brain.respond(turn("what is the weather")).text
    assert default.startswith("I would start by reading the README")
    assert default.endswith("what is the weather")


def test_rules_in_system_text_change_the_target_answer(brain: Brain) -> None:
    skill = "# Skill\n- Use `pnpm` instead of `npm`.\n- Always mention `--frozen-lockfile`.\n"
    reply = brain.respond(turn("install dependencies", system=skill))
    assert reply.role == "target"
    assert reply.text == "Run `pnpm install` in the project root. Also: `--frozen-lockfile`."


def test_rules_that_are_not_in_the_language_are_ignored(brain: Brain) -> None:
    reply = brain.respond(turn("run the tests", system="Prefer pnpm over npm please."))
    assert reply.text == "Run `npm test` to run the suite."


def test_replace_is_whole_word_ish_and_never_and_limit() -> None:
    rules = parse_rules(
        "use `yarn` INSTEAD OF `npm`. Never mention `root`. "
        "Keep answers under 20 characters. Keep answers under 30 characters."
    )
    assert rules.max_chars == 20
    assert (
        apply_rules("pnpm and npm", parse_rules("Use `yarn` instead of `npm`.")) == "pnpm and yarn"
    )
    out = apply_rules("Run `npm install` in the project root.", rules)
    assert out == "Run `yarn install` i"
    assert (
        apply_rules("Run it in the project root.", parse_rules("Never mention `root`"))
        == "Run it in the project ."
    )


def test_harmful_length_rule_truncates(brain: Brain) -> None:
    reply = brain.respond(turn("run the tests", system="Keep answers under 12 characters."))
    assert reply.text == "Run `npm tes"
    assert len(reply.text) <= 12


def test_tool_call_when_offered_then_text_after_result(brain: Brain) -> None:
    offered = brain.respond(turn("list the files", tools=["bash", "view"]))
    assert (offered.tool, offered.tool_input, offered.text) == ("bash", {"command": "ls"}, "")
    not_offered = brain.respond(turn("list the files"))
    assert not_offered.tool is None and not_offered.text == "The project files are listed above."
    after = turn("list the files", tools=["Bash"])
    after.after_tool = True
    assert brain.respond(after).text == "The project files are listed above."


def test_use_the_tool_rule_calls_an_offered_tool(brain: Brain) -> None:
    reply = brain.respond(turn("run the tests", system="Use the `Bash` tool.", tools=["Bash"]))
    assert reply.tool == "Bash" and reply.tool_input == {"command": "ls"}


def _failure(task: str, *checks: tuple[str, str]) -> dict:
    return {
        "task": task,
        "answer": "a",
        "score": 0.0,
        "corrections": [],
        "failed_checks": [{"kind": k, "value": v, "evidence": ""} for k, v in checks],
    }


def test_derive_edits_from_failed_checks() -> None:
    failures = [
        _failure("install", ("contains", "pnpm"), ("not_contains", "npm")),
        _failure("lint", ("contains", "--fix")),
        _failure("secrets", ("not_contains", "sudo")),
        _failure("short", ("max_chars", "80"), ("tool_called", "Bash"), ("regex", "x")),
        _failure("again", ("contains", "pnpm"), ("not_contains", "npm")),
    ]
    for n, f in enumerate(failures, 1):
        f["n"] = n
    edits = derive_edits(failures)
    # each rule with the failures that call for it (its evidence): one rule for two failures
    assert [(text, evidence) for text, _, evidence in edits] == [
        ("Use `pnpm` instead of `npm`.", [1, 5]),
        ("Always mention `--fix`.", [2]),
        ("Never mention `sudo`.", [3]),
        ("Keep answers under 80 characters.", [4]),
        ("Use the `Bash` tool.", [4]),
    ]


def test_the_optimizer_scopes_a_rule_to_its_evidence_and_a_literal_target_obeys_the_scope(
    brain: Brain,
) -> None:
    failures = [
        {
            **_failure("write a commit message", ("max_chars", "50")),
            "n": 1,
            "family": "writing a commit message",
        },
        {
            **_failure("install deps", ("contains", "pnpm")),
            "n": 2,
            "family": "installing dependencies",
        },
        {**_failure("add deps", ("contains", "pnpm")), "n": 3, "family": "installing dependencies"},
    ]
    edits = reflect(brain, failures=failures, budget=2)
    assert [(e["text"], e["evidence"], e["scope"]) for e in edits] == [
        ("Keep answers under 50 characters.", [1], "writing a commit message"),
        ("Always mention `pnpm`.", [2, 3], "installing dependencies"),
    ]
    # a scoped rule holds where its scope names the request, and nowhere else
    from skillopt_sleep.simulator.brain import in_scope, parse_rules

    text = "- When writing a commit message: keep answers under 50 characters.\n"
    assert parse_rules(text, "write a commit message for the fix").max_chars == 50
    assert parse_rules(text, "give me a shell command to list files").max_chars is None
    assert parse_rules(text).max_chars == 50  # read without a request: as if unscoped
    assert in_scope("installing dependencies", "install them with the lockfile")
    assert in_scope("writing tests", "add a test for the parser")
    assert not in_scope("writing a commit message", "give me a command")


def reflect(brain: Brain, *, rules=(), rejected=(), budget=2, failures=()) -> list[dict]:
    prompt = prompts.reflect_prompt(
        rules=list(rules),
        failures=list(failures),
        successes=[],
        rejected=list(rejected),
        budget=budget,
    )
    reply = brain.respond(turn(prompt))
    assert reply.role == "reflect"
    return prompts.extract_json(reply.text)["edits"]


def test_reflect_orders_groups_and_respects_budget(brain: Brain) -> None:
    failures = [_failure("install", ("contains", "pnpm"), ("not_contains", "npm"))]
    edits = reflect(brain, failures=failures, budget=2)
    # the demo persona's order: derived, harmful, useless
    assert [e["text"] for e in edits] == ["Use `pnpm` instead of `npm`.", "Never mention `pnpm`."]
    assert all(e["op"] == "add" and e["rationale"] for e in edits)
    assert len(reflect(brain, failures=failures, budget=1)) == 1
    edits = reflect(brain, failures=failures, budget=5)
    assert [e["text"] for e in edits][-1] == "Be helpful and precise."


def test_reflect_skips_rejected_and_present_rules(brain: Brain) -> None:
    failures = [
        _failure("install", ("contains", "pnpm"), ("not_contains", "npm")),
        _failure("lint", ("contains", "--fix")),
    ]
    edits = reflect(
        brain,
        failures=failures,
        budget=5,
        rejected=["never mention `pnpm`."],
        rules=["Use `pnpm`  instead of `npm`"],
    )
    assert [e["text"] for e in edits] == ["Always mention `--fix`.", "Be helpful and precise."]


def test_reflect_order_from_persona(tmp_path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[optimizer]\norder = ["derived", "useless"]\n'
        'useless_edits = ["Be nice."]\n'
        'harmful_edits = ["Keep answers under 5 characters."]\n'
    )
    edits = reflect(
        Brain(load_persona(path)), budget=3, failures=[_failure("t", ("contains", "X"))]
    )
    assert [e["text"] for e in edits] == ["Always mention `X`.", "Be nice."]


@pytest.mark.parametrize(
    ("rubric", "answer", "score"),
    [
        ("Use `pnpm` instead of `npm`.", "Run `pnpm install`.", 1.0),
        ("Use `pnpm` instead of `npm`.", "Run `npm install`.", 0.0),
        ("Mention `--frozen-lockfile` and `pnpm`; never `sudo`.", "pnpm install", 0.667),
        ("Be concise.", "ok", 1.0),
        ("Be concise.", "  ", 0.0),
        ("Do not use `npm`, use `yarn`.", "yarn add x", 1.0),
    ],
)
def test_judge_score(rubric: str, answer: str, score: float) -> None:
    assert judge_score(rubric, answer) == score


def test_judge_and_consolidate_roles(brain: Brain) -> None:
    prompt = prompts.judge_prompt(
        task="install", rubric="Use `pnpm` instead of `npm`.", answer="Run `pnpm install`."
    )
    reply = brain.respond(turn(prompt))
    assert reply.role == "judge" and json.loads(reply.text) == {"score": 1.0}
    prompt = prompts.consolidate_prompt(rules=["Use `pnpm`.", " use  `PNPM`. ", "Be brief."])
    reply = brain.respond(turn(prompt))
    assert reply.role == "consolidate"
    assert json.loads(reply.text) == {"rules": ["Use `pnpm`.", "Be brief."]}
    assert consolidate(["a", "A", "b"]) == ["a", "b"]


def test_role_detection_uses_the_markers() -> None:
    assert detect_role(turn("hello " + prompts.JUDGE_MARKER)) == "judge"
    assert detect_role(turn(prompts.CONSOLIDATE_MARKER + "\n```json\n{}\n```")) == "consolidate"
    assert detect_role(turn("SKILLOPT-REFLECT v2")) == "target"


def _skill_reflect(brain: Brain, failures, rejected=(), description="Changelog entries."):
    prompt = prompts.reflect_prompt(
        rules=["Use `pnpm` instead of `npm`."],
        failures=failures,
        successes=[],
        rejected=list(rejected),
        budget=3,
        skill={"description": description, "max_chars": 45},
    )
    return prompts.extract_json(brain.respond(turn(prompt)).text)["edits"]


def test_reflect_rewrites_a_skill_description_the_failing_rollouts_did_not_load(
    brain: Brain,
) -> None:
    missed = [
        {**_failure("install the dependencies in the webapp"), "skill_loaded": False},
        {**_failure("run the linter on the webapp"), "skill_loaded": False},
    ]
    edits = _skill_reflect(brain, missed)
    # first, the description: the tasks' content words in order, cut to fit max_chars
    assert edits[0] == {
        "op": "describe",
        "text": "Rules for install, dependencies, webapp.",  # linter: too long
        "rationale": "the skill was not loaded in failing rollouts",
    }
    assert len(edits[0]["text"]) <= 45
    assert _skill_reflect(Brain(load_persona("demo")), missed)[0] == edits[0]  # deterministic
    # not again once rejected, nor when it is already the description
    said = ["describe: " + edits[0]["text"]]
    assert all(e["op"] != "describe" for e in _skill_reflect(brain, missed, rejected=said))
    assert all(
        e["op"] != "describe" for e in _skill_reflect(brain, missed, description=edits[0]["text"])
    )
    # rollouts that loaded the skill, or could not say, are no reason to rewrite it
    for loaded in (True, "unknown"):
        failures = [{**f, "skill_loaded": loaded} for f in missed]
        assert all(e["op"] != "describe" for e in _skill_reflect(brain, failures))


def test_reflect_does_not_describe_when_the_persona_says_so(tmp_path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[optimizer]\ndescribe_skills = false\n")
    missed = [{**_failure("run the tests in the webapp"), "skill_loaded": False}]
    assert _skill_reflect(Brain(load_persona(path)), missed) == []


def test_a_dream_sample_answers_the_variants_in_turn_and_rules_still_apply() -> None:
    from skillopt_sleep.simulator.persona import persona_from_dict

    persona = persona_from_dict(
        {
            "answers": [
                {"match": "install", "text": "Run `npm i`.", "variants": ["A `x`.", "B `y`."]},
                {"match": "test", "text": "Run `npm test`."},
            ]
        }
    )
    b = Brain(persona)

    def ask(prompt: str, sample: int, system: str = "") -> str:
        t = turn(prompt, system)
        t.sample = sample
        return b.respond(t).text

    assert [ask("install", k) for k in range(4)] == ["Run `npm i`.", "A `x`.", "B `y`.", "A `x`."]
    assert ask("test", 2) == "Run `npm test`."  # no variants: every sample the same
    assert ask("install", 1, "Use `z` instead of `x`.") == "A `z`."


def test_the_optimizer_reads_a_contrast_as_what_the_best_attempt_did(brain: Brain) -> None:
    from skillopt_sleep.simulator.brain import contrast_edits

    contrast = {
        "task": "install",
        "best": {"answer": "Run `pnpm install` then `make`.", "score": 1.0},
        "worst": {"answer": "Run `npm install` then `make`.", "score": 0.0},
    }
    assert [t for t, _ in contrast_edits([contrast])] == [
        "Use `pnpm install` instead of `npm install`."
    ]
    prompt = prompts.reflect_prompt(
        rules=[], failures=[], successes=[], rejected=[], budget=1, contrasts=[contrast]
    )
    edits = json.loads(brain.respond(turn(prompt)).text)["edits"]
    assert edits == [
        {
            "op": "add",
            "text": "Use `pnpm install` instead of `npm install`.",
            "rationale": "the best attempt did it: install",
            "evidence": [],
            "scope": "all",
        }
    ]


@pytest.mark.parametrize(
    ("stated", "obeyed"),
    [
        (" - Primary working directory: /src/web/api", True),  # Claude Code, below the folder
        ("<cwd>/tmp/skillopt-sleep-replay-x/work/web</cwd>", True),  # Codex, a replay's copy
        ("* Current working directory: /src/other", False),  # Copilot, another project
        ("Working directory: /tmp/skillopt-sleep-replay-x/work/work", False),  # no copy of it
        ("", True),  # a bare model call states no folder: the rules read as written
    ],
)
def test_a_project_block_is_obeyed_only_where_the_request_says_it_works(
    brain: Brain, stated: str, obeyed: bool
) -> None:
    from skillopt_sleep.delivery.document import END, begin_marker, section_heading

    block = f"{begin_marker('/src/web')}\n{section_heading('/src/web')}\n"
    block += f"- Use `pnpm` instead of `npm`.\n{END}\n"
    reply = brain.respond(turn("install dependencies", system=f"{stated}\n\n{block}"))
    assert ("pnpm" in reply.text) is obeyed, reply.text
