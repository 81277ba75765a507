import os
import shutil
import subprocess
import sys

import pytest

from skillopt_sleep.config import DocumentConfig
from skillopt_sleep.errors import DocumentError, NightError, SkilloptError
from skillopt_sleep.night.document import (BEGIN, END, Document, Edit, apply_edit, parse_edits,
                                           read_live, resolve_target)


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


# ---------------------------------------------------------------- a live file that is not UTF-8
LATIN1 = b"# notes\n\xff\xfe latin1 caf\xe9\n"


def test_read_live_of_a_file_that_is_not_utf8_is_a_typed_error(tmp_path):
    target = tmp_path / "CLAUDE.md"
    target.write_bytes(LATIN1)
    with pytest.raises(DocumentError) as info:
        read_live(target)
    assert str(info.value) == (f"{target} is not UTF-8 text (byte 0xff at offset 8); "
                               "convert it to UTF-8 or train another document")
    assert isinstance(info.value, SkilloptError)
    assert target.read_bytes() == LATIN1
    assert read_live(tmp_path / "absent.md") is None
    crlf = tmp_path / "crlf.md"
    crlf.write_bytes(b"\xef\xbb\xbfa\r\nb\rc\n")  # BOM and line endings are kept exactly
    assert read_live(crlf) == "\ufeffa\r\nb\rc\n"


def test_read_live_of_an_unreadable_path_is_a_typed_error(tmp_path):
    target = tmp_path / "CLAUDE.md"
    target.mkdir()  # unreadable as a file, for root too
    with pytest.raises(DocumentError, match=r"cannot read .*CLAUDE.md: "):
        read_live(target)


def test_a_night_on_a_claude_md_that_is_not_utf8_fails_in_one_line(tmp_path, isolated_home):
    """The user trial: document.kind = "claude_md", a Latin-1 CLAUDE.md, `skillopt-sleep run`."""
    project = tmp_path / "proj"
    project.mkdir()
    target = project / "CLAUDE.md"
    target.write_bytes(LATIN1)
    cfg = tmp_path / "c.toml"
    backend = '\nname = "openai_compatible"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key = "k"\n'
    cfg.write_text(f'project = "{project}"\n[target]{backend}[optimizer]{backend}'
                   '[document]\nkind = "claude_md"\n', encoding="utf-8")
    exe = shutil.which("skillopt-sleep")
    cmd = [exe] if exe else [sys.executable, "-m", "skillopt_sleep"]
    res = subprocess.run([*cmd, "--config", str(cfg), "run"], capture_output=True, text=True,
                         timeout=240)
    assert res.returncode == 1, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: {target} is not UTF-8 text (byte 0xff at offset 8); "
                      "convert it to UTF-8 or train another document"], res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert target.read_bytes() == LATIN1
    assert sorted(p.name for p in project.iterdir()) == ["CLAUDE.md"]


# ---------------------------------------------------------------- the separating blank line
@pytest.mark.parametrize("before, sep", [
    ("a\r\nb\r\nc\n", "\r\n"),         # CRLF file whose last line ends in LF: one blank line
    ("a\r\nb\r\n", "\r\n"),
    ("a\r\nb", "\r\n\r\n"),            # unterminated last line: end it, then one blank line
    ("a\r\n\r\n", ""),                 # a blank line already there
    ("a\r\n\n", ""),                   # ... whatever its line ending
    ("a\n\r\n", ""),
    ("a\nb\n", "\n"),
    ("a\nb", "\n\n"),
    ("a\n\n", ""),
    ("", ""),
])
def test_an_appended_block_is_separated_by_exactly_one_blank_line(before, sep):
    nl = "\r\n" if "\r\n" in before else "\n"
    out = Document.parse(before).render(["Rule."])
    assert out == before + sep + BEGIN + nl + "- Rule." + nl + END + nl
    again = Document.parse(out)
    assert again.before == before + sep and again.rules == ["Rule."]
    assert again.render([]) == before + sep + BEGIN + nl + END + nl  # later nights: block only
