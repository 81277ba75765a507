import pytest

from skillopt_sleep.config import DocumentConfig
from skillopt_sleep.delivery.document import (
    BEGIN,
    END,
    MAX_DESCRIPTION_CHARS,
    Document,
    Edit,
    apply_describe,
    apply_edit,
    find_rule,
    parse_edits,
    read_live,
    resolve_target,
    same_rule,
)
from skillopt_sleep.errors import DocumentError, NightError, SkilloptError
from tests.helpers.cli_run import skillopt_in_process


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
    assert apply_edit(rules, Edit(op="add", text="Keep commits small.")) == rules + [
        "Keep commits small."
    ]
    assert (
        apply_edit(rules, Edit(op="add", text="use `pnpm` instead of `npm`.")) is None
    )  # duplicate
    assert apply_edit(rules, Edit(op="delete", old="Run tests with `pnpm test`")) == rules[:1]
    assert apply_edit(
        rules, Edit(op="replace", old="Use `pnpm` instead of `npm`.", text="Use `yarn`.")
    ) == ["Use `yarn`.", rules[1]]
    assert apply_edit(rules, Edit(op="delete", old="something else entirely")) is None


def test_parse_edits_drops_malformed():
    edits = parse_edits(
        {
            "edits": [
                {"op": "add", "text": "x"},
                {"op": "explode"},
                "junk",
                {"op": "delete", "old": "y", "rationale": "r"},
            ]
        }
    )
    assert [(e.op, e.text, e.old) for e in edits] == [("add", "x", ""), ("delete", "", "y")]


def test_resolve_targets(tmp_path):
    home = tmp_path / "h"
    # the default: the user-level memory file the agent loads in every turn
    assert (
        resolve_target(DocumentConfig(), None, env={}, home=home) == home / ".claude" / "CLAUDE.md"
    )
    cx = {"CODEX_HOME": str(tmp_path / "cx")}
    assert resolve_target(DocumentConfig(agent="codex"), None, env=cx, home=home) == (
        tmp_path / "cx" / "AGENTS.md"
    )
    assert resolve_target(DocumentConfig(agent="copilot"), None, env={}, home=home) == (
        home / ".copilot" / "copilot-instructions.md"
    )
    assert (
        resolve_target(DocumentConfig(kind="managed_skill"), None, env={}, home=home)
        == home / ".claude" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    )
    assert (
        resolve_target(DocumentConfig(kind="managed_skill", agent="codex"), None, env=cx, home=home)
        == tmp_path / "cx" / "skills" / "skillopt-sleep-learned" / "SKILL.md"
    )
    assert (
        resolve_target(DocumentConfig(kind="agents_md"), tmp_path, env={}, home=home)
        == tmp_path.resolve() / "AGENTS.md"
    )
    with pytest.raises(NightError, match="needs a project"):
        resolve_target(DocumentConfig(kind="claude_md"), None, env={}, home=home)
    with pytest.raises(NightError, match=r"document\.path"):
        resolve_target(DocumentConfig(kind="path"), None, env={}, home=home)


# ---------------------------------------------------------------- a live file that is not UTF-8
LATIN1 = b"# notes\n\xff\xfe latin1 caf\xe9\n"


def test_read_live_of_a_file_that_is_not_utf8_is_a_typed_error(tmp_path):
    target = tmp_path / "CLAUDE.md"
    target.write_bytes(LATIN1)
    with pytest.raises(DocumentError) as info:
        read_live(target)
    assert str(info.value) == (
        f"{target} is not UTF-8 text (byte 0xff at offset 8); "
        "convert it to UTF-8 or train another document"
    )
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
    cfg.write_text(
        f'project = "{project}"\n[target]{backend}[optimizer]{backend}'
        '[document]\nkind = "claude_md"\n',
        encoding="utf-8",
    )
    res = skillopt_in_process("--config", str(cfg), "run", timeout=240)
    assert res.returncode == 1, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [
        f"error: {target} is not UTF-8 text (byte 0xff at offset 8); "
        "convert it to UTF-8 or train another document"
    ], res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert target.read_bytes() == LATIN1
    assert sorted(p.name for p in project.iterdir()) == ["CLAUDE.md"]


# ---------------------------------------------------------------- the separating blank line
@pytest.mark.parametrize(
    "before, sep",
    [
        ("a\r\nb\r\nc\n", "\r\n"),  # CRLF file whose last line ends in LF: one blank line
        ("a\r\nb\r\n", "\r\n"),
        ("a\r\nb", "\r\n\r\n"),  # unterminated last line: end it, then one blank line
        ("a\r\n\r\n", ""),  # a blank line already there
        ("a\r\n\n", ""),  # ... whatever its line ending
        ("a\n\r\n", ""),
        ("a\nb\n", "\n"),
        ("a\nb", "\n\n"),
        ("a\n\n", ""),
        ("", ""),
    ],
)
def test_an_appended_block_is_separated_by_exactly_one_blank_line(before, sep):
    nl = "\r\n" if "\r\n" in before else "\n"
    out = Document.parse(before).render(["Rule."])
    assert out == before + sep + BEGIN + nl + "- Rule." + nl + END + nl
    again = Document.parse(out)
    assert again.before == before + sep and again.rules == ["Rule."]
    assert again.render([]) == before + sep + BEGIN + nl + END + nl  # later nights: block only


# ---------------------------------------------------------------- near-duplicate rules
def test_an_add_with_other_code_spans_is_not_a_near_duplicate():
    """The user trial: `yarn` was dropped as a near-duplicate of `yarn lint` (similarity 91.8)."""
    rules = ["Use `yarn lint` instead of `npm`."]
    e = Edit(op="add", text="Use `yarn` instead of `npm`.")
    assert apply_edit(rules, e) == rules + ["Use `yarn` instead of `npm`."]
    tests = ["Run tests with `pytest -x`."]
    assert apply_edit(tests, Edit(op="add", text="Run tests with `pytest -q`.")) == tests + [
        "Run tests with `pytest -q`."
    ]
    assert not same_rule("Run tests with `pytest -q`.", "Run tests with `pytest -x`.")
    assert not same_rule("Use `pnpm` instead of `npm`.", "Use `pnpm` instead of `npx`.")


@pytest.mark.parametrize(
    "existing, added",
    [
        ("Use `pnpm` instead of `npm`.", "Always use `pnpm` instead of `npm`."),  # a rewording
        ("Use `pnpm` instead of `npm`.", "use  `pnpm` instead of `npm`"),
        (
            "Use `pnpm` instead of `npm`.",
            "Use pnpm instead of npm.",
        ),  # the same terms, no backticks
        ("Keep commits small.", "keep commits small!"),
    ],
)
def test_a_rewording_of_a_rule_is_a_near_duplicate_and_says_so(existing, added):
    rules = [existing, "Be brief."]
    e = Edit(op="add", text=added)
    assert apply_edit(rules, e) is None
    assert e.reason == f"a near-duplicate of the existing rule: {existing}"
    exact = Edit(op="add", text=f"  {existing} ")
    assert apply_edit(rules, exact) is None and exact.reason == f"already a rule: {existing}"


@pytest.mark.parametrize(
    "a, b",
    [
        ("Keep answers under 200 characters.", "Keep answers under 300 characters."),  # numbers
        ("Do run the linter before committing.", "Do not run the linter before committing."),
        ("Always mention `pnpm`.", "Never mention `pnpm`."),
        (
            "Use yarn lint instead of npm.",
            "Use `yarn` instead of `npm`.",
        ),  # plain text, other terms
        ("Prefer small functions.", "Prefer small modules."),  # no backticks: stricter (ratio 88)
    ],
)
def test_rules_that_differ_in_what_they_say_are_not_near_duplicates(a, b):
    assert not same_rule(a, b) and not same_rule(b, a)
    assert apply_edit([a], Edit(op="add", text=b)) == [a, b]


def test_delete_and_replace_find_their_rule_only_by_the_same_code_spans():
    rules = ["Run tests with `pytest -x`.", "Use `yarn lint` instead of `npm`."]
    # a reworded reference still finds its rule...
    assert apply_edit(rules, Edit(op="delete", old="- run tests with `pytest -x`")) == rules[1:]
    assert apply_edit(rules, Edit(op="delete", old="Run tests with pytest -x")) == rules[1:]
    assert apply_edit(
        rules,
        Edit(op="replace", old="Always use `yarn lint` instead of `npm`.", text="Use `pnpm lint`."),
    ) == [rules[0], "Use `pnpm lint`."]
    # ...but one naming other code spans finds none, and says so
    for e in (
        Edit(op="delete", old="Run tests with `pytest -q`."),
        Edit(op="replace", old="Use `yarn` instead of `npm`.", text="Use `pnpm`."),
    ):
        assert apply_edit(rules, e) is None
        assert e.reason == f"no rule matches '{e.old}'"
    # the most similar rule with the same code spans is the one changed, not a closer-worded
    # rule with other ones (before: `pytest -x`, similarity 96.3 against 93.1)
    two = ["Run tests with `pytest -x`.", "Run all tests with `pytest -q`."]
    assert find_rule(two, "Run tests with `pytest -q`.") == 1
    assert apply_edit(two, Edit(op="delete", old="Run tests with `pytest -q`.")) == two[:1]
    pnpm = ["Use `pnpm` instead of `npm`.", "Always use `pnpm` instead of `npm` in CI."]
    assert find_rule(pnpm, "Always use `pnpm` instead of `npm` in CI!") == 1
    assert find_rule(pnpm, "Use `pnpm` instead of `npm`!") == 0


def test_an_edit_that_does_not_apply_says_why():
    rules = ["Use `pnpm` instead of `npm`."]
    cases = [
        (Edit(op="add", text="  "), "the edit has no rule text"),
        (Edit(op="delete", old=""), "the delete names no rule (its old text is empty)"),
        (
            Edit(op="replace", old=rules[0], text=""),
            "the replacement for 'Use `pnpm` instead of `npm`.' is empty",
        ),
        (
            Edit(op="replace", old="use `pnpm` instead of `npm`", text=rules[0]),
            "the replacement is the rule itself: Use `pnpm` instead of `npm`.",
        ),
    ]
    for e, reason in cases:
        assert apply_edit(rules, e) is None and e.reason == reason
    full = Edit(op="add", text="Be brief.")
    assert apply_edit(rules, full, max_rules=1) is None
    assert full.reason == "the document already has the most rules allowed (1)"


def test_a_project_section_is_its_own_block_and_keeps_the_others():
    from skillopt_sleep.delivery.document import begin_marker, section_heading

    other = (
        begin_marker("/src/other") + "\n" + section_heading("/src/other") + "\n- Other rule.\nEND\n"
    )
    other = other.replace("END", "<!-- skillopt-sleep:end -->")
    shared = Document.parse(None).render(["Global rule."])
    text = "# mine\n\n" + other + "\n" + shared
    web = Document.parse(text, section="/src/web")
    assert not web.had_block and web.rules == []
    once = web.render(["Use `pnpm` instead of `npm`."])
    assert once.startswith(text.rstrip("\n"))  # everything before is kept byte for byte
    again = Document.parse(once, section="/src/web")
    assert again.had_block and again.rules == ["Use `pnpm` instead of `npm`."]
    assert (
        "When working in `/src/web` (or below it, or in a copy of it named `web`), follow "
        "these rules:" in once
    )
    # the other project's block and the global one are untouched, and parse separately
    assert Document.parse(once, section="/src/other").rules == ["Other rule."]
    assert Document.parse(once).rules == ["Global rule."]
    assert (
        again.render(["Use `pnpm` instead of `npm`.", "Run `pytest -q`."]).count(
            begin_marker("/src/other")
        )
        == 1
    )


def test_a_projects_block_whose_path_holds_spaces_is_found_again_not_added_twice():
    """A project folder with spaces (``~/My Projects/web app``): its block is found again by
    its whole path, so a second night replaces it instead of adding another, and a project
    whose path only starts the same is another block."""
    from skillopt_sleep.delivery.document import sections

    spaced, prefix = "/home/u/My Projects/web app", "/home/u/My Projects/web"
    once = Document.parse("# mine\n", section=spaced).render(["Use `pnpm` instead of `npm`."])
    assert sections(once) == [spaced]
    again = Document.parse(once, section=spaced)
    assert again.had_block and again.rules == ["Use `pnpm` instead of `npm`."]
    twice = again.render(["Use `pnpm` instead of `npm`.", "Run `pytest -q`."])
    assert sections(twice) == [spaced] and twice.startswith("# mine\n")
    other = Document.parse(twice, section=prefix)
    assert not other.had_block
    both = other.render(["Use `yarn` instead of `npm`."])
    assert sections(both) == [spaced, prefix]
    assert Document.parse(both, section=spaced).rules == [
        "Use `pnpm` instead of `npm`.",
        "Run `pytest -q`.",
    ]


# ------------------------------------------------------------------ a skill's description
SKILL_TEXT = (
    "---\r\nname: my-skill\r\ndescription: >\r\n  Folded over\r\n  two lines.\r\n"
    "license: MIT\r\n---\r\n\r\n# Body\r\n\r\n"
    f"{BEGIN}\r\n- Use `pnpm` instead of `npm`.\r\n{END}\r\ntail"
)


@pytest.mark.parametrize(
    ("text", "description"),
    [
        (SKILL_TEXT, "Folded over two lines."),
        ("---\nname: s\ndescription: Plain words here\n---\nbody\n", "Plain words here"),
        ('---\nname: s\ndescription: "Quoted: with a colon"\n---\n', "Quoted: with a colon"),
        ("---\nname: s\ndescription: 'it''s single'\n---\n", "it's single"),
        (
            None,
            "Rules learned by skillopt-sleep from this user's recurring tasks and corrections. Apply them to every coding task.",
        ),
    ],
)
def test_a_skill_description_is_parsed_and_kept_byte_for_byte(text, description):
    doc = Document.parse(text, new_skill=True)
    assert doc.skill and doc.description == description
    if text is not None:
        assert doc.render() == text
        assert doc.render(doc.rules) == text


def test_a_describe_edit_rewrites_only_the_description():
    doc = Document.parse(SKILL_TEXT, new_skill=True)
    e = Edit(op="describe", text="  Rules for   tests, webapp.\n")
    new = apply_describe(doc, e)
    assert new is not None and e.reason == ""
    assert e.old == "Folded over two lines." and e.text == "Rules for tests, webapp."
    assert e.describe() == "describe: Rules for tests, webapp."
    out = new.render()
    assert out == SKILL_TEXT.replace(
        ">\r\n  Folded over\r\n  two lines.", "Rules for tests, webapp."
    )
    assert doc.render() == SKILL_TEXT  # the original document is unchanged
    again = Document.parse(out, new_skill=True)
    assert again.description == "Rules for tests, webapp." and again.rules == doc.rules
    # YAML-significant text is quoted, and reads back as written
    colon = apply_describe(doc, Edit(op="describe", text="Use for: tests # and more"))
    assert colon is not None
    assert 'description: "Use for: tests # and more"\r\n' in colon.render()
    assert Document.parse(colon.render(), new_skill=True).description == (
        "Use for: tests # and more"
    )


@pytest.mark.parametrize(
    ("text", "skill", "new", "reason"),
    [
        ("# Memory\n", False, "Anything", "only a skill has a description"),
        ("# No front matter\n", True, "Anything", "no front matter description"),
        (SKILL_TEXT, True, "   ", "empty"),
        (SKILL_TEXT, True, "x" * 301, "at most 300"),
        (SKILL_TEXT, True, "Folded over two lines.", "is the current one"),
    ],
)
def test_a_describe_edit_that_does_not_apply_says_why(text, skill, new, reason):
    doc = Document.parse(text, new_skill=skill)
    e = Edit(op="describe", text=new)
    assert apply_describe(doc, e) is None and reason in e.reason
    assert doc.render() == text
    # a describe edit never changes the rules
    assert apply_edit(["a rule"], e) is None and "not its rules" in e.reason


def test_parse_edits_reads_describe():
    edits = parse_edits(
        {"edits": [{"op": "describe", "text": "Rules for tests."}, {"op": "rename"}]}
    )
    assert [(e.op, e.text) for e in edits] == [("describe", "Rules for tests.")]
    assert MAX_DESCRIPTION_CHARS == 300


def test_a_project_blocks_scope_covers_its_folder_and_a_copy_named_like_it():
    from skillopt_sleep.delivery.document import HEADING_RE, covers, section_heading

    heading = HEADING_RE.search(section_heading("/src/web"))
    assert heading is not None and heading.groups() == ("/src/web", "web")
    for cwd, inside in [
        ("/src/web", True),
        ("/src/web/api", True),
        ("/tmp/skillopt-sleep-replay-x/work/web", True),  # a replay's copy
        ("/tmp/skillopt-sleep-replay-x/work/web/src", True),
        ("/src/webapp", False),
        ("/src", False),
        ("/tmp/skillopt-sleep-replay-x/work/work", False),
    ]:
        assert covers("/src/web", cwd, "web") is inside, cwd
    # a block written before the copy clause: its folder only
    old = HEADING_RE.search("When working in `/src/web` (or below it), follow these rules:")
    assert old is not None and old.group(2) is None
    assert not covers("/src/web", "/tmp/x/work/web", old.group(2))
