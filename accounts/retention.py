"""What retention deletes of the user API's sessions: the rows of used-up
refresh tokens (simplejwt's outstanding and blacklisted tokens, ``accounts.services``)
once the token has expired, when refusing it no longer needs them. Read from the
index ``accounts 0005`` puts on ``expires_at``."""

from __future__ import annotations

import datetime as dt

from django.db.models import QuerySet
from rest_framework_simplejwt.token_blacklist.models import OutstandingToken

from config.retention import Sweep


def expired_tokens_due(now: dt.datetime) -> QuerySet[OutstandingToken]:
    return OutstandingToken.objects.filter(expires_at__lt=now)


EXPIRED_TOKENS = Sweep(kind="expiredTokens", due=expired_tokens_due, order_by="expires_at")
