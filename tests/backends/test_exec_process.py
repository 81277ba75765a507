"""Process hygiene, retries and error mapping of the exec backends, with small fake CLIs:
real executables (Python scripts) configured through ``BackendConfig.executable`` that print
what the real CLI prints, hang, fail, or leave children behind. No mocks of the process layer.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from skillopt_sleep.backends import get_backend
from skillopt_sleep.backends._exec import classify, map_tool_names
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import (
    BackendAuthError,
    BackendModelError,
    BackendResponseError,
    BackendTimeout,
    BackendUnreachable,
)
from skillopt_sleep.models import CompletionRequest, Placement, Task
from skillopt_sleep.night.replay import Cost, Meter, Replayer
from skillopt_sleep.sources.base import SELF_MARKER
from skillopt_sleep.store import Store

HEADER = f"#!{sys.executable}\nimport json, os, subprocess, sys, time\n"


def claude_result(
    text: str = "ok", *, error: bool = False, status: int | None = None, tools: tuple[str, ...] = ()
) -> str:
    """stream-json lines the way ``claude -p --output-format stream-json --verbose`` prints."""
    lines = [{"type": "system", "subtype": "init", "session_id": "s1"}]
    for name in tools:
        lines.append(
            {
                "type": "assistant",
                "parent_tool_use_id": None,
                "message": {
                    "content": [{"type": "tool_use", "id": "t1", "name": name, "input": {}}]
                },
            }
        )
    lines.append(
        {
            "type": "result",
            "subtype": "success",
            "is_error": error,
            "result": text,
            "api_error_status": status,
            "duration_ms": 1234,
            "session_id": "s1",
            "usage": {
                "input_tokens": 100,
                "cache_read_input_tokens": 20,
                "cache_creation_input_tokens": 3,
                "output_tokens": 7,
            },
            "modelUsage": {"sim-demo": {}},
        }
    )
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def fake(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(HEADER + body, encoding="utf-8")
    path.chmod(0o755)
    return path


def backend_for(executable: Path | str | None, name: str = "claude_code", **extra):
    cfg = {
        "name": name,
        "model": "sim-demo",
        "max_retries": 0,
        "timeout": 30,
        "executable": str(executable) if executable else None,
    }
    cfg.update(extra)
    b = get_backend(BackendConfig(**cfg))
    b.sleep = lambda _s: None  # no real backoff in tests
    return b


def dead(pid: int) -> bool:
    """True when ``pid`` is gone (or a zombie waiting for a reaper outside our control)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def wait_dead(pids: list[int], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(dead(p) for p in pids):
            return True
        time.sleep(0.05)
    return all(dead(p) for p in pids)


# ------------------------------------------------------------------ process hygiene
def test_a_hanging_cli_is_killed_with_its_children(tmp_path):
    pids = tmp_path / "pids"
    script = fake(
        tmp_path,
        "claude",
        f"""
child = subprocess.Popen(["sleep", "300"])
grandchild = subprocess.Popen(["sh", "-c", "sleep 300 & echo $! ; wait"], stdout=subprocess.PIPE)
gpid = grandchild.stdout.readline().strip().decode()
open({str(pids)!r}, "w").write(" ".join(map(str, [os.getpid(), child.pid, grandchild.pid, gpid])))
time.sleep(300)
""",
    )
    b = backend_for(script, timeout=1.5)
    started = time.monotonic()
    with pytest.raises(BackendTimeout) as info:
        b.complete(CompletionRequest(prompt="hello"))
    assert time.monotonic() - started < 10
    assert "claude_code:" in str(info.value) and "timeout" in str(info.value)
    ids = [int(p) for p in pids.read_text().split()]
    assert len(ids) == 4
    assert wait_dead(ids), [p for p in ids if not dead(p)]


def test_processes_left_behind_after_a_normal_exit_are_killed(tmp_path):
    pids = tmp_path / "pids"
    script = fake(
        tmp_path,
        "claude",
        f"""
bg = subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open({str(pids)!r}, "w").write(str(bg.pid))
sys.stdout.write({claude_result("fine")!r})
""",
    )
    comp = backend_for(script).complete(CompletionRequest(prompt="hello"))
    assert comp.text == "fine"
    assert wait_dead([int(pids.read_text())])


def test_each_call_runs_in_an_empty_temp_dir_with_the_marker_first(tmp_path):
    seen = tmp_path / "seen.json"
    script = fake(
        tmp_path,
        "claude",
        f"""
json.dump({{"cwd": os.getcwd(), "files": os.listdir("."), "stdin": sys.stdin.read(),
           "argv": sys.argv[1:], "pgid": os.getpgid(0), "pid": os.getpid()}},
          open({str(seen)!r}, "w"))
sys.stdout.write({claude_result("ok")!r})
""",
    )
    backend_for(script).complete(CompletionRequest(system="RULES", prompt="do it"))
    data = json.loads(seen.read_text())
    assert data["files"] == [] and "skillopt-sleep-replay-" in data["cwd"]
    assert not Path(data["cwd"]).exists()  # removed after the call
    assert data["stdin"].splitlines() == [SELF_MARKER, "do it"]
    assert data["pgid"] == data["pid"]  # its own process group
    assert data["argv"][data["argv"].index("--append-system-prompt") + 1] == "RULES"


# ------------------------------------------------------------------ retries
def counting_script(tmp_path: Path, outputs: list[str], exit_codes: list[int]) -> tuple[Path, Path]:
    counter = tmp_path / "count"
    script = fake(
        tmp_path,
        "claude",
        f"""
path = {str(counter)!r}
n = int(open(path).read()) if os.path.exists(path) else 0
open(path, "w").write(str(n + 1))
outs, codes = {outputs!r}, {exit_codes!r}
i = min(n, len(outs) - 1)
sys.stdout.write(outs[i])
sys.exit(codes[i])
""",
    )
    return script, counter


def test_transient_failures_are_retried_then_succeed(tmp_path):
    script, counter = counting_script(
        tmp_path,
        [
            claude_result("API Error: 529 overloaded", error=True, status=529),
            claude_result("Run `pnpm install`."),
        ],
        [1, 0],
    )
    comp = backend_for(script, max_retries=2).complete(CompletionRequest(prompt="x"))
    assert comp.text == "Run `pnpm install`." and counter.read_text() == "2"
    assert comp.usage.input_tokens == 123 and comp.usage.output_tokens == 7
    assert comp.seconds == pytest.approx(1.234)


def test_transient_failures_give_up_after_max_retries(tmp_path):
    script, counter = counting_script(
        tmp_path, [claude_result("API Error: 500 boom", error=True, status=500)], [1]
    )
    with pytest.raises(BackendResponseError) as info:
        backend_for(script, max_retries=2).complete(CompletionRequest(prompt="x"))
    assert counter.read_text() == "3" and "after 3 attempts" in str(info.value)


@pytest.mark.parametrize(
    "text,status,error",
    [
        ("Not logged in · Please run /login", None, BackendAuthError),
        ("Invalid API key · Fix external API key", 401, BackendAuthError),
        ("There's an issue with the selected model (x). It may not exist", 404, BackendModelError),
    ],
)
def test_permanent_failures_are_not_retried_and_never_answers(tmp_path, text, status, error):
    script, counter = counting_script(
        tmp_path, [claude_result(text, error=True, status=status)], [1]
    )
    with pytest.raises(error) as info:
        backend_for(script, max_retries=3).complete(CompletionRequest(prompt="x"))
    assert counter.read_text() == "1"
    message = str(info.value)
    assert message.startswith("claude_code: ") and "\n" not in message
    assert ("claude auth login" in message) if error is BackendAuthError else "`model`" in message


def test_an_error_result_with_exit_zero_is_still_an_error(tmp_path):
    script, _ = counting_script(tmp_path, [claude_result("Not logged in", error=True)], [0])
    with pytest.raises(BackendAuthError):
        backend_for(script).complete(CompletionRequest(prompt="x"))


def test_unsupported_flag_is_named(tmp_path):
    script = fake(
        tmp_path,
        "claude",
        """
sys.stderr.write("error: unknown option '--no-session-persistence'\\n")
sys.exit(1)
""",
    )
    with pytest.raises(BackendResponseError) as info:
        backend_for(script, max_retries=3).complete(CompletionRequest(prompt="x"))
    assert "rejected a flag" in str(info.value) and "npm install -g" in str(info.value)


def test_secrets_in_stderr_are_redacted(tmp_path):
    script = fake(
        tmp_path,
        "claude",
        """
sys.stderr.write("fatal: request failed with key sk-ant-api03-SECRETSECRETSECRETSECRET1234\\n")
sys.exit(3)
""",
    )
    with pytest.raises(BackendResponseError) as info:
        backend_for(script).complete(CompletionRequest(prompt="x"))
    assert "SECRETSECRET" not in str(info.value) and "fatal: request failed" in str(info.value)


# ------------------------------------------------------------------ executables
def test_missing_executable_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    for name, hint in [
        ("claude_code", "@anthropic-ai/claude-code"),
        ("codex", "@openai/codex"),
        ("copilot", "@github/copilot"),
    ]:
        with pytest.raises(BackendUnreachable) as info:
            backend_for(None, name).complete(CompletionRequest(prompt="x"))
        assert hint in str(info.value) and "`executable`" in str(info.value)
    with pytest.raises(BackendUnreachable, match="not found or not executable"):
        backend_for(tmp_path / "nope" / "claude").complete(CompletionRequest(prompt="x"))


def test_executable_is_found_on_path(tmp_path, monkeypatch):
    fake(tmp_path, "claude", f"sys.stdout.write({claude_result('from PATH')!r})\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert backend_for(None).complete(CompletionRequest(prompt="x")).text == "from PATH"
    # a bare name in `executable` is looked up on PATH too
    (tmp_path / "claude").rename(tmp_path / "my-claude")
    assert backend_for("my-claude").complete(CompletionRequest(prompt="x")).text == "from PATH"


def test_wrong_base_url_fails_fast_before_running_the_cli(tmp_path):
    ran = tmp_path / "ran"
    script = fake(tmp_path, "claude", f"open({str(ran)!r}, 'w').write('1')\n")
    with pytest.raises(BackendUnreachable, match="base_url"):
        backend_for(script, base_url="http://127.0.0.1:9", max_retries=3).complete(
            CompletionRequest(prompt="x")
        )
    assert not ran.exists()


# ------------------------------------------------------------------ tools, workers
def test_tool_calls_come_from_the_structured_output_not_the_text(tmp_path):
    script = fake(
        tmp_path,
        "claude",
        f"sys.stdout.write({claude_result('I ran Bash and Read.', tools=('Bash',))!r})\n",
    )
    comp = backend_for(script).complete(CompletionRequest(prompt="x", tools=["Bash"]))
    assert comp.tool_calls == ["Bash"]
    seen = fake(tmp_path, "claude2", f"sys.stdout.write({claude_result('I ran Bash.')!r})\n")
    assert (
        backend_for(seen).complete(CompletionRequest(prompt="x", tools=["Bash"])).tool_calls == []
    )


def test_tool_names_are_reported_in_the_tasks_vocabulary():
    aliases = {"Bash": ("bash", "exec_command")}
    assert map_tool_names(["bash", "view"], ["Bash"], aliases) == ["Bash", "view"]
    assert map_tool_names(["exec_command"], ["Bash"], aliases) == ["Bash"]
    assert map_tool_names(["exec_command"], [], aliases) == ["exec_command"]


def test_classify():
    assert classify("x", 401).kind == "auth"
    assert classify("Missing environment variable: `KEY`.").kind == "auth"
    assert classify("The model `x` does not exist or you do not have access to it.").kind == "model"
    assert classify("Connection error.").kind == "unreachable"  # pi 0.73.1, its own endpoint down
    assert classify("Connection error while saving").kind == "other"
    assert classify("Connection failed: error sending request").kind == "unreachable"
    assert classify("We're currently experiencing high demand").transient
    assert classify("unexpected argument '--nope' found").kind == "flag"
    assert classify("something odd").kind == "other"


def test_workers_run_rollouts_in_parallel(tmp_path):
    # a whole answer (one bare word scores 0: mining/integrity.py)
    script = fake(
        tmp_path, "claude", f"time.sleep(1.0)\nsys.stdout.write({claude_result('ok, done.')!r})\n"
    )
    b = backend_for(script, workers=4)
    store = Store(tmp_path / "db.sqlite")
    meter = Meter(b, store, Cost(), max_calls=100, max_tokens=10**9, role="target")
    replayer = Replayer(meter, None, metric="hard", workers=b.config.workers)
    tasks = [
        Task(id=f"t{i}", intent=f"task {i}", checks=[{"kind": "contains", "value": "ok"}])
        for i in range(4)
    ]
    started = time.monotonic()
    scores = replayer.run(tasks, "doc")
    assert time.monotonic() - started < 3.5
    assert all(s.score == 1.0 for s in scores.values())


def test_a_copilot_replay_of_a_project_file_runs_in_a_copy_of_the_users_home(
    tmp_path, isolated_home
):
    """Copilot logged in as the user (no base_url) writes its session in COPILOT_HOME: a
    replay of a project file, sent unmarked as the user asks it, runs in a throw-away copy of
    that home (login and the user's own instructions), never in the user's folder."""
    real = isolated_home / ".copilot"
    real.mkdir()
    (real / "config.json").write_text('{"logged_in_users": ["me"]}')
    (real / "copilot-instructions.md").write_text("Mine.\n")
    seen = tmp_path / "seen.json"
    script = fake(
        tmp_path,
        "copilot",
        f"""
home = os.environ["COPILOT_HOME"]
json.dump({{"home": home, "files": sorted(os.listdir(home)), "cwd_files": os.listdir("."),
           "stdin": sys.stdin.read()}}, open({str(seen)!r}, "w"))
print(json.dumps({{"type": "assistant.message", "data": {{"content": "ok"}}}}))
print(json.dumps({{"type": "result", "exitCode": 0}}))
""",
    )
    placement = Placement(
        agent="copilot", scope="project", path="AGENTS.md", mode="memory", text="Rules.\n"
    )
    comp = backend_for(script, "copilot").complete(
        CompletionRequest(prompt="do it", placement=placement)
    )
    assert comp.text == "ok"
    data = json.loads(seen.read_text())
    assert Path(data["home"]) != real and not Path(data["home"]).exists()  # thrown away
    assert data["files"] == ["config.json", "copilot-instructions.md"]
    assert data["cwd_files"] == ["AGENTS.md"] and data["stdin"] == "do it"
    assert sorted(p.name for p in real.iterdir()) == ["config.json", "copilot-instructions.md"]


def test_an_unreachable_endpoint_of_the_clis_own_config_says_so() -> None:
    """Without ``base_url`` the CLI uses its own model settings: the error says so and does
    not tell the user to check a ``base_url`` that is not set."""
    from skillopt_sleep.backends import get_backend
    from skillopt_sleep.backends._exec import Failure
    from skillopt_sleep.config import BackendConfig

    own = get_backend(BackendConfig(name="pi"))
    err = own.error_for(Failure("unreachable", "Connection error."))  # type: ignore[attr-defined]
    assert "its own configured endpoint" in str(err) and "no `base_url` is set" in str(err)
    set_ = get_backend(BackendConfig(name="pi", base_url="http://127.0.0.1:9/v1"))
    err = set_.error_for(Failure("unreachable", "Connection error."))  # type: ignore[attr-defined]
    assert "(http://127.0.0.1:9/v1)" in str(err) and "check `base_url`" in str(err)
