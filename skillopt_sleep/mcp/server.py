"""The MCP server (official ``mcp`` SDK 2.x, :class:`MCPServer`): tools, resources, one prompt.

:func:`build_server` returns a server whose tools each call one method of the application
service (:class:`~skillopt_sleep.service.Service`); its lifespan opens the store. Every tool
failure is a tool error (``isError``) whose text is one line; nothing a client sends can stop
the server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import ToolAnnotations
from pydantic import Field, ValidationError

from skillopt_sleep.errors import SkilloptError, StoreError, one_line
from skillopt_sleep.mcp import models as m
from skillopt_sleep.results import NightView, Trigger
from skillopt_sleep.service import Service, project_arg

T = TypeVar("T")

INSTRUCTIONS = (
    "skillopt-sleep trains the user's skill documents overnight on their recurring tasks and "
    "stages proposals. Review with sleep_status / list_proposals / get_proposal; adopt only "
    "after the user agrees, passing the proposal's base_hash; reject with a reason; undo an "
    "adoption with rollback. run_night starts a night in the background: poll get_night. "
    "When sleep_status has a notice, a proposal is ready and nobody has reviewed it yet: tell "
    "the user."
)

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
#: a write that destroys nothing (reject, take back a refusal)
EDIT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
#: a night: calls the models (the open world)
START = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
Tool = Callable[[ToolAnnotations], Callable[[Callable[..., Any]], Callable[..., Any]]]


class _Failure(Exception):
    """A tool's one-line reason, unwrapped by :meth:`SleepServer.call_tool`."""


def _guard(fn: Callable[[], T]) -> T:
    try:
        return fn()
    except SkilloptError as exc:
        raise _Failure(one_line(str(exc)) or type(exc).__name__) from None
    except Exception as exc:  # a bug: still a tool error, never a crash of the server
        raise _Failure(one_line(f"internal error: {type(exc).__name__}: {exc}")) from None


def _validation_line(tool: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    return one_line(f"bad arguments for {tool}: " + "; ".join(parts))


class SleepServer(MCPServer[Service]):
    """MCPServer whose tool errors are one line: our reason, or the invalid argument."""

    service: Service

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, _Failure):
                raise ToolError(str(cause)) from cause
            if isinstance(cause, ValidationError):
                raise ToolError(_validation_line(name, cause)) from cause
            raise ToolError(one_line(str(exc))) from exc


ProposalId = Annotated[
    str, Field(min_length=1, max_length=100, description="Proposal id, e.g. 'p3'")
]


def _night(service: Service, view: NightView) -> m.NightInfo:
    return m.NightInfo(
        **view.model_dump(),
        running=view.status == "running",
        progress=service.progress(view.id),
    )


def _status(service: Service) -> m.Status:
    st = service.status(daemon_timeout=1.0)
    nights = [_night(service, n) for n in st.nights]
    return m.Status(
        database=st.database,
        counts=st.counts.model_dump(),
        night_running=st.night_running,
        last_night=_night(service, st.last_night) if st.last_night else None,
        nights=nights,
        last_error=st.last_error,
        pending_proposals=st.pending_proposals,
        harvest={k: v.model_dump() for k, v in st.harvest.items()},
        daemon=st.daemon.model_dump(exclude_none=True),
        in_the_wild=st.in_the_wild,
        notice=st.notice,
    )


def _start_night(service: Service, dry_run: bool, project: str | None) -> m.NightStarted:
    outcome = service.run_night(
        dry_run=dry_run, project=project_arg(project), trigger=Trigger.MCP, wait=False
    )
    assert outcome.night_id is not None  # run_night(wait=False) returns once it is known
    status = "running"
    if outcome.via == "here":
        status = str(service.night(outcome.night_id).status)
    return m.NightStarted(
        night_id=outcome.night_id,
        status=status,
        via="in-process" if outcome.via == "here" else "daemon",
        reason=outcome.reason,
    )


def build_server(service: Service | None = None, *, http_token: str | None = None) -> SleepServer:
    """Build the skillopt-sleep MCP server over ``service`` (default: the user's config file,
    environment and store). ``http_token``: when given, every HTTP request must carry
    ``Authorization: Bearer <token>`` (used by ``--transport http``).
    """
    svc = service or Service()

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Service]) -> AsyncIterator[Service]:
        try:
            svc.open()
        except StoreError:
            pass  # the server still starts; every tool reports the store's error
        try:
            yield svc
        finally:
            svc.close()

    auth_kwargs: dict[str, Any] = {}
    if http_token is not None:
        from skillopt_sleep.mcp.auth import StaticTokenVerifier, auth_settings

        auth_kwargs = {"auth": auth_settings(), "token_verifier": StaticTokenVerifier(http_token)}

    server = SleepServer(
        "skillopt-sleep",
        title="skillopt-sleep",
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=lifespan,
        log_level="WARNING",
        **auth_kwargs,
    )
    server.service = svc

    def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def register(fn: Callable[..., T]) -> Callable[..., T]:
            server.add_tool(
                fn, description=one_line(fn.__doc__ or "", 1000), annotations=annotations
            )
            return fn

        return register

    for register in (_review_tools, _decision_tools, _night_tools, _store_tools):
        register(tool, svc)  # in this order: the order list_tools answers
    _resources(server, svc)
    _prompt(server, svc)
    return server


# ---------------------------------------------------------------------- tools
def _rule_rejected(got: m.RuleRejected) -> m.RejectResult:
    """A refusal of one rule as the reject tool answers it."""
    return m.RejectResult(
        proposal_id=got.proposal_id, status=got.status, reason=got.reason, rule=got
    )


def _review_tools(tool: Tool, svc: Service) -> None:
    """The reading of what the nights made: status, proposals."""

    @tool(READ)
    def sleep_status() -> m.Status:
        """Last nights, pending proposals, store counts, harvest accounting, last error,
        whether a night is running now, and a notice when a proposal is ready that nobody
        has reviewed yet (tell the user)."""
        return _guard(lambda: _status(svc))

    @tool(READ)
    def list_proposals(
        status: Annotated[
            Literal["staged", "adopted", "rejected", "rolled_back", "superseded"] | None,
            Field(description="Only this status (default: all)"),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
    ) -> m.ProposalList:
        """Proposals, newest first, with val/test scores and the base_hash needed to adopt."""
        return _guard(lambda: m.ProposalList(proposals=svc.proposals(status, limit)))

    @tool(READ)
    def get_proposal(id: ProposalId) -> m.ProposalDetail:
        """One proposal: unified diff, every edit with status and rationale, per-task val and
        test scores before/after, and cost."""
        return _guard(lambda: svc.proposal(id))


def _decision_tools(tool: Tool, svc: Service) -> None:
    """The user's decisions on a proposal: adopt, reject, take back a refusal, roll back."""

    @tool(WRITE)
    def adopt_proposal(
        id: ProposalId,
        base_hash: Annotated[
            str,
            Field(
                max_length=64,
                description="The proposal's base_hash from get_proposal ('' if the file did not exist)",
            ),
        ],
        rules: Annotated[
            list[Annotated[int, Field(ge=1)]] | None,
            Field(
                description="Adopt only these of its rules, by their n in get_proposal's "
                "rules (default: every rule not refused); the others are left out, not refused"
            ),
        ] = None,
    ) -> m.AdoptResult:
        """Write a staged proposal to its live file (atomic, with a backup). Refused if the
        file changed since the proposal was made or base_hash does not match. Ask the user first.
        A night's rules may also be staged for other agents (get_proposal's summary.copies:
        one proposal per agent, e.g. p3-codex); adopt each one the user wants."""
        return _guard(lambda: svc.adopt(id, base_hash=base_hash, rules=rules))

    @tool(EDIT)
    def reject_proposal(
        id: ProposalId,
        reason: Annotated[
            str, Field(max_length=2000, description="Why; kept with the proposal")
        ] = "",
        rule: Annotated[
            int | None,
            Field(
                ge=1,
                description="Refuse only this rule (its n in get_proposal's rules); the "
                "proposal's other rules stay adoptable",
            ),
        ] = None,
    ) -> m.RejectResult:
        """Discard a staged proposal (the live file is not touched), or with ``rule`` only one
        of its rules: nights never propose a refused rule again; its siblings they may."""
        if rule is not None:
            return _guard(lambda: _rule_rejected(svc.reject_rule(id, rule, reason)))
        return _guard(lambda: svc.reject(id, reason))

    @tool(EDIT)
    def lift_refusal(id: ProposalId) -> m.RefusalLifted:
        """Take back the user's refusal of a rejected or rolled-back proposal: it is staged
        again (superseded when a newer proposal for its file is staged), with the copies its
        rejection withdrew; the live file is not touched. Only when the user asks."""
        return _guard(lambda: svc.lift_refusal(id))

    @tool(WRITE)
    def rollback(
        target: Annotated[
            str | None,
            Field(
                description="A proposal's id (p3), an agent's copy's id (p3-codex), or the live "
                "file path of a managed target (default: the latest adoption)"
            ),
        ] = None,
        all_agents: Annotated[
            bool,
            Field(
                description="Also roll back the adopted copies of its rules for other agents, "
                "each restoring its own file"
            ),
        ] = False,
    ) -> m.RollbackResult:
        """Restore a file as it was before its adoption, byte for byte. Refused if the file
        changed since the adoption. One file only: the copies of the same rules for other
        agents stay adopted (still_adopted names them) unless all_agents."""
        return _guard(lambda: svc.rollback(target, all_agents=all_agents, managed_only=True))


def _night_tools(tool: Tool, svc: Service) -> None:
    """A night started and followed."""

    @tool(START)
    def run_night(
        dry_run: Annotated[
            bool, Field(description="Harvest and mine only; no model calls, nothing staged")
        ] = False,
        project: Annotated[
            str | None, Field(description="Absolute project directory (default: all projects)")
        ] = None,
    ) -> m.NightStarted:
        """Start a night (harvest, mine, replay, gate, stage) in the background and return its
        id at once; poll get_night(id). Refused if a night is already running."""
        return _guard(lambda: _start_night(svc, dry_run, project))

    @tool(READ)
    def get_night(
        id: Annotated[int, Field(description="Night id (a dry run's is negative: -1 is d1)")],
    ) -> m.NightInfo:
        """A night's status, progress lines, scores, cost and summary."""
        return _guard(lambda: _night(svc, svc.night(id)))


def _store_tools(tool: Tool, svc: Service) -> None:
    """What the store holds: the tasks, the sessions, the live skill."""

    @tool(READ)
    def list_tasks(
        project: Annotated[
            str | None, Field(description="Only tasks of this project directory")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> m.TaskList:
        """Recurring tasks mined from past sessions (as stored by the last night): intent,
        split, checks, the user's corrections, occurrences (each time the user asked, with
        its role: train / val / test, and its session's agent and project) and why similar
        prompts were kept apart."""
        return _guard(lambda: svc.stored_tasks(project, limit))

    @tool(READ)
    def search_sessions(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=500,
                description="Full-text query (SQLite FTS5; plain words work)",
            ),
        ],
        agent: Annotated[str | None, Field(description="claude_code or codex")] = None,
        project: Annotated[
            str | None, Field(description="Only sessions in this project directory")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
    ) -> m.SearchResult:
        """Full-text search over harvested (redacted) session messages, best match first."""
        return _guard(lambda: svc.search(query, agent=agent, project=project, limit=limit))

    @tool(READ)
    def get_skill(
        target: Annotated[
            str | None,
            Field(description="A managed target path (default: the latest proposal's target)"),
        ] = None,
    ) -> m.SkillInfo:
        """The live text of a managed skill document and its learned rules."""
        return _guard(lambda: svc.skill(target))


# ---------------------------------------------------------------------- resources
def _resource(fn: Callable[[], str]) -> str:
    try:
        return fn()
    except SkilloptError as exc:
        raise ResourceError(one_line(str(exc))) from None


def _resources(server: SleepServer, svc: Service) -> None:
    """A proposal's report, the latest report, the status as JSON."""

    @server.resource(
        "skillopt://proposals/{id}",
        name="proposal",
        mime_type="text/markdown",
        description="A proposal's report: scores, edits, per-task deltas, diff",
    )
    def proposal_resource(id: str) -> str:
        return _resource(lambda: svc.proposal_markdown(id, with_status=True))

    @server.resource(
        "skillopt://reports/latest",
        name="latest-report",
        mime_type="text/markdown",
        description="The newest proposal's report (or why the last night staged none)",
    )
    def latest_report() -> str:
        return _resource(lambda: svc.latest_report())

    @server.resource(
        "skillopt://status",
        name="status",
        mime_type="application/json",
        description="sleep_status as JSON",
    )
    def status_resource() -> str:
        return _resource(lambda: _status(svc).model_dump_json(indent=2))


# ---------------------------------------------------------------------- prompt
def _prompt(server: SleepServer, svc: Service) -> None:
    """review_last_night: the steps of a review, with the latest report."""

    @server.prompt(
        name="review_last_night",
        title="Review last night's proposal",
        description="Walk the user through last night's proposal and adopt or reject it",
    )
    def review_last_night() -> str:
        try:
            report = svc.latest_report()
        except SkilloptError as exc:
            report = f"(the report could not be read: {one_line(str(exc))})"
        return (
            "Review last night's skillopt-sleep proposal with me.\n\n"
            "1. Call `sleep_status`, then `get_proposal` for the newest staged proposal.\n"
            "2. Summarise in a few lines: the target file, val and test scores before → after, "
            "each applied edit with its rationale, and any rejected edit with the gate's reason.\n"
            "3. Show the diff and ask me whether to adopt it.\n"
            "4. If I agree, call `adopt_proposal` with its id and base_hash; if I decline, call "
            "`reject_proposal` with my reason. Never adopt without my explicit yes.\n\n"
            "The latest report:\n\n" + report
        )


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("skillopt-sleep")
    except Exception:  # pragma: no cover
        return "0"
