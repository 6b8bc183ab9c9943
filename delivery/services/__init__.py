"""Every write of delivery: the outbox engine (``outbox``), devices (``devices``) and
pushes (``push``)."""
