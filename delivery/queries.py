"""The outbox's statements (DESIGN rule 10). Each runs as written on PostgreSQL and on
SQLite (3.35 or later: ``RETURNING``)."""

# A task's claim of one delivery: only a pending one whose try is due, or a new one
# (no try yet: its after-commit task may come before the time the dispatcher would
# take it). Two tasks for one delivery: one claim changes the row, the other none.
CLAIM = """
UPDATE delivery
   SET status = 'sending', attempts = attempts + 1, claimed_until = %(claimed_until)s
 WHERE id = %(id)s
   AND status = 'pending'
   AND (attempts = 0 OR next_attempt_at <= %(now)s)
RETURNING attempts
"""

# The end of a try, by the claim that made it: the same attempt still sending.
FINISH = """
UPDATE delivery
   SET status = %(status)s,
       claimed_until = NULL,
       next_attempt_at = %(next_attempt_at)s,
       last_status_code = %(status_code)s,
       last_error = %(error)s,
       finished_at = %(finished_at)s
 WHERE id = %(id)s AND status = 'sending' AND attempts = %(attempts)s
"""

# Claims whose task died before it finished: pending again, due now.
RECLAIM = """
UPDATE delivery
   SET status = 'pending', claimed_until = NULL, next_attempt_at = %(now)s
 WHERE status = 'sending' AND claimed_until < %(now)s
"""

DUE = """
SELECT id
  FROM delivery
 WHERE status = 'pending' AND next_attempt_at <= %(now)s
 ORDER BY next_attempt_at
 LIMIT %(limit)s
"""

# One push per enabled device of the user, in the event's own transaction: one
# statement, whatever the number of devices. A delivery's id is the event's batch id
# and the device's own (unique, opaque, in creation order).
PUSHES_FOR_USER = """
INSERT INTO delivery (id, kind, event_id, receiver_id, owner_id, channel, payload, status, attempts,
                      next_attempt_at, expires_at, last_error, created_at)
SELECT %(batch_id)s || '.' || substr(d.id, 5), 'push', %(event_id)s, d.id, %(owner_id)s, d.platform, %(payload)s,
       'pending', 0, %(next_attempt_at)s, %(expires_at)s, '', %(now)s
  FROM delivery_device d
 WHERE d.user_id = %(user_id)s AND d.enabled
ON CONFLICT DO NOTHING
RETURNING id
"""

# Deliveries not yet sent that are not to be sent any more: of an owner (consent
# withdrawn) or of a receiver (a device deleted or moved to another user).
DROP_OF_OWNER = """
UPDATE delivery
   SET status = 'dropped', finished_at = %(now)s, last_error = %(reason)s, next_attempt_at = NULL
 WHERE owner_id = %(owner_id)s AND kind = %(kind)s AND status = 'pending'
RETURNING channel
"""

DROP_OF_RECEIVER = """
UPDATE delivery
   SET status = 'dropped', finished_at = %(now)s, last_error = %(reason)s, next_attempt_at = NULL
 WHERE receiver_id = %(receiver_id)s AND kind = %(kind)s AND status = 'pending'
RETURNING channel
"""

# A delivery sent again (an operator's or its owner's replay), with its own event id:
# a finished one is pending again and due now; a pending one is due now; one being
# sent this moment is left to that try.
RESEND = """
UPDATE delivery
   SET status = 'pending', next_attempt_at = %(now)s, finished_at = NULL, claimed_until = NULL
 WHERE id = %(id)s AND status <> 'sending'
"""
