
import pytest

from skillopt_sleep.config import DocumentConfig
from skillopt_sleep.errors import NightError
from skillopt_sleep.night.document import (BEGIN, END, Document, Edit, apply_edit, parse_edits,
                                           resolve_target)


def test_block_is_appended_and_outside_bytes_kept():
    original = "# Project notes\r\n\r\nDo not touch this.\r\n  trailing spaces  \r\n"
    doc = Document.parse(original)
    assert doc.rules == [] and not doc.had_block
    text = doc.render(["Use `pnpm` instead of `npm`."])
    assert text.startswith(original)
    assert "\r\n- Use `pnpm` instead of `npm`.\r\n" in text
    # re-parsing the rendered text and rendering other rules only changes the block
    again = Document.parse(text)
    assert again.rules == ["Use `pnpm` instead of `npm`."]
    replaced = again.render(["Rule two."])
    assert replaced.startswith(original) and replaced.endswith(END + "\r\n")
    assert "pnpm" not in replaced


def test_existing_block_between_content():
    text = f"head\n{BEGIN}\n- one\n- two\n{END}\ntail without newline"
    doc = Document.parse(text)
    assert doc.rules == ["one", "two"]
    assert doc.render() == text
    out = doc.render(["three"])
    assert out.startswith("head\n") and out.endswith(f"{END}\ntail without newline")


def test_new_managed_skill_has_frontmatter():
    text = Document.parse(None, new_skill=True).render(["r"])
    assert text.startswith("---\nname: skillopt-sleep-learned\ndescription: ")
    assert "\n---\n" in text and "- r\n" in text


def test_apply_edits():
    rules = ["Use `pnpm` instead of `npm`.", "Run tests with `pnpm test`."]
    assert apply_edit(rules, Edit(op="add", text="Keep commits small.")) == rules + ["Keep commits small."]
    assert apply_edit(rules, Edit(op="add", text="use `pnpm` instead of `npm`.")) is None  # duplicate
    assert apply_edit(rules, Edit(op="delete", old="Run tests with `pnpm test`")) == rules[:1]
    assert apply_edit(rules, Edit(op="replace", old="Use `pnpm` instead of `npm`.", text="Use `yarn`.")) == [
        "Use `yarn`.", rules[1]]
    assert apply_edit(rules, Edit(op="delete", old="something else entirely")) is None


def test_parse_edits_drops_malformed():
    edits = parse_edits({"edits": [{"op": "add", "text": "x"}, {"op": "explode"}, "junk",
                                   {"op": "delete", "old": "y", "rationale": "r"}]})
    assert [(e.op, e.text, e.old) for e in edits] == [("add", "x", ""), ("delete", "", "y")]


def test_resolve_targets(tmp_path):
    home = tmp_path / "h"
    assert resolve_target(DocumentConfig(), None, env={}, home=home) == \
        home / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    assert resolve_target(DocumentConfig(agent="codex"), None, env={"CODEX_HOME": str(tmp_path / "cx")},
                          home=home) == tmp_path / "cx" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    assert resolve_target(DocumentConfig(kind="agents_md"), tmp_path, env={}, home=home) == \
        tmp_path.resolve() / "AGENTS.md"
    with pytest.raises(NightError, match="needs a project"):
        resolve_target(DocumentConfig(kind="claude_md"), None, env={}, home=home)
    with pytest.raises(NightError, match="document.path"):
        resolve_target(DocumentConfig(kind="path"), None, env={}, home=home)
