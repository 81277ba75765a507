"""The one :class:`Service` the faces call, composed of the concern services.

Each operation lives in the service of its concern (:mod:`.records`, :mod:`.onboarding`,
:mod:`.nights`, :mod:`.reviews`, :mod:`.status`, :mod:`.doctor`, over the shared
:mod:`.core`); :class:`Service` builds them once and hands each call on, under the method name
and signature the faces know (:class:`_Forward`: typed, so mypy checks every call a face
makes).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from skillopt_sleep.service.core import Core
from skillopt_sleep.service.doctor import Doctor
from skillopt_sleep.service.nights import NightsService
from skillopt_sleep.service.onboarding import OnboardingService
from skillopt_sleep.service.receipts import Receipts
from skillopt_sleep.service.records import RecordsService
from skillopt_sleep.service.reviews import ReviewService
from skillopt_sleep.service.status import StatusService

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C")


class _Forward(Generic[C, P, R]):
    """A :class:`Service` attribute that is ``method`` of its part ``part`` (the concern
    service holding it), bound to that part: ``service.adopt(...)`` is
    ``service.reviews.adopt(...)``, with the same signature for mypy."""

    def __init__(self, part: str, method: Callable[Concatenate[C, P], R]) -> None:
        self.part = part
        self.name = method.__name__
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Forward[C, P, R]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        method: Callable[P, R] = getattr(getattr(obj, self.part), self.name)
        return method


class Service:
    """The operations of skillopt-sleep for one config file and one store.

    ``config_path``: the TOML config (None: the user's default file; settings also read the
    ``SKILLOPT_SLEEP_*`` environment). ``store_path``: the SQLite store (None: the user's
    default database, resolved on first use).
    """

    def __init__(self, config_path: Path | None = None, *, store_path: Path | None = None):
        self.core = Core(config_path, store_path=store_path)
        self.config_path = self.core.config_path
        self.store_path = self.core.store_path
        self.lock = self.core.lock
        receipts = Receipts(self.core)
        self.records = RecordsService(self.core)
        self.onboarding = OnboardingService(self.core)
        self.nights_service = NightsService(self.core)
        self.reviews = ReviewService(self.core, self.nights_service, receipts)
        self.status_service = StatusService(self.core, self.nights_service, receipts)
        self.doctor_service = Doctor(self.core, self.onboarding, self.status_service)

    # settings and store
    settings = _Forward("core", Core.settings)
    config_error = _Forward("core", Core.config_error)
    config_file = _Forward("core", Core.config_file)
    db_path = _Forward("core", Core.db_path)
    open = _Forward("core", Core.open)
    close = _Forward("core", Core.close)
    # harvest, tasks, search, privacy
    harvest = _Forward("records", RecordsService.harvest)
    forget = _Forward("records", RecordsService.forget)
    outbox = _Forward("records", RecordsService.outbox)
    mine = _Forward("records", RecordsService.mine)
    harvested_yet = _Forward("records", RecordsService.harvested_yet)
    stored_tasks = _Forward("records", RecordsService.stored_tasks)
    score_answer = _Forward("records", RecordsService.score_answer)
    link_tasks = _Forward("records", RecordsService.link_tasks)
    search = _Forward("records", RecordsService.search)
    session = _Forward("records", RecordsService.session)
    # agents and sources
    sources = _Forward("onboarding", OnboardingService.sources)
    first_run_setup = _Forward("onboarding", OnboardingService.first_run_setup)
    install = _Forward("onboarding", OnboardingService.install)
    uninstall = _Forward("onboarding", OnboardingService.uninstall)
    demo = _Forward("onboarding", OnboardingService.demo)
    # nights
    dispatch = _Forward("nights_service", NightsService.dispatch)
    run_night = _Forward("nights_service", NightsService.run_night)
    run_here = _Forward("nights_service", NightsService.run_here)
    wait_background = _Forward("nights_service", NightsService.wait_background)
    night_running = _Forward("nights_service", NightsService.night_running)
    night = _Forward("nights_service", NightsService.night)
    nights = _Forward("nights_service", NightsService.nights)
    progress = _Forward("nights_service", NightsService.progress)
    night_log = _Forward("nights_service", NightsService.night_log)
    night_log_view = _Forward("nights_service", NightsService.night_log_view)
    # doctor and status
    doctor = _Forward("doctor_service", Doctor.doctor)
    status = _Forward("status_service", StatusService.status)
    in_the_wild = _Forward("status_service", StatusService.in_the_wild)
    daemon_status = _Forward("status_service", StatusService.daemon_status)
    # proposals and managed documents
    proposals = _Forward("reviews", ReviewService.proposals)
    proposal = _Forward("reviews", ReviewService.proposal)
    report = _Forward("reviews", ReviewService.report)
    proposal_markdown = _Forward("reviews", ReviewService.proposal_markdown)
    latest_report = _Forward("reviews", ReviewService.latest_report)
    adopt = _Forward("reviews", ReviewService.adopt)
    agent_copies = _Forward("reviews", ReviewService.agent_copies)
    copies_not_staged = _Forward("reviews", ReviewService.copies_not_staged)
    copy_statuses = _Forward("reviews", ReviewService.copy_statuses)
    adopt_all_agents = _Forward("reviews", ReviewService.adopt_all_agents)
    reject = _Forward("reviews", ReviewService.reject)
    reject_rule = _Forward("reviews", ReviewService.reject_rule)
    lift_rule_refusal = _Forward("reviews", ReviewService.lift_rule_refusal)
    lift_refusal = _Forward("reviews", ReviewService.lift_refusal)
    rollback = _Forward("reviews", ReviewService.rollback)
    skill = _Forward("reviews", ReviewService.skill)
