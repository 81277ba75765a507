"""The dashboard's Starlette app: routes, the token, CSRF-safe writes.

* Every request needs the per-install token: ``?token=…`` on a ``GET`` sets an ``HttpOnly``,
  ``SameSite=Strict`` cookie (kept 30 days: ``Max-Age``) and redirects to the same page
  without it; afterwards the cookie
  (or an ``Authorization: Bearer`` header) carries it. Without it: ``401``.
* The ``Host`` header must name this loopback address (``127.0.0.1:<port>`` or
  ``localhost:<port>``), so a DNS-rebinding page cannot reach the server: ``403``.
* Writes (adopt, reject and take back a refusal, rollback, start a night) are ``POST`` only, with the page's CSRF field (derived from
  the token) and an ``Origin`` of this very address; otherwise ``403``. No CORS header is sent,
  a preflight gets ``405``.
* Every response forbids framing and loads nothing from elsewhere (a strict
  ``Content-Security-Policy``: no script at all).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from skillopt_sleep.errors import SkilloptError
from skillopt_sleep.results import Trigger, night_label, parse_night
from skillopt_sleep.ui import pages

if TYPE_CHECKING:
    from skillopt_sleep.service import Service

log = logging.getLogger(__name__)
COOKIE = "skillopt_ui"
#: how long the browser keeps the token's cookie (30 days: the token itself lasts until the
#: state folder's ui-token file is deleted; a session cookie made the user paste it again
#: after every browser restart)
COOKIE_MAX_AGE = 30 * 24 * 3600
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
Endpoint = Callable[[Request], Awaitable[Response]]


def csrf_token(token: str) -> str:
    """The forms' CSRF field: derived from the install token, useless without it."""
    return hmac.new(token.encode(), b"skillopt-sleep ui csrf", hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _html(body: str, code: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(body, status_code=code, headers={**HEADERS, **(headers or {})})


def _refuse(code: int, message: str) -> HTMLResponse:
    return _html(pages.error("Refused", message), code)


class _NightConvertor(Convertor[int]):
    """A night's id in a path as it is shown: ``3``, ``d1`` (a dry run: -1), ``-1``."""

    regex = "d?[0-9]+|-[0-9]+"

    def convert(self, value: str) -> int:
        return parse_night(value) or 0  # 0: no night ("no night 0" on the page)

    def to_string(self, value: int) -> str:
        return night_label(value)


register_url_convertor("night", _NightConvertor())


def build_app(service: Service, token: str, port: int) -> Starlette:
    """The app for ``service``, answering on ``127.0.0.1:port`` with ``token``."""
    return Starlette(routes=_Dashboard(service, token, port).routes())


def _to(path: str, **query: str) -> Response:
    return RedirectResponse(f"{path}?{urlencode(query)}", status_code=303, headers=HEADERS)


def _back(pid: str, **query: str) -> Response:
    return _to(f"/proposals/{quote(pid, safe='')}", **query)


def _flash(request: Request) -> pages.Flash:
    done = request.query_params.get("done")
    failed = request.query_params.get("failed")
    if failed:
        return ("bad", failed)
    return ("ok", done) if done else None


def _q(request: Request, name: str) -> str:
    return request.query_params.get(name, "")


async def _style(_request: Request) -> Response:
    css = resources.files("skillopt_sleep.ui").joinpath("static/style.css").read_bytes()
    return Response(css, media_type="text/css", headers=HEADERS)


async def _not_found(request: Request) -> Response:
    return _html(pages.error("Not found", f"no page {request.url.path}"), 404)


class _Dashboard:
    """The routes of one app: the guard every request passes, the pages, the writes."""

    def __init__(self, service: Service, token: str, port: int) -> None:
        self.service = service
        self.token = token
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}
        self.csrf = csrf_token(token)

    # ------------------------------------------------------------------------ the guard
    def authorised(self, request: Request) -> bool:
        given = request.cookies.get(COOKIE, "")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        return bool(given) and _same(given, self.token)

    def login(self, request: Request) -> Response:
        """``?token=`` on a ``GET``: the cookie set, the same page again without it."""
        if not _same(request.query_params["token"], self.token):
            return _refuse(401, "wrong token")
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        target = quote(request.url.path) + ("?" + urlencode(rest) if rest else "")
        response = RedirectResponse(target, status_code=303, headers=HEADERS)
        response.set_cookie(
            COOKIE,
            self.token,
            max_age=COOKIE_MAX_AGE,
            httponly=True,
            samesite="strict",
            path="/",
            secure=False,
        )
        return response

    async def refuse_write(self, request: Request) -> Response | None:
        """A write from elsewhere or without the CSRF field refused; else its form kept on
        ``request.state.form``."""
        origin = request.headers.get("origin", "")
        if origin not in {f"http://{h}" for h in self.hosts}:
            return _refuse(403, "refused: a write must come from this dashboard's page")
        form = await request.form()
        if not _same(str(form.get("csrf", "")), self.csrf):
            return _refuse(403, "refused: the form's CSRF field is missing or wrong")
        request.state.form = form
        return None

    async def admit(self, request: Request, write: bool) -> Response | None:
        """The refusal (or the login's redirect) ``request`` gets, None when it may pass."""
        if request.headers.get("host", "") not in self.hosts:
            return _refuse(403, "this dashboard answers only on its own loopback address")
        if request.method == "GET" and "token" in request.query_params:
            return self.login(request)
        if not self.authorised(request):
            return _refuse(
                401,
                "no valid token: open the address `skillopt-sleep ui` prints (the token is "
                "in the state folder's ui-token file)",
            )
        return await self.refuse_write(request) if write else None

    def guard(self, handler: Endpoint, *, write: bool = False) -> Endpoint:
        async def endpoint(request: Request) -> Response:
            refused = await self.admit(request, write)
            if refused is not None:
                return refused
            try:
                return await handler(request)
            except SkilloptError as exc:
                return _html(pages.error("Error", str(exc)), 400)
            except Exception as exc:  # a bug: one line on the page, the traceback in the log
                log.exception("dashboard: %s %s", request.method, request.url.path)
                return _html(
                    pages.error("Internal error", f"internal error: {type(exc).__name__}: {exc}"),
                    500,
                )

        return endpoint

    # ------------------------------------------------------------------------ the writes
    async def adopt(self, request: Request) -> Response:
        pid = request.path_params["pid"]
        form = request.state.form
        # the rules checked on the page (``adopt ID --rules``); none checked adopts none
        rules = _numbers(form.getlist("rules")) if form.get("chosen") else None
        if rules == []:
            return _back(pid, done="no rule checked: nothing adopted")
        if form.get("all_agents"):
            done = await run_in_threadpool(lambda: self.service.adopt_all_agents(pid, rules=rules))
        else:
            done = [await run_in_threadpool(lambda: self.service.adopt(pid, rules=rules))]
        text = "; ".join(f"adopted {a.proposal_id} → {a.target_path}" for a in done)
        left = [r for a in done[:1] for r in a.left_out]
        if left:
            text += f" (left out: {'; '.join(left)})"
        return _back(pid, done=text)

    async def reject(self, request: Request) -> Response:
        pid = request.path_params["pid"]
        reason = str(request.state.form.get("reason", "")).strip()
        rule = _numbers([request.state.form.get("rule", "")])
        if rule:
            got = await run_in_threadpool(self.service.reject_rule, pid, rule[0], reason)
            return _back(pid, done=f"refused rule {got.n}: {got.rule}")
        await run_in_threadpool(self.service.reject, pid, reason)
        return _back(pid, done=f"rejected {pid}" + (f": {reason}" if reason else ""))

    async def rollback(self, request: Request) -> Response:
        """The same service call as ``skillopt-sleep rollback ID [--all-agents]``: this
        proposal's adoption (not whatever was adopted last on its file), and what it says."""
        pid = request.path_params["pid"]
        all_agents = bool(request.state.form.get("all_agents"))
        done = await run_in_threadpool(lambda: self.service.rollback(pid, all_agents=all_agents))
        text = "; ".join(done.outcome())
        if done.kept_copy:
            text += f" (your edited version kept at {done.kept_copy})"
        return _back(pid, done=text)

    async def unrefuse(self, request: Request) -> Response:
        """``skillopt-sleep reject ID --undo``: a rejected or rolled-back proposal staged again."""
        pid = request.path_params["pid"]
        lifted = await run_in_threadpool(self.service.lift_refusal, pid)
        text = f"lifted the refusal of {pid}: now {lifted.status}" + "".join(
            f"; its copy {k}: now {v}" for k, v in lifted.copies.items()
        )
        return _back(pid, done=text)

    async def start_night(self, _request: Request) -> Response:
        """A night now, through the one dispatch policy (the daemon when it runs with this
        config, else this process in the background); its page once its row exists."""
        try:
            outcome = await run_in_threadpool(
                lambda: self.service.run_night(trigger=Trigger.UI, wait=False)
            )
        except SkilloptError as exc:  # a night is running, the config does not load …
            return _to("/nights", failed=f"no night started: {exc}")
        where = "in the daemon" if outcome.via == "daemon" else "in this dashboard's process"
        text = f"night #{outcome.night_id} started {where} ({outcome.reason})"
        return _to(f"/nights/{outcome.night_id}", done=text)

    # ------------------------------------------------------------------------ the routes
    def views(self) -> dict[str, Callable[[Request], str]]:
        service, csrf = self.service, self.csrf
        return {
            "/": lambda r: pages.overview(service, csrf, _flash(r)),
            "/history": lambda r: pages.history(service),
            "/proposals": lambda r: pages.proposals(service),
            "/proposals/{pid}": lambda r: pages.proposal(
                service, r.path_params["pid"], csrf, _flash(r)
            ),
            "/tasks": lambda r: pages.tasks(service),
            "/search": lambda r: pages.search(service, _q(r, "q"), _q(r, "agent") or None),
            "/sessions/{sid}": lambda r: pages.session(service, r.path_params["sid"]),
            "/nights": lambda r: pages.nights(service, csrf, _flash(r)),
            # a night by its id as shown: 3, or d1 for a dry run (whose id is negative)
            "/nights/{nid:night}": lambda r: pages.night(service, r.path_params["nid"], _flash(r)),
        }

    def routes(self) -> list[Any]:
        def page(render: Callable[[Request], str]) -> Endpoint:
            async def handler(request: Request) -> Response:
                return _html(await run_in_threadpool(render, request))

            return handler

        guard = self.guard
        return [
            *(
                Route(path, guard(page(view)), methods=["GET"])
                for path, view in self.views().items()
            ),
            Route("/static/style.css", guard(_style), methods=["GET"]),
            Route("/proposals/{pid}/adopt", guard(self.adopt, write=True), methods=["POST"]),
            Route("/proposals/{pid}/reject", guard(self.reject, write=True), methods=["POST"]),
            Route("/proposals/{pid}/rollback", guard(self.rollback, write=True), methods=["POST"]),
            Route("/proposals/{pid}/unrefuse", guard(self.unrefuse, write=True), methods=["POST"]),
            Route("/nights/start", guard(self.start_night, write=True), methods=["POST"]),
            Route("/{rest:path}", guard(_not_found), methods=["GET"]),  # the token first, even here
        ]


def _numbers(values: list[Any]) -> list[int]:
    """The rule numbers a form sent (anything that is no positive number is dropped)."""
    return [int(v) for v in values if str(v).strip().isdigit() and int(v) > 0]
