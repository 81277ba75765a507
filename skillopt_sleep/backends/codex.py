"""``codex``: replay through ``codex exec``.

One call is::

    codex exec --json -o <scratch>/last.txt --skip-git-repo-check
               --ephemeral -C <the working copy> [-m MODEL]
               --disable unbounded_connection_retries
               -c analytics.enabled=false -c check_for_update_on_startup=false …
               ( a replay of the user's task: Codex's own tools, nothing disabled, and
                 -c approval_policy="never" -c shell_environment_policy.inherit="core"
                 -c default_permissions="skillopt_sleep_replay"
                 -c permissions.skillopt_sleep_replay.filesystem={":minimal"="read",
                    <codex's own package>="read", [<skill folder>="read"],
                    <the working copy>="write"}
               | any other call: --disable multi_agent … --disable shell_tool
                 --disable unified_exec (unless the task needs a shell)
                 [-c developer_instructions=<a document no agent loads by itself>]
                 --sandbox read-only )
               [-c model_providers.skillopt_sleep={…} -c model_provider="skillopt_sleep"]
               -

with the prompt (first line :data:`SELF_MARKER`) on stdin. ``--ephemeral`` keeps the run out
of ``$CODEX_HOME/sessions``. A placed document (``request.placement``) goes where Codex finds
it after adopt: a user-level file into a throw-away ``CODEX_HOME`` (``auth.json`` and
``config.toml`` copied), a project ``AGENTS.md`` into the working directory; only a document
without a placement is sent as ``developer_instructions``. The answer is the
``-o`` file (else the last ``agent_message`` item), tool calls are the ``command_execution`` /
``mcp_tool_call`` / ``web_search`` / ``file_change`` items of the ``--json`` event stream,
usage is ``turn.completed.usage``; a ``turn.failed`` / ``error`` event is a failure.

A replay of the user's task (a placed target call) offers Codex's own tools, as the live
Codex does, with the least power that acts in the working copy: a Codex permission profile
(``default_permissions``, used instead of ``--sandbox``, which would override it) whose
commands may read only the platform's minimal set (``:minimal``: system binaries and
libraries), Codex's own package (on Linux Codex runs its binary again inside the sandbox) and,
for a trained skill, the placed skill's folder (in the throw-away ``CODEX_HOME``, not its
``auth.json`` copy), and may write only the working copy, with no network; approvals never (a
command the sandbox refuses fails, nothing escalates); the shell's environment reduced to the
core variables (``HOME``, ``PATH``, …: no key reaches a command). A trained skill
(``placement.mode == "skill"``) is listed by Codex itself in its ``<skills_instructions>``,
and the live Codex loads it by reading the file with its shell tool (``exec_command`` ``cat
<path>/SKILL.md``). The commands a replay ran are kept (``Acts.commands``); a command whose
output says the sandbox stopped it, when Codex reports it, is listed as stopped (``codex exec
--json`` reports no item for a command that failed). Every other call keeps ``--sandbox
read-only``.
A ``command_execution`` item that names the placed SKILL.md (its path in the throw-away
``CODEX_HOME`` or working directory, as listed or resolved) and exited 0 is reported as the
tool :data:`~skillopt_sleep.backends.base.SKILL_TOOL` (``Skill``, the task vocabulary's
skill-loading tool), not as a shell call: :meth:`skill_loaded` is then true, and a task's
``tool_called: Bash`` check is not met by reading the skill.

``base_url`` defines a provider ``skillopt_sleep`` (``wire_api = "responses"``, no internal
retries) and selects it; a configured key goes to it through the environment variable
``SKILLOPT_CODEX_API_KEY`` (``env_key``). Without ``base_url`` the user's own Codex config and
login are used unchanged.
"""

from __future__ import annotations

import json
import re
import shlex
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
    openai_base,
    prompt_for,
    stderr_failure,
    usage_of,
    working_copy,
)
from skillopt_sleep.backends.base import SKILL_TOOL
from skillopt_sleep.models import Acts, Completion, CompletionRequest, Placement

FLAGS = (
    "--json",
    "-o",
    "--skip-git-repo-check",
    "--sandbox",
    "--ephemeral",
    "-C",
    "-m",
    "--disable",
    "-c",
)
PROVIDER = "skillopt_sleep"
KEY_ENV = "SKILLOPT_CODEX_API_KEY"
#: features never needed by a replay
OFF_FEATURES = (
    "multi_agent",
    "goals",
    "image_generation",
    "apps",
    "plugins",
    "browser_use",
    "computer_use",
)
#: the shell tools, off unless the task needs a shell or a skill is trained
SHELL_FEATURES = ("shell_tool", "unified_exec")
#: a skill replay's shell: nothing asks for approval, commands see only the core variables
SKILL_SHELL = ('approval_policy="never"', 'shell_environment_policy.inherit="core"')
#: the permission profile of a replay's shell (see the module doc)
PROFILE = "skillopt_sleep_replay"
QUIET = (
    "analytics.enabled=false",
    "feedback.enabled=false",
    "check_for_update_on_startup=false",
    'otel.exporter="none"',
)
#: what a command's output says when the sandbox stopped it
SANDBOX_SAID = re.compile(
    r"Read-only file system|Operation not permitted|Could not resolve host|"
    r"Network is unreachable|Temporary failure in name resolution"
)
#: how Codex runs a command: ``/bin/bash -lc '<command>'``
_SHELL_WRAP = re.compile(r"^/\S*/(?:ba|z)?sh -l?c (.+)$", re.S)


def command_of(item: dict[str, Any]) -> str:
    """The command a ``command_execution`` item ran, without Codex's shell wrapper."""
    command = item.get("command")
    text = command if isinstance(command, str) else shlex.join(map(str, command or []))
    wrapped = _SHELL_WRAP.match(text)
    if wrapped:
        try:
            return " ".join(shlex.split(wrapped.group(1)))
        except ValueError:
            return text
    return text


#: task tool name -> Codex's names for the same capability
ALIASES = {
    "Bash": ("exec_command", "shell", "command_execution", "local_shell"),
    "Edit": ("apply_patch", "file_change"),
    "Write": ("apply_patch", "file_change"),
    "WebSearch": ("web_search",),
}


def _toml(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def _binary_roots(executable: str) -> list[str]:
    """The folders a sandboxed command must read for Codex to start it: on Linux Codex runs
    its own binary again inside the sandbox. The npm launcher (``…/node_modules/@openai/codex/
    bin/codex.js``): the ``@openai`` folder, which holds the platform package with the binary;
    a native executable: its folder."""
    real = Path(executable).resolve()
    if real.suffix == ".js" and real.parent.name == "bin" and len(real.parents) > 2:
        return [str(real.parents[2])]
    return [str(real.parent)]


def _skill_files(placed: Placement | None, scratch: Path, workdir: str) -> tuple[str, ...]:
    """The paths by which a command can name the placed SKILL.md of a skill replay: where
    :meth:`ExecBackend.overlay_home` (user scope) or the working directory (project scope,
    ``scratch``'s sibling ``work``) holds it, as written and resolved. Empty for no skill."""
    if placed is None or placed.mode != "skill":
        return ()
    root = (
        scratch / f"{placed.agent}-home"
        if placed.scope == "user"
        else working_copy(scratch.parent, workdir)
    )
    file = root / placed.path
    return tuple(dict.fromkeys((str(file), str(file.resolve()))))


def _reads_skill(item: dict[str, Any], files: tuple[str, ...]) -> bool:
    """True when the ``command_execution`` ``item`` names a placed SKILL.md and succeeded
    (the file's text reached the model)."""
    command = item.get("command")
    text = command if isinstance(command, str) else json.dumps(command, ensure_ascii=False)
    return item.get("exit_code") == 0 and any(f in text for f in files)


class CodexBackend(ExecBackend):
    name = "codex"
    agent = "codex"
    #: a skill replay reports a read of the placed SKILL.md as this tool (see the module doc)
    skill_tools = (SKILL_TOOL,)
    skill_replays = "skill-shell-offered"

    def build(
        self, request: CompletionRequest, executable: str, cwd: Path, scratch: Path
    ) -> CallSetup:
        argv = [
            executable,
            "exec",
            "--json",
            "-o",
            str(scratch / "last.txt"),
            "--skip-git-repo-check",
            "--ephemeral",
            "-C",
            str(cwd),
            "--disable",
            "unbounded_connection_retries",
        ]
        model = request.model or self.config.model
        if model:
            argv += ["-m", model]
        wanted = {a for t in request.tools for a in (t, *ALIASES.get(t, ()))}
        placed = self.placed(request)
        skill = placed is not None and placed.mode == "skill"
        live = self.acts_live(request)
        off = [] if live else list(OFF_FEATURES)  # a replay has the live agent's tools
        if not live and not skill and not wanted & {"exec_command", "shell", "local_shell"}:
            off += SHELL_FEATURES
        for feature in off:
            argv += ["--disable", feature]
        if not live and "web_search" not in wanted:
            argv += ["-c", 'web_search="disabled"']
        for item in (*QUIET, *(SKILL_SHELL if skill or live else ())):
            argv += ["-c", item]
        if live:
            # Codex's permission profile (used instead of --sandbox, which would override
            # it): commands read the platform's minimal set, Codex's own package, the trained
            # skill's folder and the working copy, write only in the working copy, and reach
            # no network; nothing asks for approval, so nothing escalates
            readable = [*_binary_roots(executable)]
            if placed is not None and skill and placed.scope == "user":
                # the skill's own folder, not the overlay's auth.json
                readable.append(str(scratch / f"{self.agent}-home" / placed.path.rsplit("/", 1)[0]))
            table = ", ".join(
                [f'{_toml(r)}="read"' for r in [":minimal", *readable]]
                + [f'{_toml(str(cwd))}="write"']
            )
            argv += [
                "-c",
                f'default_permissions="{PROFILE}"',
                "-c",
                f"permissions.{PROFILE}.filesystem={{{table}}}",
            ]
        else:
            argv += ["--sandbox", "read-only"]
        if placed is None and request.system:
            argv += ["-c", f"developer_instructions={_toml(request.system)}"]
        env = self.base_env()
        if placed is not None and placed.scope == "user":
            env["CODEX_HOME"] = str(self.overlay_home(placed, scratch))
        files = self.documents(request, placed, system_file=None)
        env["NO_COLOR"] = "1"
        if self.config.base_url:
            provider = (
                f'{{name="skillopt-sleep", base_url={_toml(openai_base(self.config.base_url))}, '
                f'wire_api="responses", request_max_retries=0, stream_max_retries=0'
            )
            key = api_key(self.config)
            if key:
                env[KEY_ENV] = key
                provider += f', env_key="{KEY_ENV}"'
            argv += [
                "-c",
                f"model_providers.{PROVIDER}={provider}}}",
                "-c",
                f'model_provider="{PROVIDER}"',
            ]
        argv.append("-")
        return CallSetup(argv=argv, env=env, stdin=prompt_for(request, placed), files=files)

    def parse(
        self, result: ProcessResult, request: CompletionRequest, scratch: Path
    ) -> Completion | Failure:
        events = json_lines(result.stdout)
        failed = next((e for e in reversed(events) if e.get("type") == "turn.failed"), None)
        errors = [e for e in events if e.get("type") == "error"]
        if failed is not None or result.returncode != 0:
            message = ((failed or {}).get("error") or {}).get("message") if failed else None
            if not message and errors:
                message = errors[-1].get("message")
            if not message:
                return stderr_failure(result, "codex")
            return classify(str(message))
        done = [e for e in events if e.get("type") == "turn.completed"]
        if not done:
            return classify(
                "codex exec finished without a completed turn: "
                + (result.stderr.strip()[-200:] or "no output")
            )
        texts, tools = [], []
        commands: list[str] = []
        stopped: list[str] = []
        files = _skill_files(self.placed(request), scratch, request.workdir)
        for event in events:
            if event.get("type") != "item.completed":
                continue
            item = event.get("item") or {}
            kind = item.get("type")
            if kind == "agent_message":
                texts.append(str(item.get("text") or ""))
            elif kind == "command_execution":
                skill_read = bool(files) and _reads_skill(item, files)
                tools.append(SKILL_TOOL if skill_read else "exec_command")
                if not skill_read:
                    commands.append(command_of(item))
                    said = SANDBOX_SAID.search(str(item.get("aggregated_output") or ""))
                    if said and item.get("exit_code") != 0:
                        stopped.append(
                            f"exec_command {commands[-1][:200]}: stopped by the sandbox "
                            f"({said.group(0)})"
                        )
            elif kind == "mcp_tool_call":
                tools.append(str(item.get("tool") or item.get("name") or "mcp_tool_call"))
            elif kind == "web_search":
                tools.append("web_search")
            elif kind == "file_change":
                tools.append("apply_patch")
        last = scratch / "last.txt"
        text = last.read_text(encoding="utf-8", errors="replace") if last.exists() else ""
        text = text.strip() or (texts[-1] if texts else "")
        inp = out = 0
        for event in done:
            usage = event.get("usage") or {}
            inp += int(usage.get("input_tokens") or 0)
            out += int(usage.get("output_tokens") or 0)
        return Completion(
            text=text,
            tool_calls=map_tool_names(tools, request.tools, ALIASES),
            usage=usage_of(inp, out),
            seconds=result.seconds,
            model=request.model or self.model,
            acts=Acts(commands=commands, stopped=stopped),
            raw={
                "thread_id": next(
                    (e.get("thread_id") for e in events if e.get("type") == "thread.started"), None
                )
            },
        )
