"""Deleting a user deletes everything of theirs, in the admin or with the
ORM: a learner with one of everything is deleted, then EVERY model of every installed
app is walked, generically, so a model added later is covered without touching this
test:

- every row made while the learner's data was made is gone, unless its model is one
  of ``NOT_A_USERS``, the platform's own tables, which must then hold nothing that
  names the learner;
- every model that is not one of ``NOT_A_USERS`` got a row of the learner's (one of
  everything: a new model that holds users' data fails here until the learner has a
  row of it);
- no row left anywhere points at the learner through a foreign key, or carries their
  username, email or the id of anything of theirs in a text or JSON value;
- another learner's rows are untouched.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import models
from django.test import Client

from tests.support.retention import learner_with_everything

pytestmark = pytest.mark.django_db

# Tables that hold no user's data: the platform's day, breaker and operations, model-asynch's
# tenants (business services, not users), and Django's own registries.
NOT_A_USERS = {
    "quotas.PlatformDailyUsage",
    "quotas.PlatformCircuitBreaker",
    "quotas.CircuitBreakerEvent",
    "ai_jobs.QueueSample",
    "ai_jobs.RuntimeInstance",
    "asynch.Tenant",
    "asynch.TenantApiKey",
    "asynch.AsynchModel",
    "asynch.AsynchTask",
    "asynch.AsynchTaskAnswer",
    "asynch.AsynchModelStat",
    "contenttypes.ContentType",
    "auth.Permission",
    "auth.Group",
    "auth.Group_permissions",
    "sessions.Session",
    "admin.LogEntry",  # the operators' own log
    "quotas.ThrottleWindow",  # a minute's request count under a hash of who sent them, gone after the minute
    "ai_jobs.JobTypePause",  # an operator's pause of a kind of work
    "ai_jobs.BulkOperation",  # an operator's bulk operation: the filter and its counts
    "delivery.WebhookEndpoint",  # a tenant's (a business service's), not a user's
}


def every_model() -> Iterator[type[models.Model]]:
    yield from apps.get_models(include_auto_created=True)


def all_rows() -> dict[str, set[Any]]:
    return {model._meta.label: set(model._base_manager.values_list("pk", flat=True)) for model in every_model()}


def texts(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def traces_of(user_pk: int, markers: set[str]) -> list[str]:
    """Every value left in any row of any model that names the user: a foreign key to
    them, or one of ``markers`` (their username, email, their objects' ids) in a
    string or JSON field."""
    user_model = get_user_model()
    found = []
    for model in every_model():
        fields = [f for f in model._meta.concrete_fields]
        user_keys = [f.attname for f in fields if f.is_relation and f.related_model is user_model]
        text_fields = [
            f.attname for f in fields if isinstance(f, models.CharField | models.TextField | models.JSONField)
        ]
        for row in model._base_manager.values("pk", *user_keys, *text_fields):
            for key in user_keys:
                if row[key] == user_pk:
                    found.append(f"{model._meta.label} {row['pk']}: {key} = the user")
            for key in text_fields:
                value = row[key]
                if value is None:
                    continue
                text = texts(value)
                for marker in markers:
                    if marker in text:
                        found.append(f"{model._meta.label} {row['pk']}: {key} names {marker!r}")
    return found


def deletion_log_entries() -> list[LogEntry]:
    return list(LogEntry.objects.filter(action_flag=DELETION))


@pytest.fixture
def bystander(runtime):
    return learner_with_everything(runtime, tag="bystander", username="bystander-learner")


def delete_in_admin(user) -> None:
    admin = get_user_model().objects.create_superuser("operator", "op@example.com", "pw-123456")
    client = Client()
    client.force_login(admin)
    response = client.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302, response.content[:2000]


def delete_with_the_orm(user) -> None:
    user.delete()


@pytest.mark.parametrize("delete", [delete_in_admin, delete_with_the_orm], ids=["admin", "orm"])
def test_deleting_a_user_leaves_no_row_of_theirs_in_any_table(runtime, bystander, delete):
    before = all_rows()
    doomed = learner_with_everything(
        runtime, tag="doomed", username="doomed-learner-7f3a", email="doomed-7f3a@example.com"
    )
    user = doomed.user
    group = Group.objects.create(name="learners-7f3a")
    user.groups.add(group)
    user.user_permissions.add(Permission.objects.get(codename="view_knowledgebase"))
    during = all_rows()
    theirs = {label: during[label] - before.get(label, set()) for label in during}

    missing = sorted(label for label, rows in theirs.items() if not rows and label not in NOT_A_USERS)
    assert missing == [], f"models that hold users' data but the learner has no row of: {missing}"

    markers = {user.username, user.email} | {
        pk for label, rows in theirs.items() if label not in NOT_A_USERS for pk in rows if isinstance(pk, str)
    }
    bystander_rows = {label: rows for label, rows in before.items() if label not in NOT_A_USERS}

    delete(user)

    after = all_rows()
    left = {label: sorted(rows & after[label]) for label, rows in theirs.items() if label not in NOT_A_USERS}
    assert {label: rows for label, rows in left.items() if rows} == {}
    assert traces_of(user.pk, markers) == []
    for label, rows in bystander_rows.items():
        assert rows <= after[label], f"{label}: another learner's rows went too"
    if delete is delete_in_admin:  # the operator's record says which account went, not whose
        (entry,) = deletion_log_entries()
        assert entry.user.username == "operator" and entry.object_repr == f"user #{user.pk}"
