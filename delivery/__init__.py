"""Delivery: the platform tells its clients (contract section 11).

One outbox for every delivery (DESIGN rule 12): pushes to learners' devices (APNs,
FCM) and, built on the same engine, signed webhooks. A delivery is a row written in
the transaction that made its event, sent by a Celery task after commit, retried on
its sender's schedule and finished by a conditional update.

This app knows nothing of jobs, notices or tasks: its callers hand it plain values
(who, what, where). It imports only ``config``.

Where to look:

- ``delivery.services.outbox``: the engine (rows, claim, send, retry, finish) and
  how a new kind of delivery plugs in (a ``Sender``).
- ``delivery.services.devices``: learners' devices (``/ai/devices``).
- ``delivery.services.push``: pushes written for a user's devices, consent's drop.
- ``delivery.senders``: the push senders (APNs, FCM, and the stand-in that logs).
"""
