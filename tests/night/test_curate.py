"""Curation before staging (issue 26): a new rule the file already says is merged (left out),
one that contradicts a rule there is flagged, and the report says which."""

from __future__ import annotations

from skillopt_sleep.delivery.document import Document, contradicts, same_rule
from skillopt_sleep.night.curate import curate

PNPM = "Use `pnpm` instead of `npm`."


def _shared(own: str, global_rules: list[str], section: str, rules: list[str]) -> str:
    text = Document.parse(own).render(global_rules)
    return Document.parse(text, section=section).render(rules)


def test_a_rule_the_users_own_text_already_says_is_merged():
    live = "# Rules\n\n- Always use `pnpm` instead of `npm`.\n"
    kept, notes = curate(live, None, [], [PNPM, "Use the `pytest` tool."])
    assert kept == ["Use the `pytest` tool."]
    assert notes == [
        f"merged: {PNPM} (your own line already says it: Always use `pnpm` instead of `npm`.)"
    ]


def test_a_rule_the_block_every_project_reads_already_says_is_merged():
    live = _shared("# mine\n", [PNPM], "/src/app", [])
    kept, notes = curate(live, "/src/app", [], [PNPM])
    assert kept == [] and notes == [
        f"merged: {PNPM} (the block every project reads already says it: {PNPM})"
    ]


def test_a_contradiction_is_flagged_and_kept_for_the_user_to_settle():
    live = _shared(
        "# mine\n\n- Never mention `pnpm`.\n", ["Use `npm` instead of `pnpm`."], "/a", []
    )
    kept, notes = curate(live, "/a", [], [PNPM])
    assert kept == [PNPM]
    assert notes == [
        f"flagged: {PNPM} contradicts the block every project reads: Use `npm` instead of "
        "`pnpm`. (`pnpm` instead of `npm` against the reverse)"
    ]
    kept, notes = curate("- Never mention `pnpm`.\n", None, [], ["Always mention `pnpm`."])
    assert notes == [
        "flagged: Always mention `pnpm`. contradicts your own line: Never mention `pnpm`. "
        "(one says not to, the other to (`pnpm`))"
    ]


def test_what_contradicts_and_what_does_not():
    assert contradicts(PNPM, "Use `npm` instead of `pnpm`.")
    assert contradicts("Always mention `pnpm`.", "Never mention `pnpm`.")
    assert contradicts("Keep answers under 50 characters.", "Keep answers under 200 characters.")
    # other task families never contradict; other values are other rules
    assert not contradicts(
        "When writing a commit message: keep answers under 50 characters.",
        "When writing tests: keep answers under 200 characters.",
    )
    assert not contradicts(PNPM, "Use the `pytest` tool.")
    assert not contradicts(PNPM, PNPM)
    # the same words for another task family are another rule
    assert not same_rule(
        "When writing a commit message: keep answers under 50 characters.",
        "Keep answers under 50 characters.",
    )


def test_rules_already_in_the_block_are_left_as_they_are():
    kept, notes = curate("- Use `pnpm` instead of `npm`.\n", None, [PNPM], [PNPM])
    assert kept == [PNPM] and notes == []


def test_a_rule_that_contradicts_another_agents_copy_is_flagged(tmp_path):
    from skillopt_sleep.night.curate import other_agents_rules

    home = tmp_path / "home"
    codex = home / ".codex" / "AGENTS.md"
    codex.parent.mkdir(parents=True)
    codex.write_text(Document.parse("# codex\n").render(["Never mention `pnpm`."]))
    target = home / ".claude" / "CLAUDE.md"
    elsewhere = other_agents_rules(target, {}, home)
    assert elsewhere == {"codex's AGENTS.md": ["Never mention `pnpm`."]}
    kept, notes = curate(None, None, [], ["Always mention `pnpm`."], elsewhere)
    assert kept == ["Always mention `pnpm`."]
    assert notes == [
        "flagged: Always mention `pnpm`. contradicts codex's AGENTS.md: Never mention `pnpm`. "
        "(one says not to, the other to (`pnpm`))"
    ]
