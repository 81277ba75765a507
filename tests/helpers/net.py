"""Loopback network helpers."""

from __future__ import annotations

import socket


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port
