"""Shared plumbing of the HTTP backends: API key lookup, retries with exponential backoff,
and mapping of transport / HTTP failures onto the :mod:`skillopt_sleep.errors` tree.

Retried (``config.max_retries`` times, sleeping ``base_delay * 2**attempt`` seconds, or the
server's ``Retry-After`` when given, capped at ``MAX_DELAY``): connect errors, timeouts,
dropped connections, 408, 409, 429 and 5xx. Never retried: 401/403 (BackendAuthError),
404 / unknown model (BackendModelError), other 4xx (BackendResponseError).
The API key is sent in headers only and never appears in an error message.
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx

from skillopt_sleep.backends.base import SKILL_TOOL, Backend
from skillopt_sleep.config import BackendConfig
from skillopt_sleep.errors import (
    BackendAuthError,
    BackendModelError,
    BackendResponseError,
    BackendTimeout,
    BackendUnreachable,
)
from skillopt_sleep.models import Completion, Usage

#: Placeholder key sent to loopback servers (local models, the simulator) when none is set.
LOCAL_PLACEHOLDER_KEY = "sk-local-no-key"
MAX_DELAY = 30.0
_RETRY_STATUS = {408, 409, 429}


#: the header an HTTP backend sends a dream rollout's sample index in (past the first only):
#: the simulator answers by it, a real API ignores it (its model samples again by itself)
SAMPLE_HEADER = "x-skillopt-sample"


def sample_headers(sample: int) -> dict[str, str]:
    """The headers naming a dream rollout's sample index (none for sample 0)."""
    return {SAMPLE_HEADER: str(sample)} if sample else {}


def is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_key(config: BackendConfig, default_env: str, base_url: str, backend: str) -> str:
    """The API key: ``config.api_key``, else ``$config.api_key_env`` (default ``default_env``).

    Loopback URLs without a key get :data:`LOCAL_PLACEHOLDER_KEY`; anything else raises
    BackendAuthError with a fix hint.
    """
    if config.api_key is not None and config.api_key.get_secret_value():
        return config.api_key.get_secret_value()
    if config.api_key_env and not os.environ.get(config.api_key_env, "").strip():
        raise BackendAuthError(
            f"api_key_env names ${config.api_key_env}, which is not set",
            backend=backend,
            fix=f"export {config.api_key_env}=<your key> before running, or fix `api_key_env`",
        )
    env = config.api_key_env or default_env
    value = os.environ.get(env, "").strip()
    if value:
        return value
    if is_loopback(base_url):
        return LOCAL_PLACEHOLDER_KEY
    raise BackendAuthError(
        f"no API key for {base_url}",
        backend=backend,
        fix=f"set the environment variable {env} or `api_key_env` in the backend config",
    )


def _message(response: httpx.Response) -> str:
    """The error message of an Anthropic / OpenAI error body, else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200].strip()
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)[:300]
    return str(error or body)[:300]


def _is_model_error(response: httpx.Response) -> bool:
    """404 naming a model, or a 400 ``model_not_found`` / "model ... does not exist"."""
    text = response.text.lower()
    if response.status_code == 404:
        return "model" in text
    return "model_not_found" in text or ("model" in text and "does not exist" in text)


def _retry_after(response: httpx.Response | None) -> float | None:
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class HttpCaller:
    """Posts JSON with retries for one backend. ``base_delay`` is in seconds."""

    def __init__(
        self,
        config: BackendConfig,
        backend: str,
        base_url: str,
        *,
        key_env: str = "",
        base_delay: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.config, self.backend, self.base_url = config, backend, base_url.rstrip("/")
        self.key_env = config.api_key_env or key_env
        self.base_delay, self.sleep = base_delay, sleep
        timeout = httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0))
        # Proxies from the environment only matter for remote APIs, never for loopback.
        self.client = httpx.Client(timeout=timeout, trust_env=not is_loopback(base_url))

    def close(self) -> None:
        self.client.close()

    def _delay(self, attempt: int, response: httpx.Response | None = None) -> float:
        hinted = _retry_after(response)
        delay = hinted if hinted is not None else self.base_delay * (2**attempt)
        return max(0.0, min(delay, MAX_DELAY))

    def check(self, path: str, headers: dict[str, str]) -> None:
        """GET ``base_url + path`` (a model listing: not a model call). Unreachable, timed
        out or 401/403 raise the BackendError tree; any other answer (a server without that
        route, say) shows the server is there and passes."""
        try:
            self.request("GET", path, None, headers, model="")
        except BackendResponseError:
            pass

    def post(
        self, path: str, payload: dict[str, Any], headers: dict[str, str], *, model: str
    ) -> dict[str, Any]:
        """POST ``base_url + path``; the parsed JSON object of a 2xx answer, or a BackendError."""
        return self.request("POST", path, payload, headers, model=model)

    def request(
        self,
        method: str,
        path: str,
        payload: dict[str, Any] | None,
        headers: dict[str, str],
        *,
        model: str,
    ) -> dict[str, Any]:
        """Send with retries; the parsed JSON object of a 2xx answer, or a BackendError."""
        url = self.base_url + path
        body = {"json": payload, "headers": headers}
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            response = self._send(method, url, body, last)
            if response is None:  # a transport failure worth another attempt
                self.sleep(self._delay(attempt))
                continue
            if response.status_code < 300:
                return self._parse(response, url)
            self._refuse(response, url, model, last=last, attempts=attempts)
            self.sleep(self._delay(attempt, response))
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(
        self, method: str, url: str, body: dict[str, Any], last: bool
    ) -> httpx.Response | None:
        """One attempt (``body``: the request's ``json`` and ``headers``): the response,
        ``None`` for a transport failure to retry, or (on the last attempt, or for a failure
        never retried) the BackendError."""
        try:
            return self.client.request(method, url, **body)
        except httpx.TimeoutException as exc:
            if last:
                raise BackendTimeout(
                    f"no answer from {url} within {self.config.timeout:g}s ({type(exc).__name__})",
                    backend=self.backend,
                    fix="raise `timeout` in the backend config",
                ) from None
            return None
        except (
            httpx.ConnectError,
            httpx.RemoteProtocolError,
            httpx.ReadError,
            httpx.WriteError,
        ) as exc:
            if last:
                if isinstance(exc, httpx.ConnectError):
                    raise BackendUnreachable(
                        f"cannot reach {self.base_url}",
                        backend=self.backend,
                        fix="is the server running?",
                    ) from None
                raise BackendResponseError(
                    f"connection to {url} failed: {exc}", backend=self.backend
                ) from None
            return None
        except httpx.HTTPError as exc:
            raise BackendResponseError(
                f"request to {url} failed: {exc}", backend=self.backend
            ) from None

    def _refuse(
        self, response: httpx.Response, url: str, model: str, *, last: bool, attempts: int
    ) -> None:
        """Raise the BackendError of a non-2xx answer; return when it is worth a retry."""
        status = response.status_code
        if status in (401, 403):
            where = "`api_key` in the backend config" + (
                f" or ${self.key_env}" if self.key_env else ""
            )
            raise BackendAuthError(
                f"HTTP {status} from {url}: {_message(response)}",
                backend=self.backend,
                fix=f"check the API key in {where}",
            )
        if status in (400, 404) and model and _is_model_error(response):
            raise BackendModelError(
                f"unknown model {model!r}: {_message(response)}",
                backend=self.backend,
                fix="check `model` in the backend config",
            )
        retryable = status in _RETRY_STATUS or status >= 500
        if retryable and not last:
            return
        if status == 404:
            raise BackendResponseError(
                f"HTTP 404 from {url}: {_message(response)}",
                backend=self.backend,
                fix="check `base_url` in the backend config",
            )
        raise BackendResponseError(
            f"HTTP {status} from {url}: {_message(response)}"
            + (f" (after {attempts} attempts)" if retryable else ""),
            backend=self.backend,
        )

    def _parse(self, response: httpx.Response, url: str) -> dict[str, Any]:
        try:
            data = response.json()
        except (ValueError, json.JSONDecodeError):
            raise BackendResponseError(
                f"malformed JSON from {url}: {response.text[:120]!r}", backend=self.backend
            ) from None
        if not isinstance(data, dict):
            raise BackendResponseError(f"expected a JSON object from {url}", backend=self.backend)
        return data


def pick_model(request_model: str, config: BackendConfig, base_url: str, backend: str) -> str:
    """``request.model`` or ``config.model``; loopback servers accept ``"sim"`` when unset.
    A config that names neither a model nor a ``base_url`` is refused (BackendModelError)
    before any connection: the default public host is never contacted unasked."""
    model = request_model or config.model
    if model:
        return model
    if config.base_url is None:  # nothing configured: no connection to the default host
        raise BackendModelError(
            "no backend configured (no model and no base_url)",
            backend=backend,
            fix="set `model` (and `base_url`) of [target] and of [optimizer] in the config file "
            "(`skillopt-sleep sources` lists the agents; `skillopt-sleep demo` needs none)",
        )
    if is_loopback(base_url):
        return "sim"
    raise BackendModelError(
        "no model configured", backend=backend, fix="set `model` in the backend config"
    )


class HttpBackend(Backend):
    """What the HTTP backends share: the base URL, the caller with its retries, the key and
    model lookups, and the one shape of a Completion from an answer."""

    skill_tools = (SKILL_TOOL,)
    #: First retry delay in seconds (doubles each retry); tests set it small.
    base_delay = 0.5
    #: the variable the key is read from when the config names none
    key_env = ""
    default_base_url = ""

    def __init__(self, config: BackendConfig, *, base_delay: float | None = None):
        super().__init__(config)
        self.base_url = self.base_url_of(config)
        delay = self.base_delay if base_delay is None else base_delay
        self._http = HttpCaller(
            config, self.name, self.base_url, key_env=self.key_env, base_delay=delay
        )

    def base_url_of(self, config: BackendConfig) -> str:
        return (config.base_url or self.default_base_url).rstrip("/")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r})"

    def key(self) -> str:
        return resolve_key(self.config, self.key_env, self.base_url, self.name)

    def pick_model(self, request_model: str) -> str:
        return pick_model(request_model, self.config, self.base_url, self.name)

    def close(self) -> None:
        self._http.close()


def completion_of(
    data: dict[str, Any], text: str, calls: list[str], tokens: tuple[Any, Any], model: str
) -> Completion:
    """The Completion of one HTTP answer ``data``: its text, the names of the tools it called,
    its (input, output) token counts; ``model`` when the answer names none."""
    return Completion(
        text=text,
        tool_calls=[c for c in calls if c],
        usage=Usage(input_tokens=int(tokens[0] or 0), output_tokens=int(tokens[1] or 0)),
        seconds=0.0,
        model=str(data.get("model") or model),
        raw=data,
    )
