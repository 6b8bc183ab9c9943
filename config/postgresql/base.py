"""Django's PostgreSQL backend with a health check that costs no round trip.

``CONN_HEALTH_CHECKS`` makes Django check a persistent connection before a request
reuses it, so one the database dropped (a restart, a failover, PgBouncer closing it)
is replaced instead of served as an error. Django's check is a ``SELECT 1``: one
round trip and a statement for the database on every request. Here an idle
connection is first polled: it has nothing to say between requests, so if its socket
is readable the server has closed it or sent something (a restart's "terminating
connection" notice, an end of file), and only then does ``SELECT 1`` decide. A
connection in a transaction, or one psycopg knows is broken, takes the full check.

A peer that vanishes without closing (a partition) is not readable either way: the
first statement then fails on the socket's timeouts, as it would after ``SELECT 1``.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        connection = self.connection
        if connection is None or connection.closed or connection.broken:
            return False
        if connection.info.transaction_status != pq.TransactionStatus.IDLE:
            return super().is_usable()
        try:
            poller = select.poll()
            poller.register(connection.fileno(), select.POLLIN | select.POLLPRI)
            readable = bool(poller.poll(0))
        except (OSError, ValueError):
            return False
        return super().is_usable() if readable else True
