"""Status: the daemon, the store, the last nights and the proposals ready for review."""

from __future__ import annotations

from skillopt_sleep.errors import ConfigError, one_line
from skillopt_sleep.results import DaemonStatus, PendingProposal, Status, WildCheck
from skillopt_sleep.service.core import Core
from skillopt_sleep.service.nights import NightsService
from skillopt_sleep.service.receipts import Receipts, _seen_key


def ready_notice(pending: list[PendingProposal]) -> str | None:
    """The notice that staged proposals nobody has looked at are ready (None: none)."""
    unseen = [p for p in pending if not p.seen]
    if not unseen:
        return None

    def one(p: PendingProposal) -> str:
        def f(x: float | None) -> str:
            return "—" if x is None else f"{x:.2f}"

        return f"{p.id} for {p.target} (val {f(p.val_before)} → {f(p.val_after)})"

    first = unseen[0].id
    return (
        f"{'a proposal is' if len(unseen) == 1 else f'{len(unseen)} proposals are'} ready, not "
        f"yet reviewed: {'; '.join(one(p) for p in unseen)}. Review with `skillopt-sleep show "
        f"{first}` (MCP: get_proposal), then adopt or reject it."
    )


class StatusService:
    """What ``status`` shows (a read: nothing is written), and the adoptions in the wild."""

    def __init__(self, core: Core, nights: NightsService, receipts: Receipts) -> None:
        self.core = core
        self._nights = nights
        self._receipts = receipts

    def status(self, *, nights: int = 5, daemon_timeout: float = 3.0) -> Status:
        """The daemon, the store, the last nights, pending proposals, harvest accounting, the
        last error and whether the config loads. A read: nothing is written."""
        from skillopt_sleep import status as status_view

        with self.core.use() as store:
            status = status_view.collect_status(
                store, database=str(self.core.db_path()), nights=nights
            )
        status.in_the_wild = self.in_the_wild()
        status.daemon = self.daemon_status(timeout=daemon_timeout)
        status.night_running = self._nights.night_running()
        status.config_error = self.core.config_error()
        seen = self._receipts.seen()
        for p in status.pending_proposals:
            p.seen = _seen_key(p.id, p.created_at) in seen
        status.notice = ready_notice(status.pending_proposals)
        return status

    def in_the_wild(self) -> list[WildCheck]:
        """Each adoption in place against the sessions harvested since (:mod:`.delivery.wild`)."""
        from skillopt_sleep.delivery.wild import in_the_wild

        try:
            similarity = self.core.settings().similarity
        except ConfigError:
            similarity = 0.72
        with self.core.use() as store:
            return in_the_wild(store, similarity=similarity)

    def daemon_status(self, timeout: float = 3.0) -> DaemonStatus:
        """The daemon's status (``running=False`` when none runs); never raises."""
        from skillopt_sleep import daemon_client

        try:
            return daemon_client.daemon_status(timeout=timeout)
        except Exception as exc:  # the daemon is optional; its status never fails ours
            return DaemonStatus(running=False, error=one_line(f"{type(exc).__name__}: {exc}", 200))
