"""``openclaw``: replay through OpenClaw's isolated headless turn (npm ``openclaw``; 2026.9.x
runs on Node >= 24.16).

One call is (the prompt on stdin)::

    openclaw agent exec --json --message-file - --cwd <work> --config <scratch>/openclaw.json
        [--model <provider>/<model>]

``agent exec`` is OpenClaw's documented "one isolated headless embedded agent turn": it
writes no transcript into the agents' session database (the ``openclaw`` source's
``agents/<id>/agent/openclaw-agent.sqlite``), and ``--cwd`` is both the agent's workspace and
its tools' working folder. The call runs with ``OPENCLAW_STATE_DIR`` in its scratch folder, so
the runtime state it does write (``state/openclaw.sqlite``, plugin skills) never reaches the
user's ``~/.openclaw``; the prompt of an unplaced call starts with :data:`SELF_MARKER` all the
same.

The config file is the call's own: with ``base_url`` one provider ``skillopt_sleep``
(``api: openai-completions``, the configured model, ``apiKey: "${SKILLOPT_OPENCLAW_API_KEY}"``
so the key is never in a file or the command line) as the default model; without it a copy of
the user's ``openclaw.json`` (:attr:`Agent.auth_files`; read as JSON5, as OpenClaw does, and
written back as JSON) with the workspace
pointed at the call's working folder; provider keys in the environment (``OPENAI_API_KEY`` …)
pass through. Login profiles that OpenClaw keeps in its agent database are not copied.

A replay of the user's task offers OpenClaw's own tools with its config's
``tools.fs.workspaceOnly: true`` (file tools inside the working folder, the call's
workspace) and ``tools.exec.mode: "deny"`` (no shell command); OpenClaw's summary counts the
failed calls without saying why, and that count is what is listed as stopped.

A placed document (``request.placement``) goes where OpenClaw loads it: the workspace's
``AGENTS.md`` (registry: ``workspace/AGENTS.md`` of the state folder, sent every turn) into the
working folder, which is the call's workspace; a managed skill (``skills/<name>/SKILL.md``)
into the throw-away state folder; a project file into the working folder; a document without a placement is written
there as ``AGENTS.md`` too. OpenClaw sends it in the system prompt as ``## <path>`` followed by
its text, the same framing as the user's own workspace (measured, docs/agents.md).

Output: the ``--json`` envelope: ``ok``, ``final`` (the answer), ``usage`` (``input`` /
``output``), ``toolSummary.tools``; a failed turn has ``ok: false`` and ``error.message``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import json5

from skillopt_sleep import agents
from skillopt_sleep.backends._exec import (
    CallSetup,
    ExecBackend,
    Failure,
    ProcessResult,
    classify,
    map_tool_names,
    no_answer,
    openai_base,
    prompt_for,
    stderr_failure,
    usage_of,
)
from skillopt_sleep.errors import BackendResponseError
from skillopt_sleep.models import Acts, Completion, CompletionRequest

FLAGS = ("--json", "--message-file", "--cwd", "--config", "--model")
PROVIDER = "skillopt_sleep"
KEY_ENV = "SKILLOPT_OPENCLAW_API_KEY"
#: the workspace prefix of the registry's memory path (``workspace/AGENTS.md``)
WORKSPACE = "workspace/"
#: task tool name -> OpenClaw's tool names
ALIASES: dict[str, tuple[str, ...]] = {
    "Bash": ("exec",),
    "Read": ("read",),
    "Edit": ("edit", "apply_patch"),
    "Write": ("write",),
    "LS": ("ls",),
}
QUIET_ENV = {"OPENCLAW_DISABLE_BUNDLED_PLUGIN_POSTINSTALL": "1", "NO_COLOR": "1"}
_STATUS = re.compile(r"\b([45]\d\d)\b")


class OpenClawBackend(ExecBackend):
    name = "openclaw"
    agent = "openclaw"

    def _config(self, cwd: Path, model: str | None) -> dict[str, Any]:
        """The call's ``openclaw.json``: the simulator-style provider with ``base_url``, else
        the user's config with the workspace moved into the sandbox."""
        if self.config.base_url:
            model_id = model or "default"
            return {
                "models": {
                    "providers": {
                        PROVIDER: {
                            "baseUrl": openai_base(self.config.base_url),
                            "apiKey": "${" + KEY_ENV + "}",
                            "api": "openai-completions",
                            "models": [{"id": model_id, "name": model_id}],
                        }
                    }
                },
                "agents": {
                    "defaults": {
                        "model": {"primary": f"{PROVIDER}/{model_id}"},
                        "workspace": str(cwd),
                    }
                },
            }
        config: dict[str, Any] = {}
        real = agents.get_agent(self.agent).home()
        for name in agents.get_agent(self.agent).auth_files:
            path = real / name
            if path.is_file():
                try:
                    loaded = json5.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError) as exc:
                    raise BackendResponseError(
                        f"cannot read {path} as JSON5 ({exc})",
                        backend=self.name,
                        fix="fix the file (`openclaw config validate`), or set `base_url` in "
                        "the backend config",
                    ) from None
                if isinstance(loaded, dict):
                    config = loaded
                break
        defaults = config.setdefault("agents", {}).setdefault("defaults", {})
        defaults["workspace"] = str(cwd)  # never the user's workspace
        return config

    def build(
        self, request: CompletionRequest, executable: str, cwd: Path, scratch: Path
    ) -> CallSetup:
        model = request.model or self.config.model
        env = self.base_env()
        env.update(QUIET_ENV)
        state = scratch / "openclaw-state"
        state.mkdir(exist_ok=True)
        env["OPENCLAW_STATE_DIR"] = str(state)
        for var in ("OPENCLAW_CONFIG_PATH", "OPENCLAW_HOME"):
            env.pop(var, None)  # the user's overrides would lead out of the sandbox
        config_path = scratch / "openclaw.json"
        config = self._config(cwd, model)
        if self.acts_live(request):
            # OpenClaw's own tools, as the live agent offers them, under its own policy:
            # file tools inside the workspace (the call's working copy) only, no shell command
            tools = config.setdefault("tools", {})
            tools.setdefault("fs", {})["workspaceOnly"] = True
            tools.setdefault("exec", {})["mode"] = "deny"
        config_path.write_text(json.dumps(config), encoding="utf-8")
        config_path.chmod(0o600)
        argv = [executable, "agent", "exec", "--json", "--message-file", "-"]
        argv += ["--cwd", str(cwd), "--config", str(config_path)]
        if self.config.base_url:
            argv += ["--model", f"{PROVIDER}/{model or 'default'}"]
            self.pass_key(env, KEY_ENV)
        elif model:
            argv += ["--model", model]
        placed = self.placed(request)
        if placed is not None and placed.scope == "user" and placed.path.startswith(WORKSPACE):
            files = {placed.path.removeprefix(WORKSPACE): placed.text}  # the call's workspace
        else:  # a user file under the state folder: <state>/skills/<name>/SKILL.md
            files = self.documents(request, placed, user_root=state)
        return CallSetup(argv=argv, env=env, stdin=prompt_for(request, placed), files=files)

    def parse(
        self, result: ProcessResult, request: CompletionRequest, scratch: Path
    ) -> Completion | Failure:
        envelope: dict[str, Any] = {}
        start = result.stdout.find("{")
        if start >= 0:
            try:
                loaded = json.loads(result.stdout[start:])
            except ValueError:
                loaded = None
            if isinstance(loaded, dict):
                envelope = loaded
        if envelope and not envelope.get("ok"):
            err = envelope.get("error")
            message = str(
                (err.get("message") if isinstance(err, dict) else err)
                or envelope.get("status")
                or "openclaw reported an error"
            )
            m = _STATUS.search(message)
            return classify(message, int(m.group(1)) if m else None)
        if result.returncode != 0 or not envelope:
            return stderr_failure(result, "openclaw")
        summary = envelope.get("toolSummary") or {}
        tools = [str(t) for t in summary.get("tools") or []] if isinstance(summary, dict) else []
        text = str(envelope.get("final") or "")
        if not text.strip() and not tools:
            return no_answer(result, "openclaw agent exec")
        usage = envelope.get("usage") or {}
        stopped = []
        failures = summary.get("failures") if isinstance(summary, dict) else 0
        if isinstance(failures, int) and failures > 0 and self.acts_live(request):
            # OpenClaw's summary counts the failed calls and names the last one, not why:
            # under the replay's policy a write outside the working copy and every shell
            # command fail, and so does a call that was simply wrong
            last = (summary.get("unresolvedError") or {}).get("toolName") or "a tool"
            stopped.append(
                f"{failures} tool call(s) failed or were refused (the last: {last}); OpenClaw "
                "does not say which were refused by the replay's policy"
            )
        return Completion(
            text=text,
            tool_calls=map_tool_names(tools, request.tools, ALIASES),
            usage=usage_of(usage.get("input"), usage.get("output")),
            seconds=result.seconds,
            model=request.model or self.model,
            acts=Acts(stopped=stopped),
            raw={"session_id": envelope.get("sessionId")},
        )
