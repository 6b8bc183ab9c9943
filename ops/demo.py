"""What ``make run`` sets up so that the quick start works at once (``dev_bootstrap``):
an operator, a demo learner with AI analysis on, a knowledge base with knowledge
points and study records and a phone registered for pushes, and a model-asynch admin tenant with a known key and a model
config pointing at the local stand-in. Each step only creates what is missing, through
the apps' own services, so ``make run`` can be run again on the same database."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from ai_jobs import services as jobs
from asynch import selectors as asynch_selectors
from asynch import services as asynch
from asynch.models import AsynchModel, Tenant
from delivery.services import devices
from learning import services as learning
from learning.models import KnowledgeBase

DEMO_TENANT = "demo"
DEMO_MODEL = "demo-chat"
DEMO_MODEL_KEY = "Authorization:Bearer sk-standin-demo"  # the stand-in takes any bearer key
# The demo learner's phone: with no APNs settings, make run's worker logs where each push
# to it would go (delivery's stand-in), so the quick start shows a job's whole trip.
DEMO_DEVICE_TOKEN = "de" * 32

# (knowledge point, description, attempts as (correct, score, seconds)): a learner who
# is sure of the basics and unsure of exceptions, so every job type has something to say.
DEMO_KNOWLEDGE_POINTS: tuple[tuple[str, str, tuple[tuple[bool, float, int], ...]], ...] = (
    ("Variables and types", "Names, int, float, str, bool", ((True, 95, 40), (True, 90, 35), (True, 100, 30))),
    ("Loops", "for, while, range, break and continue", ((True, 80, 60), (False, 40, 90), (True, 85, 50))),
    ("Functions", "def, arguments, return values, scope", ((False, 55, 120), (True, 75, 80))),
    ("Lists and dictionaries", "Indexing, slicing, methods, iteration", ((True, 70, 70), (False, 45, 100))),
    ("Exceptions", "try, except, finally, raising your own", ((False, 20, 150), (False, 35, 130))),
)


@dataclass(frozen=True)
class DemoLearner:
    user: AbstractBaseUser
    knowledge_base: KnowledgeBase


def operator_ensure(*, username: str, password: str) -> AbstractBaseUser:
    """The admin's superuser; an existing one keeps its password. It may try jobs out
    too, so it has opted in to AI analysis (off by default)."""
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User.objects.create_superuser(username=username, email="", password=password)
    jobs.ai_settings_update(user=user, ai_analysis_enabled=True)
    return user


@transaction.atomic
def demo_learner_ensure(*, username: str, password: str) -> DemoLearner:
    """The demo learner, with AI analysis on (the quick start's jobs need the consent a
    new account does not give by default) and, the first time, its knowledge base."""
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User.objects.create_user(username=username, email="", password=password)
    jobs.ai_settings_update(user=user, ai_analysis_enabled=True)
    knowledge_base = KnowledgeBase.objects.filter(user=user).order_by("created_at").first()
    if knowledge_base is None:
        knowledge_base = _demo_knowledge_base(user)
    devices.device_register(user_id=user.pk, platform="ios", token=DEMO_DEVICE_TOKEN, locale="zh-Hans-CN")
    return DemoLearner(user=user, knowledge_base=knowledge_base)


def _demo_knowledge_base(user: AbstractBaseUser) -> KnowledgeBase:
    knowledge_base = learning.knowledge_base_create(
        user=user, name="Python basics", description="A first course in Python, two weeks in"
    )
    learning.material_create(
        user=user,
        knowledge_base_id=knowledge_base.id,
        title="Handling errors",
        content="An exception stops the program unless a try/except block catches it. "
        "Catch the narrowest exception you can; use finally for clean-up that must always run.",
    )
    studied_at = timezone.now() - dt.timedelta(days=6)
    for name, description, attempts in DEMO_KNOWLEDGE_POINTS:
        point = learning.knowledge_point_create(
            user=user, knowledge_base_id=knowledge_base.id, name=name, description=description
        )
        for is_correct, score, seconds in attempts:
            studied_at += dt.timedelta(hours=9)
            learning.study_record_create(
                user=user,
                knowledge_point_id=point.id,
                is_correct=is_correct,
                score=score,
                duration_seconds=seconds,
                studied_at=studied_at,
            )
    return knowledge_base


def demo_tenant_ensure(*, key: str) -> Tenant:
    """The demo tenant, an admin one (it may manage model configs), holding ``key``."""
    tenant = asynch.tenant_ensure(name=DEMO_TENANT, is_admin=True)
    asynch.tenant_key_ensure(tenant=tenant, key=key)
    return tenant


def demo_model_ensure(*, standin_url: str) -> AsynchModel:
    """The demo model config: the stand-in's chat completions, whatever port it is on now."""
    fields = {"base_url": standin_url.rstrip("/"), "route": "/chat/completions", "http_method": "POST"}
    if asynch_selectors.model_get(model_name=DEMO_MODEL) is not None:
        # The stand-in's port may be new: a new port takes its key with it.
        return asynch.model_update(model_name=DEMO_MODEL, api_key=DEMO_MODEL_KEY, **fields)
    return asynch.model_create(
        model_name=DEMO_MODEL,
        api_key=DEMO_MODEL_KEY,
        max_concurrency=2,
        queue_limit=20,
        timeout_seconds=60,
        retry_times=1,
        retry_queue_max_seconds=0,
        auto_clean_seconds=3600,
        remark="make run's demo: the local stand-in model (DeepSeek's chat API), not DeepSeek",
        **fields,
    )
