"""Service definitions that run ``skillopt-sleep start --foreground`` at login.

* Linux: a systemd *user* unit ``~/.config/systemd/user/skillopt-sleep.service``
  (``$XDG_CONFIG_HOME`` honoured). ``KillMode=mixed``: SIGTERM to the daemon (which stops its
  night and records it interrupted), then SIGKILL to whatever is left after ``TimeoutStopSec``.
* macOS: a launchd agent ``~/Library/LaunchAgents/dev.skillopt-sleep.plist``.
* Windows: a Task Scheduler task (logon trigger) from an XML definition, registered with
  ``schtasks /Create /XML``.

The copies in the repository's ``integrations/`` folder are these templates rendered for a
``pip install --user`` location; ``skillopt-sleep service install`` renders them with the
command actually running (the ``skillopt-sleep`` on PATH, else ``python -m skillopt_sleep``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from skillopt_sleep import agents, paths
from skillopt_sleep.errors import ServiceManagerError, one_line
from skillopt_sleep.files import atomic_write

LABEL = "dev.skillopt-sleep"
UNIT_NAME = "skillopt-sleep.service"
TASK_NAME = "skillopt-sleep"

#: The commands the repository copies in ``integrations/`` are rendered with.
INTEGRATION_ARGV = {
    "systemd": ["%h/.local/bin/skillopt-sleep"],
    "launchd": ["/usr/local/bin/skillopt-sleep"],
    "windows": [r"%LOCALAPPDATA%\Programs\Python\Scripts\skillopt-sleep.exe"],
}
INTEGRATION_FILES = {
    "systemd": "systemd/skillopt-sleep.service",
    "launchd": "launchd/dev.skillopt-sleep.plist",
    "windows": "windows/skillopt-sleep.xml",
}


def command_argv(config: Path | None = None) -> list[str]:
    """How to run this installation: the console script when it is on PATH, else
    ``<python> -m skillopt_sleep``; plus ``--config`` when one was given."""
    exe = shutil.which("skillopt-sleep")
    argv = [str(Path(exe).resolve())] if exe else [sys.executable, "-m", "skillopt_sleep"]
    if config:
        argv += ["--config", str(Path(config).expanduser().resolve())]
    return argv


#: Carried into the service definition: where the state lives, how the agent CLIs are found,
#: and where the agents keep their logs and skills (a service manager starts with a bare
#: environment, so without them the daemon would watch other folders than `start` run from
#: the same shell). The agents' variables come from the registry (``Agent.home_env`` and
#: ``Agent.env_vars``: ``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``, ``COPILOT_HOME``, …). Settings
#: overrides and keys are not carried: they belong in the config file, never in a unit file.
SERVICE_ENV = tuple(
    dict.fromkeys(
        (
            "PATH",
            "SKILLOPT_SLEEP_HOME",
            "SKILLOPT_SLEEP_CONFIG_FILE",
            *agents.home_envs(),
            *agents.env_vars(),
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
        )
    )
)


def service_env() -> dict[str, str]:
    return {k: os.environ[k] for k in SERVICE_ENV if os.environ.get(k)}


def _sd_quote(arg: str, *, exec_line: bool = False) -> str:
    """One word of a systemd unit setting: ``%`` (a specifier) doubled — except a leading
    ``%h/`` (the home specifier of the shipped template; real paths here are absolute); in
    ``ExecStart=`` also ``$`` (variable expansion) doubled; quoted when it holds anything but
    safe characters."""
    home = arg.startswith("%h/")
    arg = ("%h/" + arg[3:].replace("%", "%%")) if home else arg.replace("%", "%%")
    if exec_line:
        arg = arg.replace("$", "$$")
    if arg and all(c.isalnum() or c in "/._-%=:+," for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_systemd(argv: list[str], env: dict[str, str] | None = None) -> str:
    cmd = " ".join(_sd_quote(a, exec_line=True) for a in argv + ["start", "--foreground"])
    envs = "".join(f"Environment={_sd_quote(f'{k}={v}')}\n" for k, v in (env or {}).items())
    return f"""[Unit]
Description=skillopt-sleep: train coding-agent skill documents on the tasks you repeat
After=default.target

[Service]
Type=simple
{envs}ExecStart={cmd}
UMask=0077
Restart=on-failure
RestartSec=30
KillMode=mixed
TimeoutStopSec=90
Nice=10
IOSchedulingClass=idle

[Install]
WantedBy=default.target
"""


def render_launchd(argv: list[str], env: dict[str, str] | None = None) -> str:
    args = "\n".join(
        f"        <string>{escape(a)}</string>" for a in argv + ["start", "--foreground"]
    )
    envs = ""
    if env:
        pairs = "".join(
            f"        <key>{escape(k)}</key>\n        <string>{escape(v)}</string>\n"
            for k, v in env.items()
        )
        envs = f"    <key>EnvironmentVariables</key>\n    <dict>\n{pairs}    </dict>\n"
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
    <key>Label</key>
    <string>{LABEL}</string>
{envs}    <key>ProgramArguments</key>
    <array>
{args}
    </array>
    <key>Umask</key>
    <integer>63</integer>
    <key>RunAtLoad</key>
    <true/>
    <key>KeepAlive</key>
    <dict>
        <key>SuccessfulExit</key>
        <false/>
    </dict>
    <key>ProcessType</key>
    <string>Background</string>
    <key>LowPriorityIO</key>
    <true/>
    <key>ExitTimeOut</key>
    <integer>90</integer>
</dict>
</plist>
"""


def _win_quote(arg: str) -> str:
    return f'"{arg}"' if (" " in arg or not arg) else arg


def render_windows(argv: list[str], env: dict[str, str] | None = None) -> str:
    # Task Scheduler has no per-task environment: the task inherits the user's.
    command, *rest = argv
    arguments = " ".join(_win_quote(a) for a in rest + ["start", "--foreground"])
    return f"""<?xml version="1.0" encoding="UTF-16"?>
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo>
    <Description>skillopt-sleep: train coding-agent skill documents on the tasks you repeat</Description>
    <URI>\\{TASK_NAME}</URI>
  </RegistrationInfo>
  <Triggers>
    <LogonTrigger>
      <Enabled>true</Enabled>
    </LogonTrigger>
  </Triggers>
  <Principals>
    <Principal id="Author">
      <LogonType>InteractiveToken</LogonType>
      <RunLevel>LeastPrivilege</RunLevel>
    </Principal>
  </Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <Priority>7</Priority>
    <RestartOnFailure>
      <Interval>PT1M</Interval>
      <Count>3</Count>
    </RestartOnFailure>
    <StartWhenAvailable>true</StartWhenAvailable>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>{escape(command)}</Command>
      <Arguments>{escape(arguments)}</Arguments>
    </Exec>
  </Actions>
</Task>
"""


RENDER = {"systemd": render_systemd, "launchd": render_launchd, "windows": render_windows}
#: Task Scheduler wants the XML in the UTF-16 its declaration names.
ENCODING = {"systemd": "utf-8", "launchd": "utf-8", "windows": "utf-16"}


def write_integrations(root: Path) -> list[Path]:
    """(Re)generate the repository's ``integrations/`` copies."""
    out = []
    for kind, rel in INTEGRATION_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(RENDER[kind](INTEGRATION_ARGV[kind]), encoding=ENCODING[kind])
        out.append(path)
    return out


def platform_kind() -> str:
    if sys.platform == "darwin":
        return "launchd"
    if os.name == "nt":
        return "windows"
    return "systemd"


def unit_path(kind: str) -> Path:
    home = Path.home()
    if kind == "systemd":
        base = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        return base / "systemd" / "user" / UNIT_NAME
    if kind == "launchd":
        return home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    return paths.config_dir() / "skillopt-sleep-task.xml"


@dataclass
class ServiceResult:
    kind: str
    path: Path
    text: str
    hint: str
    ran: list[str]
    links: list[Path] = field(default_factory=list)  # enable links uninstall removed
    failed: list[str] = field(default_factory=list)  # manager commands that refused


def install(
    kind: str | None = None, *, config: Path | None = None, activate: bool = False
) -> ServiceResult:
    """Write the service definition for this OS; with ``activate`` also enable and start it."""
    kind = kind or platform_kind()
    path = unit_path(kind)
    text = RENDER[kind](command_argv(config), service_env())
    atomic_write(path, text.encode(ENCODING[kind]), private=True)
    cmds = {
        "systemd": [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", UNIT_NAME],
        ],
        "launchd": [["launchctl", "load", "-w", str(path)]],
        "windows": [["schtasks", "/Create", "/F", "/TN", TASK_NAME, "/XML", str(path)]],
    }[kind]
    ran: list[str] = []
    hint = " && ".join(" ".join(c) for c in cmds)
    if activate:
        for c in cmds:
            why = _manage(c)
            if why:
                raise ServiceManagerError(f"{why}; {path} is written, enable it with: {hint}")
            ran.append(" ".join(c))
    return ServiceResult(kind, path, text, hint, ran)


def _manage(cmd: list[str]) -> str | None:
    """Run one service-manager command; None when it succeeded, else why not (one line: it
    is missing, hung or exited non-zero, in its own words)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{' '.join(cmd)}` failed ({one_line(str(exc), 300)})"
    if proc.returncode != 0:
        said = one_line(proc.stderr or proc.stdout or "", 300) or "no message"
        return f"`{' '.join(cmd)}` exited {proc.returncode}: {said}"
    return None


def _enable_links(kind: str, path: Path) -> list[Path]:
    """The links ``systemctl enable`` made to the unit (``default.target.wants/<unit>`` and
    any other ``*.wants`` / ``*.requires`` folder next to it); none for other kinds."""
    if kind != "systemd" or not path.parent.is_dir():
        return []
    return [
        link
        for pattern in ("*.wants", "*.requires")
        for link in path.parent.glob(f"{pattern}/{UNIT_NAME}")
        if link.is_symlink()
    ]


def uninstall(kind: str | None = None, *, deactivate: bool = False) -> ServiceResult | None:
    """Remove the service definition (with ``deactivate``, disable/unload it first)."""
    kind = kind or platform_kind()
    path = unit_path(kind)
    cmds = {
        "systemd": [
            ["systemctl", "--user", "disable", "--now", UNIT_NAME],
            ["systemctl", "--user", "daemon-reload"],
        ],
        "launchd": [["launchctl", "unload", "-w", str(path)]],
        "windows": [["schtasks", "/Delete", "/F", "/TN", TASK_NAME]],
    }[kind]
    ran: list[str] = []
    failed: list[str] = []
    if deactivate:
        for c in cmds:  # a manager that refuses does not keep the files: they go anyway
            why = _manage(c)
            if why:
                failed.append(why)
            else:
                ran.append(" ".join(c))
    links = _enable_links(kind, path)
    for link in links:  # enabled before: no dangling link into a removed unit
        link.unlink()
    if not path.exists():
        return None
    text = path.read_text(ENCODING[kind])
    path.unlink()
    return ServiceResult(
        kind, path, text, " && ".join(" ".join(c) for c in cmds), ran, links, failed
    )
