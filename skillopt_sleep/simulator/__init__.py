"""A deterministic model-API simulator for tests, demos and benchmarks. **It is not a model.**

It answers Anthropic Messages, OpenAI Responses and OpenAI Chat Completions requests on a
loopback port (127.0.0.1 only), streaming or not, from a persona TOML file and fixed rules
(:mod:`skillopt_sleep.simulator.brain`): a target answer is the persona's canned answer
modified by the rules of a tiny rule language found in the request's context (a skill the
request lists is loaded with the CLI's own tool call only when the persona's ``[skills]`` rule
matches its description to the task; then its body's rules apply), and the
optimizer roles (reflect / judge / consolidate) are recognised by the marker lines of
:mod:`skillopt_sleep.night.prompts` and answered by deterministic algorithms. The same request
always gets the same answer. Its only purpose is to exercise the engine and the agent CLIs
end-to-end without a real model or network.

Use in-process::

    from skillopt_sleep.simulator import serve
    with serve("demo", api_key=None) as sim:
        sim.url            # "http://127.0.0.1:PORT" (append /v1 for OpenAI clients)
        sim.stats.by_role  # Counter({"target": 3, "judge": 1})

or as a process: ``python -m skillopt_sleep.simulator --persona FILE --port N [--api-key K]``
(prints the URL on one line when ready).
"""

from skillopt_sleep.simulator.brain import Brain, Reply, Turn, judge_score, parse_rules
from skillopt_sleep.simulator.persona import Persona, load_persona
from skillopt_sleep.simulator.server import Simulator, Stats, serve

__all__ = [
    "Brain",
    "Persona",
    "Reply",
    "Simulator",
    "Stats",
    "Turn",
    "judge_score",
    "load_persona",
    "parse_rules",
    "serve",
]
