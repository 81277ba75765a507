"""Per-rule review (issue 26): a proposal's rules listed one by one with scope, evidence, val
effect and cost; adopt some (`--rules`), refuse one (`reject --rule`) without refusing its
siblings, which the next night may propose again."""

from __future__ import annotations

import json
from pathlib import Path

from skillopt_sleep.delivery.document import Document
from skillopt_sleep.simulator import serve
from skillopt_sleep.testing.sessions import write_conversations
from tests.helpers.cli_run import sim_config
from tests.helpers.cli_run import skillopt_in_process as skillopt
from tests.helpers.scope import COMMITS, INSTALLS, PERSONA, SHORTER

COMMIT_RULE = "When writing a commit message: keep answers under 50 characters."
PNPM_RULE = "When installing dependencies or adding packages: use `pnpm` instead of `npm`."


def _world(tmp_path: Path, home: Path) -> tuple[Path, Path]:
    """The user's sessions (commit messages corrected for length, installs for pnpm) of the
    project ``tmp_path/webapp``, and the literal-minded persona: (project, persona file)."""
    project = tmp_path / "webapp"
    project.mkdir()
    write_conversations(home, project, COMMITS + INSTALLS)
    persona = tmp_path / "persona.toml"
    persona.write_text(PERSONA, encoding="utf-8")
    return project, persona


def _one_night(tmp_path: Path, home: Path) -> tuple[str, str, Path]:
    """One night over :func:`_world` through the CLI: (config, its proposal, the live file)."""
    project, persona = _world(tmp_path, home)
    with serve(persona) as sim:
        cfg = str(sim_config(tmp_path / "c.toml", home, project, sim.url + "/v1"))
        pid = json.loads(skillopt("--config", cfg, "run", "--json").stdout)["proposal_id"]
    return cfg, pid, project / "AGENTS.md"


def test_rules_are_reviewed_one_by_one_and_a_refusal_is_of_that_rule_only(tmp_path, isolated_home):
    project, persona = _world(tmp_path, isolated_home)
    live = project / "AGENTS.md"
    with serve(persona) as sim:
        cfg = str(sim_config(tmp_path / "c.toml", isolated_home, project, sim.url + "/v1"))
        night = json.loads(skillopt("--config", cfg, "run", "--json").stdout)
        assert night["status"] == "succeeded", night
        pid = night["proposal_id"]

        # show leads with the rules in plain words: scope, the user's words, val, cost
        shown = skillopt("--config", cfg, "show", pid)
        assert shown.returncode == 0, shown.stderr
        text = shown.stdout
        assert text.index("## Rules") < text.index("## Edits")
        rules = json.loads(skillopt("--config", cfg, "show", pid, "--json").stdout)["rules"]
        by_rule = {r["rule"]: r for r in rules}
        assert set(by_rule) == {COMMIT_RULE, PNPM_RULE}, list(by_rule)
        commit = by_rule[COMMIT_RULE]
        assert f"{commit['n']}. adds: {COMMIT_RULE}\n" in text  # its scope leads the rule
        assert f'where you said "{SHORTER}"' in text
        assert "skillopt-sleep session show" in text
        assert commit["val_after"] > commit["val_before"] and commit["tokens"] > 0

        # refuse the commit rule alone: the proposal stays staged with the other rule
        res = skillopt(
            "--config", cfg, "reject", pid, "--rule", str(commit["n"]), "--reason", "too terse"
        )
        assert res.returncode == 0, res.stderr
        assert f"refused rule {commit['n']} of {pid}: {COMMIT_RULE}" in res.stdout
        assert "1 rule(s) left" in res.stdout
        listed = json.loads(skillopt("--config", cfg, "proposals", "--json").stdout)
        assert [p["status"] for p in listed if p["id"] == pid] == ["staged"]
        again = skillopt("--config", cfg, "show", pid).stdout
        assert "— **refused** (too terse)" in again
        # refused again: said so, the first reason kept; adopting it: refused, nothing written
        twice = skillopt("--config", cfg, "reject", pid, "--rule", str(commit["n"]))
        assert twice.returncode != 0 and "is already refused (too terse)" in twice.stderr
        chosen = skillopt("--config", cfg, "adopt", pid, "--rules", str(commit["n"]))
        assert chosen.returncode != 0 and f"rule {commit['n']} of {pid} is refused" in chosen.stderr
        assert not live.exists()
        # a rule's refusal taken back, and given again
        back = skillopt("--config", cfg, "reject", pid, "--rule", str(commit["n"]), "--undo")
        assert back.returncode == 0 and f"lifted the refusal of rule {commit['n']}" in back.stdout
        assert "**refused**" not in skillopt("--config", cfg, "show", pid).stdout
        res = skillopt(
            "--config", cfg, "reject", pid, "--rule", str(commit["n"]), "--reason", "too terse"
        )
        assert res.returncode == 0, res.stderr
        # a number the proposal has no rule for: one line, nothing changed
        bad = skillopt("--config", cfg, "adopt", pid, "--rules", "7")
        assert bad.returncode != 0 and "has no rule 7" in bad.stderr and not live.exists()

        # the next night: the refused rule is never tried again; its sibling is proposed again
        second = json.loads(skillopt("--config", cfg, "run", "--json").stdout)
        assert second["status"] == "succeeded", second
        pid2 = second["proposal_id"]
        rules2 = json.loads(skillopt("--config", cfg, "show", pid2, "--json").stdout)["rules"]
        assert [r["rule"] for r in rules2] == [PNPM_RULE]
        edits = json.loads(skillopt("--config", cfg, "show", pid2, "--json").stdout)["edits"]
        refused = [e for e in edits if e["text"] == COMMIT_RULE]
        assert refused and all(
            e["status"] == "rejected" and f"the user refused it in {pid}: too terse" in e["reason"]
            for e in refused
        )

    res = skillopt("--config", cfg, "adopt", pid2)
    assert res.returncode == 0, res.stderr
    assert Document.parse(live.read_text("utf-8")).rules == [PNPM_RULE]


def test_adopting_some_rules_writes_only_those_and_show_says_which(tmp_path, isolated_home):
    cfg, pid, live = _one_night(tmp_path, isolated_home)
    rules = json.loads(skillopt("--config", cfg, "show", pid, "--json").stdout)["rules"]
    n = next(r["n"] for r in rules if r["rule"] == PNPM_RULE)
    for bad in ("x", "", "-1"):
        res = skillopt("--config", cfg, "adopt", pid, "--rules", bad)
        assert res.returncode != 0 and "--rules takes rule numbers" in res.stderr
    res = skillopt("--config", cfg, "adopt", pid, "--rules", str(n))
    assert res.returncode == 0, res.stderr
    assert f"left out: {COMMIT_RULE}" in res.stdout
    assert Document.parse(live.read_text("utf-8")).rules == [PNPM_RULE]
    now = {
        r["rule"]: r["status"]
        for r in json.loads(skillopt("--config", cfg, "show", pid, "--json").stdout)["rules"]
    }
    assert now == {PNPM_RULE: "adopted", COMMIT_RULE: "not adopted"}
    detail = skillopt("--config", cfg, "show", pid).stdout
    assert f"{COMMIT_RULE} — **not adopted**" in detail
    assert f"{PNPM_RULE} — **adopted**" in detail


def test_a_proposal_whose_every_rule_was_refused_comes_back_whole_when_the_refusal_is_lifted(
    tmp_path, isolated_home
):
    cfg, pid, live = _one_night(tmp_path, isolated_home)
    rules = json.loads(skillopt("--config", cfg, "show", pid, "--json").stdout)["rules"]
    for r in rules:
        assert skillopt("--config", cfg, "reject", pid, "--rule", str(r["n"])).returncode == 0
    assert json.loads(skillopt("--config", cfg, "show", pid, "--json").stdout)["status"] == (
        "rejected"
    )
    # `reject --undo` takes back the whole refusal, its rules' refusals too: adopt writes them
    res = skillopt("--config", cfg, "reject", pid, "--undo")
    assert res.returncode == 0 and "now staged" in res.stdout, res
    now = json.loads(skillopt("--config", cfg, "show", pid, "--json").stdout)["rules"]
    assert {r["status"] for r in now} == {"proposed"}
    assert skillopt("--config", cfg, "adopt", pid).returncode == 0
    assert sorted(Document.parse(live.read_text("utf-8")).rules) == sorted(r["rule"] for r in rules)


def test_adopting_nothing_is_refused_and_writes_nothing(tmp_path, isolated_home):
    cfg, pid, live = _one_night(tmp_path, isolated_home)
    rules = json.loads(skillopt("--config", cfg, "show", pid, "--json").stdout)["rules"]
    assert skillopt("--config", cfg, "reject", pid, "--rule", str(rules[0]["n"])).returncode == 0
    # the one rule left, refused: rejected; a refused rule given to --rules is named
    for bad in ("0", "9"):
        res = skillopt("--config", cfg, "adopt", pid, "--rules", bad)
        assert res.returncode != 0 and f"has no rule {bad}" in res.stderr, res.stderr
    assert not live.exists()
