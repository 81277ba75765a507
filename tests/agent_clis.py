"""Kept for imports written before ``tests/helpers/``; use :mod:`tests.helpers.clis`."""

from tests.helpers.clis import NODE_BIN, ROOT, agent_binary

__all__ = ["NODE_BIN", "ROOT", "agent_binary"]
