"""Helpers shared by the tests (fixtures stay in the conftest.py files):

* :mod:`tests.helpers.clis` — where the pinned agent CLIs are, and what a missing one does;
* :mod:`tests.helpers.daemon` — the daemon harness, the gated proxy, bounded polling;
* :mod:`tests.helpers.sources` — small agent logs written record by record;
* :mod:`tests.helpers.night` — a night's world: sessions, document, persona, settings;
* :mod:`tests.helpers.net` — loopback ports.

Session logs in the agents' real formats, shared with the demo, are in
:mod:`skillopt_sleep.testing.sessions`.
"""
