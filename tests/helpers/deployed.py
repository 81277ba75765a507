"""The user's side of a certified-deployed test: the pinned real CLIs asked a question in
the project folder with their own (sandbox) config against the simulator, and where a rule
sits in the request they send."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from skillopt_sleep import agents
from tests.helpers.clis import (
    OPENCLAW_QUIET,
    OPENCODE_QUIET,
    PI_QUIET,
    agent_binary,
    cli_env,
    run_cli,
    write_openclaw_config,
    write_opencode_config,
    write_pi_models,
)
from tests.helpers.night import PERSONA as NIGHT_PERSONA

SIM_KEY = "sk-sim-deployed-0123456789"
MODEL = "sim-demo"
ASK = "how do I install the dependencies?"
TIMEOUT = 120
#: the user's sessions the night trains from, written by the real CLI: (the task, the
#: user's correction in the same session or None); three recurring tasks, one asked twice
USER_SESSIONS = [
    (ASK, "no, use pnpm, not npm"),
    ("install the dependencies please", None),
    ("run the tests", "no, use pnpm instead of npm"),
    ("run the linter", "no, use pnpm instead of npm"),
]
# the engine tests' persona (every recurring task of DEMO_CONVERSATIONS answered the npm way),
# answering only the model the CLIs are configured with
PERSONA = tomllib.loads(
    NIGHT_PERSONA.replace(
        'name = "night-test"\nmodels = []', f'name = "deployed"\nmodels = ["{MODEL}"]'
    )
)


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    return run_cli(argv, cwd, env, TIMEOUT).stdout


#: OpenClaw's session key of the last question per state folder (``agent --local`` continues
#: one session per key; a new question gets a new key)
_OPENCLAW_KEYS: dict[Path, int] = {}


def _final_text(value: Any) -> str | None:
    """``finalAssistantVisibleText`` anywhere in OpenClaw's ``--json`` output."""
    if isinstance(value, dict):
        if isinstance(value.get("finalAssistantVisibleText"), str):
            return str(value["finalAssistantVisibleText"])
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = _final_text(item)
            if found is not None:
                return found
    return None


def ask_openclaw(url: str, project: Path, prompt: str, *, more: bool = False) -> str:
    """``openclaw agent --local --agent main --session-key task-<n> -m <prompt> --json`` with the
    user's (sandbox) state folder configured for the simulator: what it answered. A new
    question starts a session of its own; ``more`` continues the last one."""
    state = agents.get_agent("openclaw").home()
    workspace = None  # a workspace the test set in the config is kept
    if (state / "openclaw.json").is_file():
        import json5

        config = json5.loads((state / "openclaw.json").read_text("utf-8"))
        workspace = config.get("agents", {}).get("defaults", {}).get("workspace")
    write_openclaw_config(state, url + "/v1", MODEL, "SIM_KEY", workspace)
    n = _OPENCLAW_KEYS.get(state, 0) + (0 if more else 1)
    _OPENCLAW_KEYS[state] = n
    argv = [agent_binary("openclaw"), "agent", "--local", "--agent", "main"]
    argv += ["--session-key", f"task-{n}", "-m", prompt, "--json"]
    out = _run(argv, project, cli_env(SIM_KEY=SIM_KEY, **OPENCLAW_QUIET))
    answer = _final_text(json.loads(out[out.index("{") :]))
    assert answer is not None, out[-2000:]
    return answer


def ask(agent: str, url: str, project: Path, prompt: str = ASK, *, more: bool = False) -> str:
    """The user asks ``prompt`` with the real CLI, in the project folder, with their own
    (sandbox) config: what the CLI prints. ``more``: a follow-up turn in the CLI's most recent
    session of this folder (``claude -c``, ``codex exec resume --last``, ``copilot
    --continue``, ``opencode run --continue``, ``pi -p -c``, OpenClaw's session key)."""
    if agent == "openclaw":
        return ask_openclaw(url, project, prompt, more=more)
    if agent == "claude_code":
        out = _run(
            [agent_binary("claude"), "-p", prompt, "--output-format", "json", "--model", MODEL]
            + (["-c"] if more else []),
            project,
            cli_env(
                ANTHROPIC_BASE_URL=url,
                ANTHROPIC_API_KEY=SIM_KEY,
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                DISABLE_AUTOUPDATER="1",
            ),
        )
        return str(json.loads(out)["result"])
    if agent == "codex":
        home = agents.get_agent("codex").home()
        config = home / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            f'model = "{MODEL}"\nmodel_provider = "sim"\n\n[model_providers.sim]\n'
            f'name = "Simulator"\nbase_url = "{url}/v1"\nwire_api = "responses"\n'
            'env_key = "SIM_API_KEY"\n'
        )
        resume = ["resume", "--last"] if more else []
        return _run(
            [agent_binary("codex"), "exec", *resume, "--skip-git-repo-check", prompt],
            project,
            cli_env(SIM_API_KEY=SIM_KEY),
        )
    if agent == "opencode":
        home = agents.get_agent("opencode").home()
        write_opencode_config(home.parent.parent, url + "/v1", MODEL, "SIM_API_KEY")
        # one word per argument: `opencode run` quotes an argument that holds a space
        return _run(
            [agent_binary("opencode"), "run", *(["--continue"] if more else []), *prompt.split()],
            project,
            cli_env(SIM_API_KEY=SIM_KEY, PWD=str(project), **OPENCODE_QUIET),
        )
    if agent == "pi":
        write_pi_models(agents.get_agent("pi").home().parent.parent, url + "/v1", MODEL, "SIM_KEY")
        return _run(
            [agent_binary("pi"), "--provider", "sim", "--model", MODEL, "-p", prompt]
            + (["-c"] if more else []),
            project,
            cli_env(SIM_KEY=SIM_KEY, **PI_QUIET),
        )
    return _run(
        [agent_binary("copilot"), "-p", prompt, "-s"] + (["--continue"] if more else []),
        project,
        cli_env(
            COPILOT_OFFLINE="true",
            COPILOT_PROVIDER_BASE_URL=url + "/v1",
            COPILOT_PROVIDER_API_KEY=SIM_KEY,
            COPILOT_MODEL=MODEL,
            COPILOT_AUTO_UPDATE="false",
        ),
    )


def write_user_sessions(agent: str, url: str, project: Path) -> None:
    """The user's recurring tasks, each asked in a session of its own with the real CLI in
    the project folder; a correction is the session's second turn (see :func:`ask`)."""
    for prompt, correction in USER_SESSIONS:
        answer = ask(agent, url, project, prompt)
        assert "npm" in answer and "pnpm" not in answer, answer  # the habit, before any rule
        if correction:
            ask(agent, url, project, correction, more=True)


def _texts(value: Any, at: str = "") -> list[tuple[str, str]]:
    """Every string in a request body with its JSON path, list indices kept."""
    if isinstance(value, str):
        return [(at, value)]
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _texts(v, f"{at}.{k}")]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _texts(v, f"{at}[{i}]")]
    return []


def place_of(body: dict[str, Any], rule: str) -> tuple[str, str]:
    """Where ``rule`` is in a request: the JSON path of the string holding it and that
    string's framing (its first line), paths of temporary folders masked."""
    found = [(at, text) for at, text in _texts(body) if rule in text]
    assert len(found) == 1, f"the rule should be in exactly one place: {[a for a, _ in found]}"
    at, text = found[0]
    head = re.sub(r"/\S+", "<path>", text.strip().splitlines()[0])
    return at, head


def assert_trained_through(
    store: Any, result: Any, backend: str, *, min_input_tokens: int
) -> list[dict]:
    """What a night through a real CLI must show: the derived rule applied and the harmful
    one rejected, val up, and every replay made through ``backend`` with tokens from the
    CLI's own output (the fresh ones: more than ``min_input_tokens`` in). Returns the fresh
    rollouts."""
    from tests.helpers.store import db_rows

    edits = {e["text"]: e for e in db_rows(store, "edits", "night_id = ?", [result.night_id])}
    assert edits["Use `pnpm` instead of `npm`."]["status"] == "applied"
    assert edits["Never mention `pnpm`."]["status"] == "rejected"
    assert result.val_after is not None and result.val_before is not None
    assert result.val_after > result.val_before
    rollouts = db_rows(store, "rollouts", "night_id = ?", [result.night_id])
    fresh = [r for r in rollouts if not r["cached"]]
    assert fresh and all(r["backend"] == backend for r in rollouts)
    assert all(r["input_tokens"] > min_input_tokens and r["output_tokens"] > 0 for r in fresh)
    return fresh


#: how each CLI states its working folder in a model request: Claude Code's environment
#: section, Codex's <environment_context>, Copilot's and Pi's system prompt, OpenCode's <env>,
#: OpenClaw's runtime section (measured against the pinned CLIs)
_FOLDER = re.compile(
    r"(?:Primary working directory|Current working directory|Working directory):[ \t]*"
    r"([^\n]+?)[ \t]*(?:\n|$)|<cwd>([^<\n]+)</cwd>"
)


def stated_folder(body: dict[str, Any]) -> str:
    """The working folder a CLI's request states (exactly one, however often it is said)."""
    found = {
        (m.group(1) or m.group(2)).strip()
        for _, text in _texts(body)
        for m in _FOLDER.finditer(text)
    }
    assert len(found) == 1, f"one working folder should be stated: {found}"
    return found.pop()


def tool_names(body: dict[str, Any]) -> set[str]:
    """The names of the tools a request offers (Anthropic ``name``, Responses ``name`` or
    ``type``, Chat Completions ``function.name``)."""
    names = set()
    for tool in body.get("tools") or []:
        fn = tool.get("function")
        names.add(
            str(
                (fn or {}).get("name")
                if isinstance(fn, dict)
                else tool.get("name") or tool.get("type")
            )
        )
    return names


def assert_in_scope_with_live_tools(
    replays: list[dict[str, Any]],
    live: dict[str, Any],
    rule: str,
    live_only: frozenset[str] = frozenset(),
) -> None:
    """Every replay request that carried ``rule`` states a working folder its block's scope
    covers (the heading the agent reads, as it reads it) and offers the tool names the live
    request offers (but ``live_only``, named by the caller with the reason)."""
    from skillopt_sleep.delivery.document import HEADING_RE, covers

    assert replays
    for body in replays:
        text = next(t for _, t in _texts(body) if rule in t)
        head = HEADING_RE.search(text)
        assert head is not None, text[:400]
        folder = stated_folder(body)
        assert covers(head.group(1), folder, head.group(2)), (head.group(0), folder)
        offered, live_offered = tool_names(body) - live_only, tool_names(live) - live_only
        assert offered == live_offered, offered ^ live_offered
    assert tool_names(live), "the live request offers tools"
