"""The outbox's Celery tasks: ``send`` (one delivery, enqueued after its event
commits) and ``dispatch`` (beat: due retries, lost messages, dead claims). Defined
beside what they call, in ``delivery.services.outbox``."""

from delivery.services.outbox import dispatch, send

__all__ = ["dispatch", "send"]
