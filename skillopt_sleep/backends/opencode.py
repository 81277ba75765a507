"""``opencode``: replay through OpenCode's non-interactive ``run`` command.

One call is (the prompt on stdin; ``opencode run`` joins its message arguments with quotes
around each one that has a space, stdin keeps the text as it is)::

    opencode run --format json [--model <provider>/<model>]

run in an empty temporary working directory (also as ``$PWD``, which OpenCode takes as its
directory), with a throw-away XDG layout: ``XDG_CONFIG_HOME``,
``XDG_DATA_HOME`` and ``XDG_STATE_HOME`` point into the call's scratch folder, so the session
the run writes (``opencode.db``), its log and its locks never reach the user's
``~/.local/share/opencode``; the prompt's first line is :data:`SELF_MARKER` all the same. The
user's config files (:attr:`Agent.auth_files`: ``opencode.json`` …) and login (``auth.json`` of
the data folder) are copied in only when no ``base_url`` is set.

``OPENCODE_CONFIG_CONTENT`` (OpenCode's inline config, merged over the files) carries what a
replay needs: no autoupdate, no sharing, no session title (OpenCode would ask the model for
one in a second request); for a replay of the user's task OpenCode's own tools under a
``permission`` that allows edits (in the working folder) and asks for a shell command, a
fetch or a path outside it, which ``run`` rejects (listed as stopped); for other calls tools
off unless the task asks for them (``"*":
false`` then only the wanted ones on; the ``skill`` tool on when a skill is trained: it lists
the skill's folder with ripgrep, ``rg`` on ``PATH`` or a download), and with ``base_url`` a provider ``skillopt_sleep``
(``@ai-sdk/openai-compatible``, bundled in the binary) with the configured model; the key
travels as ``{env:SKILLOPT_OPENCODE_API_KEY}``, never in the command line.
``npm_config_offline=true`` stops OpenCode 1.18 from fetching ``@opencode-ai/plugin`` from the
npm registry into the config folder at start-up.

A placed document (``request.placement``) goes where OpenCode loads it after adopt: a user
file (``AGENTS.md``, ``skills/<name>/SKILL.md``) into the throw-away config folder, a project
file into the working directory; a document without a placement is written there as
``AGENTS.md`` (OpenCode loads it as the project's instructions).

Output: the JSONL events of ``--format json``: ``text`` parts make the answer, ``tool_use``
parts the tool calls, ``step_finish`` parts the token usage, an ``error`` event (``APIError``
with ``statusCode``) a failure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillopt_sleep import agents
from skillopt_sleep.backends._exec import (
    CallSetup,
    ExecBackend,
    Failure,
    ProcessResult,
    classify,
    copy_private,
    json_lines,
    map_tool_names,
    native_tools,
    no_answer,
    openai_base,
    prompt_for,
    stderr_failure,
    usage_of,
)
from skillopt_sleep.models import Acts, Completion, CompletionRequest

FLAGS = ("--format", "--model")
PROVIDER = "skillopt_sleep"
KEY_ENV = "SKILLOPT_OPENCODE_API_KEY"
#: task tool name -> OpenCode's tool names
ALIASES: dict[str, tuple[str, ...]] = {
    "Bash": ("bash",),
    "Read": ("read",),
    "Edit": ("edit",),
    "Write": ("write",),
    "Grep": ("grep",),
    "Glob": ("glob",),
    "WebFetch": ("webfetch",),
    "Task": ("task",),
    "Skill": ("skill",),
}
#: a replay's permissions (OpenCode's ``permission`` config): edits in the working folder;
#: a shell command, a fetch, a path outside the folder would ask, which a headless run
#: cannot answer
LIVE_PERMISSION = {
    "edit": "allow",
    "bash": "ask",
    "webfetch": "ask",
    "external_directory": "ask",
}
QUIET_ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "npm_config_offline": "true",
    "NO_COLOR": "1",
}


class OpenCodeBackend(ExecBackend):
    name = "opencode"
    agent = "opencode"

    def _sandbox(self, scratch: Path, copy_auth: bool) -> tuple[Path, Path]:
        """Throw-away XDG config and data folders; the user's config files and login copied
        in when ``copy_auth``. Returns (config home, data home) of OpenCode."""
        agent = agents.get_agent(self.agent)
        config = scratch / "xdg-config" / "opencode"
        data = scratch / "xdg-data" / "opencode"
        config.mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        if copy_auth:
            copy_private(agent.home(), config, agent.auth_files)
            copy_private(agent.data_dir(), data, ("auth.json",))
        return config, data

    def build(
        self, request: CompletionRequest, executable: str, cwd: Path, scratch: Path
    ) -> CallSetup:
        argv = [executable, "run", "--format", "json"]
        model = request.model or self.config.model
        inline: dict[str, Any] = {
            "autoupdate": False,
            "share": "disabled",
            "agent": {"title": {"disable": True}},  # no second model call for a title
        }
        placed = self.placed(request)
        if self.acts_live(request):
            # OpenCode's own tools, as the live agent offers them; edits allowed (inside the
            # working folder), anything else asks, and `run` answers no one: stopped
            inline["permission"] = dict(LIVE_PERMISSION)
        else:
            tools: dict[str, bool] = {"*": False}
            tools.update(dict.fromkeys(native_tools(request.tools, ALIASES, lower=True), True))
            if placed is not None and placed.mode == "skill":
                tools["skill"] = True  # a trained skill is loaded the way OpenCode loads skills
            inline["tools"] = tools
        env = self.base_env()
        env.update(QUIET_ENV)
        env["PWD"] = str(cwd)  # OpenCode takes its directory from $PWD, not the process's cwd
        if self.config.base_url:
            model_id = model or "default"
            inline["provider"] = {
                PROVIDER: {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "skillopt-sleep",
                    "options": {
                        "baseURL": openai_base(self.config.base_url),
                        "apiKey": "{env:" + KEY_ENV + "}",
                    },
                    "models": {model_id: {"name": model_id}},
                }
            }
            inline["model"] = f"{PROVIDER}/{model_id}"
            argv += ["--model", f"{PROVIDER}/{model_id}"]
            self.pass_key(env, KEY_ENV)
        elif model:
            argv += ["--model", model]
        config_home, _data = self._sandbox(scratch, copy_auth=not self.config.base_url)
        env["XDG_CONFIG_HOME"] = str(config_home.parent)
        env["XDG_DATA_HOME"] = str(scratch / "xdg-data")
        env["XDG_STATE_HOME"] = str(scratch / "xdg-state")
        for var in ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_DB"):
            env.pop(var, None)  # the user's overrides would lead out of the sandbox
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps(inline)
        files = self.documents(request, placed, user_root=config_home)
        return CallSetup(argv=argv, env=env, stdin=prompt_for(request, placed), files=files)

    def parse(
        self, result: ProcessResult, request: CompletionRequest, scratch: Path
    ) -> Completion | Failure:
        events = json_lines(result.stdout)
        errors = [e.get("error") or {} for e in events if e.get("type") == "error"]
        if errors:
            err: dict[str, Any] = errors[-1] if isinstance(errors[-1], dict) else {}
            raw = err.get("data")
            data: dict[str, Any] = raw if isinstance(raw, dict) else {}
            status = data.get("statusCode")
            message = str(data.get("message") or err.get("name") or "opencode reported an error")
            return classify(message, status if isinstance(status, int) else None)
        if result.returncode != 0:
            return stderr_failure(result, "opencode")
        texts: list[str] = []
        tools: list[str] = []
        commands: list[str] = []
        stopped: list[str] = []
        inp = out = 0
        for event in events:
            part = event.get("part") or {}
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text" and str(part.get("text") or "").strip():
                texts.append(str(part["text"]))
            elif kind == "tool" and part.get("tool"):
                name = str(part["tool"])
                tools.append(name)
                state = part.get("state") or {}
                given = state.get("input") or {}
                given = given if isinstance(given, dict) else {}
                if name == "bash" and isinstance(given.get("command"), str):
                    commands.append(given["command"])
                if state.get("status") == "error" and "rejected permission" in str(
                    state.get("error") or ""
                ):
                    what = next(
                        (str(given[k]) for k in ("command", "filePath", "url") if k in given), ""
                    )
                    stopped.append(
                        f"{name} {' '.join(what.split())[:200]}".strip()
                        + ": not allowed in the replay's working copy"
                    )
            elif kind == "step-finish":
                tokens = part.get("tokens") or {}
                inp += int(tokens.get("input") or 0)
                out += int(tokens.get("output") or 0)
        if not texts and not tools:
            return no_answer(result, "opencode run")
        return Completion(
            text=texts[-1] if texts else "",
            tool_calls=map_tool_names(tools, request.tools, ALIASES),
            usage=usage_of(inp, out),
            seconds=result.seconds,
            model=request.model or self.model,
            acts=Acts(commands=commands, stopped=stopped),
            raw={"session_id": next((e.get("sessionID") for e in events), None)},
        )
