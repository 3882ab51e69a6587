"""The sandbox's TCP port on 127.0.0.1: free or not, where a new sandbox looks for one, and
PostgreSQL's own words for a port taken at start (the sandbox in cluster.py keeps its port)."""

from __future__ import annotations

import socket
import zlib
from pathlib import Path

from pgdyno.errors import ClusterError

FIRST_PORT = 54330
PORT_SPREAD = 1000  # new sandboxes start looking for a port this far apart (first_port)


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_taken(log_lines: list[str]) -> bool:
    """True when a start failed because the TCP port was in use (PostgreSQL's own words).

    >>> port_taken(['2026-11-23 01:58:01 UTC [9] LOG:  could not bind IPv4 address '
    ...              '"127.0.0.1": Address already in use'])
    True
    >>> port_taken(['FATAL:  could not create lock file "postmaster.pid": Permission denied'])
    False
    """
    return any("Address already in use" in line for line in log_lines)


def first_port(root: Path) -> int:
    """Where the search for a new sandbox's port starts: a place of its own in the range for
    each sandbox directory, so that two work directories (two users) rarely want one port and
    take it from each other between commands.

    >>> here = Path("/var/lib/pgdyno/clusters/pg18")
    >>> first_port(here) == first_port(here)
    True
    >>> FIRST_PORT <= first_port(Path("/tmp/w/clusters/pg18")) < FIRST_PORT + PORT_SPREAD
    True
    """
    return FIRST_PORT + zlib.crc32(str(root).encode()) % PORT_SPREAD


def free_port(taken: set[int], first: int = FIRST_PORT) -> int:
    for port in range(first, first + 2000):
        if port not in taken and port_is_free(port):
            return port
    raise ClusterError(f"no free TCP port between {first} and {first + 1999} on 127.0.0.1.")
