"""``pi``: replay through the Pi coding agent's print mode (npm
``@mariozechner/pi-coding-agent``).

One call is (the prompt on piped stdin, which ``pi -p`` reads as the message)::

    pi -p --mode json --no-session --offline (--no-tools | --tools <t,…>)
       [--provider skillopt_sleep] [--model M]

(``--tools`` names ``read`` too when a skill is trained: Pi loads a skill by reading its file;
a replay of the user's task instead offers Pi's own tools behind skillopt-sleep's permission
gate, ``--no-extensions --extension pi_gate.ts``: Pi asks no permission itself, and the gate
blocks a write outside the working folder and every shell command, listed as stopped),
run in an empty temporary working directory with ``PI_CODING_AGENT_DIR`` set to a throw-away
copy of Pi's home folder: ``--no-session`` keeps the run from writing a session file at all
(and the prompt's first line is :data:`SELF_MARKER` all the same). The user's
:attr:`Agent.auth_files` (``auth.json``, ``models.json``, ``settings.json``) are copied in
only when no ``base_url`` is set; with ``base_url`` the copy's ``models.json`` defines one
provider ``skillopt_sleep`` (``api: openai-completions``, the configured model) whose
``apiKey`` names the variable :data:`KEY_ENV` (Pi resolves an ``apiKey`` that is a variable
name), so the key is never in a file or the command line.

A placed document (``request.placement``) goes where Pi loads it after adopt: a user file
(``AGENTS.md``, ``skills/<name>/SKILL.md``) into the throw-away home, a project file into the
working directory; a document without a placement is written there as ``AGENTS.md`` (Pi loads
``AGENTS.md`` from the working directory and its parents).

Output: the JSONL events of ``--mode json``. The answer is the last assistant ``message_end``
with text; tool calls are the ``toolCall`` blocks of assistant messages; usage sums the
assistant messages' ``usage.input`` / ``output``. Pi exits 0 even when the model call
failed: an assistant message with ``stopReason`` ``error`` carries ``errorMessage`` (``401 …``,
``404 The model …``, ``Connection error.``), which is classified like the other CLIs' errors.
"""

from __future__ import annotations

import json
import re
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

FLAGS = (
    "-p",
    "--mode",
    "--no-session",
    "--offline",
    "--no-tools",
    "--tools",
    "--no-extensions",
    "--extension",
    "--provider",
    "--model",
)
PROVIDER = "skillopt_sleep"
KEY_ENV = "SKILLOPT_PI_API_KEY"
#: task tool name -> Pi's tool names
ALIASES: dict[str, tuple[str, ...]] = {
    "Bash": ("bash",),
    "Read": ("read",),
    "Edit": ("edit",),
    "Write": ("write",),
    "Grep": ("grep",),
    "Glob": ("find",),
    "LS": ("ls",),
}
_STATUS = re.compile(r"^\s*(\d{3})\b")
#: the permission gate a replay with the live tools loads (a Pi extension)
GATE = Path(__file__).with_name("pi_gate.ts")
#: what a tool result blocked by the gate starts with
STOPPED = "skillopt-sleep: stopped: "


class PiBackend(ExecBackend):
    name = "pi"
    agent = "pi"

    def build(
        self, request: CompletionRequest, executable: str, cwd: Path, scratch: Path
    ) -> CallSetup:
        argv = [executable, "-p", "--mode", "json", "--no-session", "--offline"]
        native = native_tools(request.tools, ALIASES, lower=True)
        placed = self.placed(request)
        if placed is not None and placed.mode == "skill" and "read" not in native:
            native.append("read")  # Pi loads a skill by reading its file
        if self.acts_live(request):
            # Pi's own tools, as the live agent offers them, behind skillopt-sleep's gate
            # (Pi asks no permission itself): writes inside the working folder only, no
            # shell command (pi_gate.ts)
            argv += ["--no-extensions", "--extension", str(GATE)]
        elif native:
            argv += ["--tools", ",".join(native)]
        else:
            argv.append("--no-tools")
        model = request.model or self.config.model
        env = self.base_env()
        env.update({"PI_OFFLINE": "1", "PI_TELEMETRY": "0", "NO_COLOR": "1"})
        env.pop("PI_CODING_AGENT_SESSION_DIR", None)
        agent = agents.get_agent(self.agent)
        home = scratch / "pi-home"
        home.mkdir(exist_ok=True)
        if self.config.base_url:
            model_id = model or "default"
            providers = {
                PROVIDER: {
                    "baseUrl": openai_base(self.config.base_url),
                    "api": "openai-completions",
                    "apiKey": KEY_ENV,
                    "models": [{"id": model_id}],
                }
            }
            (home / "models.json").write_text(
                json.dumps({"providers": providers}), encoding="utf-8"
            )
            argv += ["--provider", PROVIDER, "--model", model_id]
            self.pass_key(env, KEY_ENV)
        else:
            copy_private(agent.home(), home, agent.auth_files)
            if model:
                argv += ["--model", model]
        env["PI_CODING_AGENT_DIR"] = str(home)
        files = self.documents(request, placed, user_root=home)
        return CallSetup(argv=argv, env=env, stdin=prompt_for(request, placed), files=files)

    def parse(
        self, result: ProcessResult, request: CompletionRequest, scratch: Path
    ) -> Completion | Failure:
        events = json_lines(result.stdout)
        answers: list[dict[str, Any]] = []
        for event in events:
            msg = event.get("message")
            if (
                event.get("type") == "message_end"
                and isinstance(msg, dict)
                and msg.get("role") == "assistant"
            ):
                answers.append(msg)
        failed = [m for m in answers if m.get("stopReason") in ("error", "aborted")]
        if failed:
            message = str(failed[-1].get("errorMessage") or "pi reported an error")
            m = _STATUS.match(message)
            return classify(message, int(m.group(1)) if m else None)
        if result.returncode != 0:
            return stderr_failure(result, "pi")
        if not answers:
            return no_answer(result, "pi -p")
        texts: list[str] = []
        tools: list[str] = []
        commands: list[str] = []
        stopped = [
            f"{e.get('toolName') or 'a tool'}: " + text[len(STOPPED) :]
            for e in events
            if e.get("type") == "tool_execution_end" and e.get("isError")
            for text in [_result_text(e.get("result"))]
            if text.startswith(STOPPED)
        ]
        inp = out = 0
        for msg in answers:
            text = ""
            for block in msg.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    text += str(block.get("text") or "")
                elif block.get("type") == "toolCall" and block.get("name"):
                    tools.append(str(block["name"]))
                    given = block.get("arguments") or {}
                    if block["name"] == "bash" and isinstance(given, dict):
                        commands.append(str(given.get("command") or ""))
            if text.strip():
                texts.append(text)
            usage = msg.get("usage") or {}
            inp += int(usage.get("input") or 0)
            out += int(usage.get("output") or 0)
        session = next((e.get("id") for e in events if e.get("type") == "session"), None)
        return Completion(
            text=texts[-1] if texts else "",
            tool_calls=map_tool_names(tools, request.tools, ALIASES),
            usage=usage_of(inp, out),
            seconds=result.seconds,
            model=request.model or self.model,
            acts=Acts(commands=[c for c in commands if c], stopped=stopped),
            raw={"session_id": session},
        )


def _result_text(result: Any) -> str:
    """The text of a Pi tool result (its text blocks joined)."""
    if not isinstance(result, dict):
        return ""
    return "".join(
        str(b.get("text") or "")
        for b in result.get("content") or []
        if isinstance(b, dict) and b.get("type") == "text"
    )
