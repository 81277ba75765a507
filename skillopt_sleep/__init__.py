"""skillopt-sleep: train a coding agent's skill document on the tasks its user repeats.

The package is organised one concept per module:

* :mod:`skillopt_sleep.sources` — read-only, incremental harvesters of agent session logs.
* :mod:`skillopt_sleep.store` — the SQLite store (sqlite-utils, numbered migrations, WAL).
* :mod:`skillopt_sleep.backends` — one module per model/agent exec target, one interface.
* :mod:`skillopt_sleep.night` — mine, split, replay, reflect, edit, gate, consolidate, stage.
* :mod:`skillopt_sleep.proposals` — adopt / reject / rollback of staged proposals.
* :mod:`skillopt_sleep.simulator` — a deterministic model server for tests and ``demo``.
* :mod:`skillopt_sleep.cli` — the thin typer CLI.
"""

__version__ = "0.1.0"
