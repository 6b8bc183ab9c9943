"""Every write of the quotas app, by what it governs.

``ai_settings``: a user's AI settings, and the timezone move that carries their usage
to the new local day; ``usage``: the user's daily jobs and tokens; ``budget``: the
platform key's daily budget; ``breaker``: the platform key's circuit breaker;
``counting``: the one write that counts tokens and cost on the user's and the
platform's days, which ``usage`` and ``budget`` share. Reads
that views, services and other apps share are in ``quotas.selectors``.
"""

from quotas.services.ai_settings import ai_settings_write
from quotas.services.breaker import (
    MODEL_FAILURE_CODES,
    breaker_admit,
    breaker_lock_half_open,
    breaker_record_failure,
    breaker_transition,
    half_open_admit,
)
from quotas.services.budget import platform_admit, platform_budget_admit, platform_usage_add
from quotas.services.usage import quota_check, quota_reserve_job, usage_record_calls, usage_record_result

__all__ = [
    "MODEL_FAILURE_CODES",
    "ai_settings_write",
    "breaker_admit",
    "breaker_lock_half_open",
    "breaker_record_failure",
    "breaker_transition",
    "half_open_admit",
    "platform_admit",
    "platform_budget_admit",
    "platform_usage_add",
    "quota_check",
    "quota_reserve_job",
    "usage_record_calls",
    "usage_record_result",
]
