"""``copilot``: replay through GitHub Copilot CLI's non-interactive prompt mode.

One call is (the prompt on stdin)::

    copilot --output-format json --usage-output-file <scratch>/usage.json
            --no-auto-update --disable-client-telemetry --disable-builtin-mcps --no-ask-user
            --no-color --available-tools=<T,…> [--allow-tool=<permission>…] [--model M]

run in an empty temporary working directory. A placed document (``request.placement``) goes
where Copilot finds it after adopt: a user-level file into a throw-away ``COPILOT_HOME``
(``config.json`` copied when the user's own login is used), a project file into the working
directory; only a document without a placement is written there as ``AGENTS.md`` (which
Copilot loads as custom instructions). The prompt's first line is :data:`SELF_MARKER`. The prompt
goes in on piped stdin (Copilot 1.0.102 reads a piped prompt as ``-p`` would), not as a
``-p`` argument: one argument is capped at 128 KiB on Linux (``MAX_ARG_STRLEN``), which a
reflect prompt can exceed.

Tools: a replay of the user's task (a placed target call) offers Copilot's own tools, as the
live agent does (no ``--available-tools``), and allows writes only (``--allow-tool=write``:
Copilot keeps them to the working folder and its temporary folder, which is pointed into the
call's scratch folder); a shell command or a fetch needs an approval ``--no-ask-user`` never
gives, and a denied call is listed (``Acts.stopped``). Other calls: plain calls see no tool at all (``--available-tools`` naming a tool that does not exist
hides every tool); a task that needs tools sees exactly those (``Bash`` → ``bash``, ``Read``
→ ``view``, …) and only their permissions are granted (``shell`` for ``bash``, ``write`` for
edits) — never ``--allow-all``; a trained skill adds the ``skill`` tool, through which
Copilot loads it. Tool calls are the ``tool.execution_start`` events of the JSONL
stream, reported under the task's tool names. Usage is the ``--usage-output-file`` JSON; wall
time is the ``result`` event's ``sessionDurationMs``.

``base_url`` runs Copilot against that OpenAI-compatible provider (BYOK, offline):
``COPILOT_OFFLINE=true``, ``COPILOT_PROVIDER_BASE_URL``, ``COPILOT_PROVIDER_API_KEY`` (from
``api_key`` / ``api_key_env``), and ``COPILOT_HOME`` set to a throw-away folder so no session
is written into the user's ``~/.copilot``. Without ``base_url`` the user's GitHub login is
used; Copilot then writes a session under ``~/.copilot/session-state`` that the marker line
identifies as a replay.
"""

from __future__ import annotations

import json
from pathlib import Path

from skillopt_sleep.backends._exec import (
    CallSetup,
    ExecBackend,
    Failure,
    ProcessResult,
    classify,
    json_lines,
    map_tool_names,
    native_tools,
    openai_base,
    prompt_for,
    stderr_failure,
    usage_of,
)
from skillopt_sleep.models import Acts, Completion, CompletionRequest

FLAGS = (
    "--output-format",
    "--usage-output-file",
    "--no-auto-update",
    "--disable-client-telemetry",
    "--disable-builtin-mcps",
    "--no-ask-user",
    "--no-color",
    "--available-tools",
    "--allow-tool",
    "--model",
)
#: ``--available-tools`` value for plain calls: matches no tool, so none is offered
NO_TOOLS = "skillopt-sleep-no-tools"
#: task tool name -> Copilot's tool names
ALIASES: dict[str, tuple[str, ...]] = {
    "Bash": ("bash", "read_bash", "stop_bash", "list_bash"),
    "Read": ("view",),
    "Edit": ("edit",),
    "Write": ("create",),
    "Grep": ("grep",),
    "Glob": ("glob",),
    "WebFetch": ("web_fetch", "fetch"),
    "Task": ("task",),
}
#: Copilot's skill-loading tool (``{"skill": name}``; see docs/agents.md)
SKILL_TOOL = "skill"
#: Copilot tool -> the permission pattern it needs (tools not listed need none)
PERMISSIONS = {"bash": "shell", "edit": "write", "create": "write", "web_fetch": "url"}


class CopilotBackend(ExecBackend):
    name = "copilot"
    skill_tools = (SKILL_TOOL,)
    agent = "copilot"

    def build(
        self, request: CompletionRequest, executable: str, cwd: Path, scratch: Path
    ) -> CallSetup:
        argv = [
            executable,
            "--output-format",
            "json",
            "--usage-output-file",
            str(scratch / "usage.json"),
            "--no-auto-update",
            "--disable-client-telemetry",
            "--disable-builtin-mcps",
            "--no-ask-user",
            "--no-color",
        ]
        native = native_tools(request.tools, ALIASES, lower=False)
        placed = self.placed(request)
        if placed is not None and placed.mode == "skill" and SKILL_TOOL not in native:
            native.append(SKILL_TOOL)  # the trained skill is loaded as the live agent loads it
        if self.acts_live(request):
            # Copilot's own tools, as the live agent offers them; only writes are allowed
            # (Copilot keeps them inside the working folder), a shell command or a fetch
            # needs an approval --no-ask-user never gives: stopped
            argv.append("--allow-tool=write")
        elif native:
            argv.append("--available-tools=" + ",".join(native))
            for perm in sorted({PERMISSIONS[n] for n in native if n in PERMISSIONS}):
                argv.append(f"--allow-tool={perm}")
        else:
            argv.append(f"--available-tools={NO_TOOLS}")
        model = request.model or self.config.model
        if model:
            argv += ["--model", model]
        env = self.base_env()
        env.update({"COPILOT_AUTO_UPDATE": "false", "NO_COLOR": "1"})
        env.pop("COPILOT_ALLOW_ALL", None)  # never allow-all, whatever the user's shell says
        if self.acts_live(request):
            # Copilot lets its tools write in the system's temporary folder as well as the
            # working folder: that folder is the call's own, so a write outside the copy
            # lands nowhere the user has anything
            tmp = scratch / "tmp"
            tmp.mkdir(exist_ok=True)
            env.update({"TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp)})
        if placed is not None and placed.scope == "user":
            # the user's login is kept (config.json) unless the provider comes from base_url
            home = self.overlay_home(placed, scratch, copy_auth=not self.config.base_url)
            env["COPILOT_HOME"] = str(home)
        elif placed is not None and not self.config.base_url:
            # a project file: the user's login and own instructions, in a throw-away home, so
            # the replay's session (sent as the user asks, unmarked) stays out of their logs
            env["COPILOT_HOME"] = str(self.home_copy(scratch))
        if self.config.base_url:
            home = scratch / "copilot-home"
            home.mkdir(exist_ok=True)
            env.update(
                {
                    "COPILOT_OFFLINE": "true",
                    "COPILOT_HOME": str(home),
                    "COPILOT_PROVIDER_BASE_URL": openai_base(self.config.base_url),
                }
            )
            self.pass_key(env, "COPILOT_PROVIDER_API_KEY")
            if model:
                env["COPILOT_MODEL"] = model
        files = self.documents(request, placed)
        return CallSetup(argv=argv, env=env, stdin=prompt_for(request, placed), files=files)

    def parse(
        self, result: ProcessResult, request: CompletionRequest, scratch: Path
    ) -> Completion | Failure:
        events = json_lines(result.stdout)
        final = next((e for e in reversed(events) if e.get("type") == "result"), None)
        errors = [e.get("data") or {} for e in events if e.get("type") == "session.error"]
        if errors:
            err = errors[-1]
            kind = str(err.get("errorType") or "")
            status = err.get("statusCode") if isinstance(err.get("statusCode"), int) else None
            failure = classify(str(err.get("message") or kind), status)
            if kind == "authentication" and failure.kind == "other":
                failure.kind = "auth"
            return failure
        exit_code = (final or {}).get("exitCode", result.returncode)
        if final is None or result.returncode != 0 or exit_code not in (0, None):
            return stderr_failure(result, "copilot")
        texts: list[str] = []
        tools: list[str] = []
        commands: list[str] = []
        stopped: list[str] = []
        started: dict[str, str] = {}  # tool call id -> "<tool> <what it was for>"
        for event in events:
            etype, data = event.get("type"), event.get("data") or {}
            if etype == "assistant.message" and not data.get("parentToolCallId"):
                if str(data.get("content") or "").strip():
                    texts.append(str(data["content"]))
            elif etype == "tool.execution_start" and not data.get("parentToolCallId"):
                name = str(data.get("toolName") or "")
                tools.append(name)
                given = data.get("arguments") or {}
                given = given if isinstance(given, dict) else {}
                if name == "bash" and isinstance(given.get("command"), str):
                    commands.append(given["command"])
                what = next((str(given[k]) for k in ("command", "path", "url") if k in given), "")
                started[str(data.get("toolCallId"))] = f"{name} {' '.join(what.split())[:200]}"
            elif etype == "tool.execution_complete" and not data.get("success"):
                error = data.get("error") or {}
                if isinstance(error, dict) and error.get("code") == "denied":
                    tried = started.get(str(data.get("toolCallId")), "a tool").strip()
                    stopped.append(f"{tried}: not allowed in the replay's working copy")
        inp = out = 0
        usage_file = scratch / "usage.json"
        if usage_file.exists():
            try:
                metrics = (
                    json.loads(usage_file.read_text(encoding="utf-8")).get("modelMetrics") or {}
                )
            except ValueError:
                metrics = {}
            for m in metrics.values():
                usage = (m or {}).get("usage") or {}
                inp += int(usage.get("inputTokens") or 0)
                out += int(usage.get("outputTokens") or 0)
        ms = ((final or {}).get("usage") or {}).get("sessionDurationMs")
        return Completion(
            text=texts[-1] if texts else "",
            tool_calls=map_tool_names([t for t in tools if t], request.tools, ALIASES),
            usage=usage_of(inp, out),
            seconds=ms / 1000.0 if isinstance(ms, (int, float)) else result.seconds,
            model=request.model or self.model,
            acts=Acts(commands=commands, stopped=stopped),
            raw={"session_id": (final or {}).get("sessionId")},
        )
