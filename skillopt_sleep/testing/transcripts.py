"""Real session transcripts for the harvester tests: run each real agent CLI (``claude``,
``codex``, ``copilot``) in a temporary HOME against scripted simulator conversations and
collect the session files the CLIs wrote there.

Conversations (:data:`CONVERSATIONS`), per CLI:

* ``plain`` — one question, one answer;
* ``tool`` — the model calls the shell tool (``ls``; Claude Code ``Bash``, Codex
  ``exec_command``, Copilot ``bash``) and then answers;
* ``corrected`` — a question, then, **resuming the same session** (``claude --resume``,
  ``codex exec resume``, ``copilot --resume``), a user correction, then a retry of the
  question whose answer follows the correction;
* ``replay`` (with ``include_replay=True``) — a prompt whose first line is
  :data:`~skillopt_sleep.sources.base.SELF_MARKER`, as a replay would send it when a CLI
  insists on writing a session: the harvesters must mark it ``self_generated``.

Every CLI is pointed at a loopback simulator through its documented environment / config and
runs with HOME (and ``CODEX_HOME`` / ``COPILOT_HOME``) inside the given folder, telemetry and
update checks off, so nothing leaves the machine and nothing outside ``home`` is touched.

Use::

    from skillopt_sleep.testing.transcripts import build_transcripts
    built = build_transcripts(tmp_path / "home", tmp_path / "project")
    built["claude"].files          # the .jsonl files Claude Code wrote
    built["codex"].sessions        # {"plain": thread id, ...}
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt_sleep.simulator import serve
from skillopt_sleep.simulator.persona import persona_from_dict
from skillopt_sleep.sources.base import SELF_MARKER

MODEL = "sim-demo"
API_KEY = "sk-sim-transcripts-0000"
CLIS = ("claude", "codex", "copilot")
CORRECTION = "no, use `pnpm` instead of `npm`"

#: name -> the user turns; turns after the first are sent by resuming the session
CONVERSATIONS: dict[str, list[str]] = {
    "plain": ["how do I install the dependencies?"],
    "tool": ["list the files in this project"],
    "corrected": ["run the tests", CORRECTION, "run the tests"],
}
REPLAY = [f"{SELF_MARKER}\nhow do I install the dependencies?"]

#: the shell tool as each CLI names it, with the input the simulator sends
SHELL = {
    "claude": ("Bash", {"command": "ls"}),
    "codex": ("exec_command", {"cmd": "ls"}),
    "copilot": ("bash", {"command": "ls"}),
}
#: where each CLI writes its sessions, relative to HOME
LOG_ROOTS = {
    "claude": ".claude/projects",
    "codex": ".codex/sessions",
    "copilot": ".copilot/session-state",
}


def persona_for(cli: str) -> Any:
    tool, tool_input = SHELL[cli]
    return persona_from_dict(
        {
            "name": f"transcripts-{cli}",
            "models": [MODEL],
            "default_answer": "Understood: {prompt}",
            "answers": [
                {"match": "install.*dependenc", "text": "Run `npm install` in the project root."},
                {
                    "match": "list the files",
                    "text": "The project files are listed above.",
                    "tool": tool,
                    "tool_input": tool_input,
                },
                {"match": "^run the tests", "text": "Run `npm test` to run the suite."},
            ],
        }
    )


@dataclass
class Built:
    """What one CLI wrote: ``files`` (session files under its log root), ``sessions``
    (conversation name -> the CLI's session id), ``log_root``."""

    cli: str
    log_root: Path
    files: list[Path] = field(default_factory=list)
    sessions: dict[str, str] = field(default_factory=dict)


class CliError(RuntimeError):
    pass


def _which(binary: str, search: str | None) -> str:
    found = shutil.which(binary, path=search)
    if not found:
        raise CliError(f"`{binary}` is not installed (run `npm ci`)")
    return found


def _run(argv: list[str], env: dict[str, str], cwd: Path, stdin: str | None, timeout: float) -> str:
    out = subprocess.run(
        argv,
        input=stdin,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        start_new_session=True,
    )
    if out.returncode != 0:
        raise CliError(
            f"{Path(argv[0]).name} exited {out.returncode}: {(out.stdout + out.stderr)[-800:]}"
        )
    return out.stdout


def _json_lines(text: str) -> list[dict[str, Any]]:
    from skillopt_sleep.backends._exec import json_lines

    return json_lines(text)


def _base_env(home: Path, path: str) -> dict[str, str]:
    return {
        "PATH": path,
        "HOME": str(home),
        "USERPROFILE": str(home),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }


@dataclass
class _Run:
    """What every run of a CLI needs: its HOME, working directory, the simulator's URL, the
    executable, the PATH it runs with, and the time one turn may take."""

    home: Path
    project: Path
    url: str
    exe: str
    path: str
    timeout: float


def _claude(r: _Run, turns: list[str], tools: bool) -> str:
    home, project, url, exe, path, timeout = r.home, r.project, r.url, r.exe, r.path, r.timeout
    env = _base_env(home, path)
    env.update(
        {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": API_KEY,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
    )
    session = ""
    for turn in turns:
        argv = [
            exe,
            "-p",
            "--output-format",
            "json",
            "--model",
            MODEL,
            "--permission-mode",
            "dontAsk",
        ]
        argv += ["--tools", "Bash", "--allowedTools", "Bash"] if tools else ["--tools", ""]
        if session:
            argv += ["--resume", session]
        result = json.loads(_run(argv, env, project, turn, timeout))
        if result.get("is_error"):
            raise CliError(f"claude: {result.get('result')}")
        session = result["session_id"]
    return session


def _codex(r: _Run, turns: list[str], tools: bool) -> str:
    home, project, url, exe, path, timeout = r.home, r.project, r.url, r.exe, r.path, r.timeout
    env = _base_env(home, path)
    env.update({"CODEX_HOME": str(home / ".codex"), "SIM_API_KEY": API_KEY})
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    common = [
        "--json",
        "--skip-git-repo-check",
        "-m",
        MODEL,
        "-c",
        f'model_providers.sim={{name="sim", base_url="{url}/v1", '
        'wire_api="responses", env_key="SIM_API_KEY", request_max_retries=0, '
        "stream_max_retries=0}",
        "-c",
        'model_provider="sim"',
        "-c",
        "analytics.enabled=false",
        "-c",
        "check_for_update_on_startup=false",
        "-c",
        'web_search="disabled"',
        "--disable",
        "unbounded_connection_retries",
    ]
    session = ""
    for turn in turns:
        if session:
            argv = [exe, "exec", "resume", *common, session, "-"]
        else:
            argv = [exe, "exec", *common, "--sandbox", "read-only", "-C", str(project), "-"]
        events = _json_lines(_run(argv, env, project, turn, timeout))
        failed = [e for e in events if e.get("type") == "turn.failed"]
        if failed:
            raise CliError(f"codex: {failed[-1]}")
        session = session or next(
            e["thread_id"] for e in events if e.get("type") == "thread.started"
        )
    return session


def _copilot(r: _Run, turns: list[str], tools: bool) -> str:
    home, project, url, exe, path, timeout = r.home, r.project, r.url, r.exe, r.path, r.timeout
    env = _base_env(home, path)
    env.update(
        {
            "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": f"{url}/v1",
            "COPILOT_PROVIDER_API_KEY": API_KEY,
            "COPILOT_MODEL": MODEL,
            "COPILOT_AUTO_UPDATE": "false",
        }
    )
    session = ""
    for turn in turns:
        argv = [
            exe,
            "-p",
            turn,
            "--output-format",
            "json",
            "--model",
            MODEL,
            "--no-auto-update",
            "--disable-client-telemetry",
            "--disable-builtin-mcps",
            "--no-ask-user",
        ]
        argv += (
            ["--available-tools=bash", "--allow-tool=shell"]
            if tools
            else ["--available-tools=skillopt-sleep-no-tools"]
        )
        if session:
            argv.append(f"--resume={session}")
        events = _json_lines(_run(argv, env, project, None, timeout))
        errors = [e for e in events if e.get("type") == "session.error"]
        if errors:
            raise CliError(f"copilot: {errors[-1].get('data')}")
        session = next(e["sessionId"] for e in events if e.get("type") == "result")
    return session


_RUNNERS = {"claude": _claude, "codex": _codex, "copilot": _copilot}


def build_transcripts(
    home: Path,
    project: Path,
    *,
    clis: tuple[str, ...] = CLIS,
    include_replay: bool = True,
    search_path: str | None = None,
    timeout: float = 120.0,
) -> dict[str, Built]:
    """Run the scripted conversations through each CLI in ``clis``; return what each wrote.

    ``home`` becomes the CLIs' HOME; ``project`` (created if missing) their working
    directory. ``search_path`` is the PATH used to find and run the CLIs (default: ours).
    Raises CliError when a CLI is missing or a run fails.
    """
    home.mkdir(parents=True, exist_ok=True)
    project.mkdir(parents=True, exist_ok=True)
    readme = project / "README.md"
    if not readme.exists():  # something for `ls` to list
        readme.write_text("# demo project\n", encoding="utf-8")
    path = search_path or os.environ.get("PATH", "")
    built: dict[str, Built] = {}
    for cli in clis:
        exe = _which(cli, path)
        root = home / LOG_ROOTS[cli]
        result = Built(cli, root)
        conversations = dict(CONVERSATIONS)
        if include_replay:
            conversations["replay"] = REPLAY
        with serve(persona_for(cli), api_key=API_KEY) as sim:
            for name, turns in conversations.items():
                run = _Run(home, project, sim.url, exe, path, timeout)
                result.sessions[name] = _RUNNERS[cli](run, turns, name == "tool")
        result.files = (
            sorted(p for p in root.rglob("*") if p.is_file() and p.suffix == ".jsonl")
            if root.exists()
            else []
        )
        built[cli] = result
    return built


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - manual use
    """``python -m skillopt_sleep.testing.transcripts OUT_DIR``: build and list the files."""
    import sys

    args = argv if argv is not None else sys.argv[1:]
    out = Path(args[0] if args else "transcripts").resolve()
    built = build_transcripts(out / "home", out / "project")
    for cli, b in built.items():
        print(cli, json.dumps(b.sessions))
        for f in b.files:
            print("  ", f)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
