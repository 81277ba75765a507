"""The application service: every operation the faces offer, in one place.

The CLI, the MCP tools, the dashboard and the daemon's night worker call a :class:`Service`
(:mod:`.facade`) and nothing below it; they parse a request, call one method, and print or
return its typed result (:mod:`skillopt_sleep.results`). Errors are
:class:`~skillopt_sleep.errors.SkilloptError` subclasses with a one-line reason; a database
failure is a :class:`~skillopt_sleep.errors.StoreError`. The operations live in concern
services: :mod:`.records` (harvest, mine, search, forget), :mod:`.onboarding` (sources,
agent shells, demo), :mod:`.nights` (the night dispatch policy, running and reading nights),
:mod:`.reviews` (proposals, managed documents), :mod:`.status`, :mod:`.doctor`, over
:mod:`.core` (the config and the shared store connection).
"""

from skillopt_sleep.service.core import project_arg
from skillopt_sleep.service.facade import Service
from skillopt_sleep.service.nights import HOOK_TIMEOUT, session_end_hook
from skillopt_sleep.service.status import ready_notice

__all__ = ["HOOK_TIMEOUT", "Service", "project_arg", "ready_notice", "session_end_hook"]
