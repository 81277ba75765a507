"""``doctor``: every check, one step each (config, store, logs, agent CLIs, backends, the login
service, the daemon)."""

from __future__ import annotations

import sqlite3

from skillopt_sleep.errors import SkilloptError, one_line
from skillopt_sleep.results import DoctorCheck
from skillopt_sleep.service.core import Core
from skillopt_sleep.service.onboarding import OnboardingService
from skillopt_sleep.service.status import StatusService


class Doctor:
    """The checks ``doctor`` makes, in the order it shows them."""

    def __init__(self, core: Core, onboarding: OnboardingService, status: StatusService) -> None:
        self.core = core
        self._onboarding = onboarding
        self._status = status

    def doctor(self, *, backends: bool = True) -> list[DoctorCheck]:
        """Every check ``doctor`` makes: the config, the store's integrity, each agent's logs
        and CLI (its version), the target / optimizer backends (reachable and authorised:
        their own ``check``; only hosts the config names), the login service and daemon."""
        cfg_error = self.core.config_error()
        out = [self._config(cfg_error), self._store()]
        if cfg_error:
            return out
        out += self._logs()
        out += self._clis()
        if backends:
            out += self._backends()
        out.append(self._service_unit())
        out.append(self._daemon())
        return out

    def _config(self, cfg_error: str | None) -> DoctorCheck:
        if cfg_error:
            return DoctorCheck(name="config", status="fail", detail=cfg_error)
        return DoctorCheck(name="config", status="ok", detail=str(self.core.config_file()))

    def _store(self) -> DoctorCheck:
        try:
            with self.core.use() as store:
                bad = store.integrity()
        except (SkilloptError, sqlite3.Error) as exc:
            return DoctorCheck(name="store", status="fail", detail=one_line(str(exc)))
        if bad:
            return DoctorCheck(name="store", status="fail", detail="; ".join(bad[:5]))
        return DoctorCheck(name="store", status="ok", detail=str(self.core.db_path()))

    def _logs(self) -> list[DoctorCheck]:
        out: list[DoctorCheck] = []
        for src in self._onboarding.sources().sources:
            if not src.found:
                out.append(DoctorCheck(name=f"logs {src.name}", status="skip", detail="not found"))
                continue
            # session files: a subagent's own file counts, a database counts its sessions
            detail = (
                f"{src.sessions} session file{'' if src.sessions == 1 else 's'}, {src.bytes} bytes"
            )
            out.append(
                DoctorCheck(name=f"logs {src.name}", status="ok", detail=detail)
                if src.enabled
                else DoctorCheck(
                    name=f"logs {src.name}",
                    status="warn",
                    detail=f"{detail}, not harvested (`skillopt-sleep sources --enable-found`)",
                )
            )
        return out

    @staticmethod
    def _clis() -> list[DoctorCheck]:
        import shutil
        import subprocess

        from skillopt_sleep import agents

        out: list[DoctorCheck] = []
        for agent in agents.AGENTS:
            if not agent.executable:
                continue
            exe = shutil.which(agent.executable)
            name = f"cli {agent.executable}"
            if exe is None:
                out.append(DoctorCheck(name=name, status="skip", detail="not on PATH"))
                continue
            try:
                proc = subprocess.run(
                    [exe, "--version"], capture_output=True, text=True, timeout=20, check=False
                )
                said = one_line(proc.stdout or proc.stderr, 120)
                ok = proc.returncode == 0
            except (OSError, subprocess.TimeoutExpired) as exc:
                said, ok = one_line(str(exc), 120), False
            out.append(
                DoctorCheck(name=name, status="ok" if ok else "fail", detail=f"{exe}: {said}")
            )
        return out

    def _backends(self) -> list[DoctorCheck]:
        from skillopt_sleep.backends import get_backend

        out: list[DoctorCheck] = []
        settings = self.core.settings()
        for role, cfg in (("target", settings.target), ("optimizer", settings.optimizer)):
            if role == "optimizer" and cfg == settings.target:
                continue
            try:
                backend = get_backend(cfg)
                try:
                    backend.check()
                finally:
                    backend.close()
                where = cfg.base_url or cfg.executable or cfg.name
                out.append(
                    DoctorCheck(name=f"backend {role}", status="ok", detail=f"{cfg.name} ({where})")
                )
            except SkilloptError as exc:
                out.append(
                    DoctorCheck(name=f"backend {role}", status="fail", detail=one_line(str(exc)))
                )
        return out

    @staticmethod
    def _service_unit() -> DoctorCheck:
        from skillopt_sleep.install import units

        kind = units.platform_kind()
        unit = units.unit_path(kind)
        if unit.exists():
            return DoctorCheck(name="service", status="ok", detail=f"{kind}: {unit}")
        return DoctorCheck(
            name="service",
            status="warn",
            detail=f"not installed (`skillopt-sleep service install --now`; {unit})",
        )

    def _daemon(self) -> DoctorCheck:
        d = self._status.daemon_status()
        if d.running:
            return DoctorCheck(name="daemon", status="ok", detail=f"running (pid {d.pid})")
        return DoctorCheck(
            name="daemon", status="warn", detail="not running (`skillopt-sleep start`)"
        )
