"""``claude_code``: replay through Claude Code's headless mode (``claude -p``).

One call is::

    claude -p --output-format stream-json --verbose --no-session-persistence
           --strict-mcp-config
           (--permission-mode acceptEdits    # a replay: the live agent's tools
            | --disable-slash-commands --permission-mode dontAsk
              --tools <T…|""> [--allowedTools <T…>])  [--model M]
           [--append-system-prompt <a document no agent loads by itself>]

with the prompt (first line :data:`SELF_MARKER`) on stdin, in an empty temporary working
directory. A placed document (``request.placement``) goes where Claude Code finds it after
adopt: a user-level file into a throw-away ``CLAUDE_CONFIG_DIR`` (only ``.credentials.json``
copied), a project file into the working directory; ``--disable-slash-commands`` (no skill
listing) is passed unless a skill is trained. Only a document without a placement arrives
through ``--append-system-prompt``. A replay of the user's task (a placed target call) runs
with Claude Code's own tools, skills listed, in ``--permission-mode acceptEdits``: edits in
the working copy are accepted, anything else needing an approval (a write outside it, a
shell command, a fetch) is denied and listed in the result's ``permission_denials``
(``Acts.stopped``). Other calls run with no tools (``--tools ""``) or exactly a task's tools,
pre-approved (``dontAsk``); a trained skill adds the ``Skill`` tool, through which Claude Code
loads it. The answer, the tool calls (``tool_use`` blocks of the assistant
events), the usage and the duration come from the ``stream-json`` events.

``base_url`` sets ``ANTHROPIC_BASE_URL``; a configured key (``api_key`` / ``api_key_env``)
is passed as ``ANTHROPIC_API_KEY``; otherwise the user's own login is used. Telemetry,
error reporting, the auto-updater and other non-essential traffic are switched off, and the
CLI's internal retries are off (``CLAUDE_CODE_MAX_RETRIES=0``) so ours, bounded, apply.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from skillopt_sleep.backends._exec import (
    CallSetup,
    ExecBackend,
    Failure,
    ProcessResult,
    api_key,
    classify,
    json_lines,
    map_tool_names,
    prompt_for,
    remove_empty_tree,
    stderr_failure,
    usage_of,
)
from skillopt_sleep.backends.base import SKILL_TOOL
from skillopt_sleep.models import Acts, Completion, CompletionRequest

#: every flag this backend may pass (checked against ``claude --help`` by the tests)
FLAGS = (
    "-p",
    "--output-format",
    "--verbose",
    "--no-session-persistence",
    "--disable-slash-commands",
    "--strict-mcp-config",
    "--permission-mode",
    "--tools",
    "--allowedTools",
    "--model",
    "--append-system-prompt",
)

QUIET_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
    "NO_COLOR": "1",
}


class ClaudeCodeBackend(ExecBackend):
    name = "claude_code"
    skill_tools = (SKILL_TOOL,)
    agent = "claude_code"

    def build(
        self, request: CompletionRequest, executable: str, cwd: Path, scratch: Path
    ) -> CallSetup:
        live = self.acts_live(request)
        argv = [
            executable,
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--no-session-persistence",
            "--strict-mcp-config",
            "--permission-mode",
            # a replay acts as the live agent: its own tools, edits inside its working copy
            # accepted, anything else (a write outside it, a shell command, a fetch) needs an
            # approval a headless run never gets: stopped, and reported in the result
            "acceptEdits" if live else "dontAsk",
        ]
        placed = self.placed(request)
        tools = list(request.tools)
        if placed is not None and placed.mode == "skill" and SKILL_TOOL not in tools:
            tools.append(SKILL_TOOL)  # the trained skill is loaded as the live agent loads it
        if live:
            pass  # Claude Code's own tool set, as the live agent offers it
        elif tools:
            argv += ["--tools", ",".join(tools), "--allowedTools", ",".join(tools)]
        else:
            argv += ["--tools", ""]
        model = request.model or self.config.model
        if model:
            argv += ["--model", model]
        if not live and (placed is None or placed.mode != "skill"):
            # no skill listing unless a skill is trained (a replay lists skills, and offers
            # the Skill tool, as the live agent does)
            argv.append("--disable-slash-commands")
        if placed is None and request.system:
            argv += ["--append-system-prompt", request.system]
        env = self.base_env()
        env.update(QUIET_ENV)
        if placed is not None and placed.scope == "user":
            env["CLAUDE_CONFIG_DIR"] = str(self.overlay_home(placed, scratch))
        files = self.documents(request, placed, system_file=None)
        if self.config.base_url:
            env["ANTHROPIC_BASE_URL"] = self.config.base_url.rstrip("/").removesuffix("/v1")
        key = api_key(self.config)
        if key:
            env["ANTHROPIC_API_KEY"] = key
        return CallSetup(argv=argv, env=env, stdin=prompt_for(request, placed), files=files)

    def cleanup(self, setup: CallSetup, cwd: Path) -> None:
        # --no-session-persistence writes no transcript, but Claude Code still creates an
        # empty ~/.claude/projects/<cwd slug>/ folder for the temporary cwd: remove it.
        config = setup.env.get("CLAUDE_CONFIG_DIR") or str(
            Path(setup.env.get("HOME") or Path.home()) / ".claude"
        )
        for folder in {str(cwd), os.path.realpath(cwd)}:
            remove_empty_tree(Path(config) / "projects" / re.sub(r"[^A-Za-z0-9]", "-", folder))

    def parse(
        self, result: ProcessResult, request: CompletionRequest, scratch: Path
    ) -> Completion | Failure:
        events = json_lines(result.stdout)
        final = next((e for e in reversed(events) if e.get("type") == "result"), None)
        if final is None:
            return stderr_failure(result, "claude")
        if final.get("is_error") or result.returncode != 0 or final.get("subtype") != "success":
            text = (
                final.get("result")
                or "; ".join(map(str, final.get("errors") or []))
                or result.stderr
                or f"claude exited with status {result.returncode}"
            )
            status = final.get("api_error_status")
            return classify(str(text), status if isinstance(status, int) else None)
        tools: list[str] = []
        commands: list[str] = []
        for event in events:
            if event.get("type") != "assistant" or event.get("parent_tool_use_id"):
                continue
            for block in (event.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    tools.append(str(block.get("name", "")))
                    command = (block.get("input") or {}).get("command")
                    if block.get("name") == "Bash" and isinstance(command, str):
                        commands.append(command)
        stopped = [stopped_line(d) for d in final.get("permission_denials") or []]
        usage = final.get("usage") or {}
        inp = sum(
            int(usage.get(k) or 0)
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        model = next(iter(final.get("modelUsage") or {}), "") or request.model or self.model
        seconds = final.get("duration_ms")
        return Completion(
            text=str(final.get("result") or ""),
            tool_calls=map_tool_names([t for t in tools if t], request.tools, {}),
            usage=usage_of(inp, usage.get("output_tokens")),
            seconds=(seconds / 1000.0) if isinstance(seconds, (int, float)) else result.seconds,
            model=model,
            acts=Acts(commands=commands, stopped=stopped),
            raw={"session_id": final.get("session_id")},
        )


def stopped_line(denial: Any) -> str:
    """One line for a tool call Claude Code's permission mode stopped (a ``permission_denials``
    entry): the tool and what it was for."""
    if not isinstance(denial, dict):
        return str(denial)
    name = str(denial.get("tool_name") or "a tool")
    given = denial.get("tool_input") or {}
    what = next(
        (str(given[k]) for k in ("command", "file_path", "path", "url", "pattern") if k in given),
        "",
    )
    what = " ".join(what.split())
    return f"{name} {what[:200]}".strip() + ": not allowed in the replay's working copy"
