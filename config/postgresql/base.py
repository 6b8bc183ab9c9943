"""Django's PostgreSQL backend with a health check that costs no round trip, and the
parameter limit of server-side binding.

``CONN_HEALTH_CHECKS`` makes Django check a persistent connection before a request
reuses it, so one the database dropped (a restart, a failover, PgBouncer closing it)
is replaced instead of served as an error. Django's check is a ``SELECT 1``: one
round trip and a statement for the database on every request. Here an idle
connection is first polled: it has nothing to say between requests, so if its socket
is readable the server has closed it or sent something (a restart's "terminating
connection" notice, an end of file), and only then does ``SELECT 1`` decide. A
connection in a transaction, or one psycopg knows is broken, takes the full check.
A peer that vanishes without closing (a partition) is not readable: that request's
first statement then fails on the kernel's TCP timeouts (a 503), where Django's
``SELECT 1`` would have failed on them first and reconnected.

Parameters bound on the server (``DB_PREPARED_STATEMENTS``) are at most 65,535 a
statement, the protocol's count; Django 5.2 assumes no limit on PostgreSQL, where it
binds on the client. With server-side binding on, its batches (the deletion
collector's related lookups, ``bulk_create``) are cut to fit.
"""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import Any

from django.db.backends.postgresql import base, features, operations
from django.utils.functional import cached_property
from psycopg import pq

MAX_BOUND_PARAMETERS = 65_535


class DatabaseFeatures(features.DatabaseFeatures):
    @cached_property
    def max_query_params(self) -> int | None:  # type: ignore[override]
        bound = self.connection.settings_dict["OPTIONS"].get("server_side_binding") is True
        return MAX_BOUND_PARAMETERS if bound else None


class DatabaseOperations(operations.DatabaseOperations):
    def bulk_batch_size(self, fields: Sequence[Any], objs: Sequence[Any]) -> int:
        limit = self.connection.features.max_query_params
        if limit is None:
            return super().bulk_batch_size(fields, objs)
        return max(1, min(len(objs), limit // max(len(fields), 1)))


class DatabaseWrapper(base.DatabaseWrapper):
    features_class = DatabaseFeatures
    ops_class = DatabaseOperations

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
