"""Django admin's JSON takes the API's rules: a learning profile's ``preferences``
edited by an operator, too deep (past the interpreter's stack too) or with a NUL or a
lone surrogate in a string, is a form error on the field, never a 500 and never
stored; JSON the API would take is saved. Every admin page that edits JSON uses
the field that does so."""

from __future__ import annotations

import pytest
from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory

from config import jsondepth
from config.parsers import StorableJSONFormField
from learning.models import LearningProfile
from tests.support.factories import UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.embedded]

ADD = "/admin/learning/learningprofile/add/"


@pytest.fixture
def operator() -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(get_user_model().objects.create_superuser("operator", "op@example.com", "pw"))
    return client


def _post(operator: Client, preferences: str):  # type: ignore[no-untyped-def]
    learner = UserFactory()
    form = {"user": str(learner.pk), "goals": "", "level": "", "preferred_study_time": "", "_save": "Save"}
    return learner, operator.post(ADD, {**form, "preferences": preferences})


@pytest.mark.parametrize(
    ("preferences", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, jsondepth.TOO_DEEP),  # deeper than the interpreter's stack
        ("[" * 65 + "]" * 65, jsondepth.TOO_DEEP),
        ('{"a": "\\u0000"}', "Text must not contain NUL characters."),
        ('{"a": "\\ud800"}', "Text must be valid Unicode (no lone surrogates)."),
        ('{"\\u0000": 1}', "Text must not contain NUL characters."),
    ],
    ids=["past-the-stack", "65-levels", "nul", "lone-surrogate", "nul-in-a-key"],
)
def test_json_the_api_refuses_is_a_form_error_in_admin(operator: Client, preferences: str, message: str):
    learner, page = _post(operator, preferences)
    assert page.status_code == 200, page.status_code  # the form again, with its error
    assert page.context["adminform"].form.errors["preferences"] == [message]
    assert not LearningProfile.objects.filter(user=learner).exists()


def test_json_the_api_takes_is_saved_from_admin(operator: Client):
    levels = "[" * 63 + "]" * 63  # 64 levels with the object around them
    learner, page = _post(operator, '{"pace": "slow", "deep": ' + levels + "}")
    assert page.status_code == 302
    assert LearningProfile.objects.get(user=learner).preferences["pace"] == "slow"


def test_every_json_field_an_admin_page_edits_takes_the_apis_rules():
    request = RequestFactory().get("/admin/")
    request.user = get_user_model().objects.create_superuser("operator", "op@example.com", "pw")
    edited = []
    for model, model_admin in admin.site._registry.items():
        for obj in (None, model()):  # the add page and a change page
            if not (model_admin.has_change_permission(request, obj) or model_admin.has_add_permission(request)):
                continue
            form = model_admin.get_form(request, obj)
            for name, field in form.base_fields.items():
                if isinstance(field, forms.JSONField):
                    edited.append(f"{model.__name__}.{name}")
                    assert isinstance(field, StorableJSONFormField), f"{model.__name__}.{name}"
    assert "LearningProfile.preferences" in edited
