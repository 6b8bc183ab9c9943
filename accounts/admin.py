"""Django admin's user pages under the same rule as registration (``accounts.usernames``):
a username is stored normalized, and a staff member can neither add ``ALICE`` beside
``alice`` nor rename another user to it. Everything else is Django's ``UserAdmin``
(``ops.admin`` builds on this one)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm, UsernameField
from django.core.exceptions import ValidationError
from django.forms import ModelForm

from accounts.selectors import username_taken
from accounts.usernames import username_normalize


class NormalizedUsernameField(UsernameField):
    def to_python(self, value: Any) -> Any:
        value = super().to_python(value)
        if not value or (self.max_length is not None and len(value) > self.max_length):
            return value  # too long: refused as it is, never normalized (Django's reason)
        return username_normalize(value)


def _clean_username(form: ModelForm) -> str | None:
    username = form.cleaned_data.get("username")
    if username and username_taken(username, other_than=form.instance.pk):
        raise ValidationError(form.instance.unique_error_message(get_user_model(), ["username"]))
    return username


class AccountUserCreationForm(AdminUserCreationForm):
    class Meta(AdminUserCreationForm.Meta):
        field_classes = {"username": NormalizedUsernameField}

    def clean_username(self) -> str | None:
        if super().clean_username() is None:  # Django's own check (iexact) said so already
            return None
        return _clean_username(self)


class AccountUserChangeForm(UserChangeForm):
    class Meta(UserChangeForm.Meta):
        field_classes = {"username": NormalizedUsernameField}

    def clean_username(self) -> str | None:
        return _clean_username(self)


class AccountUserAdmin(UserAdmin):
    form = AccountUserChangeForm
    add_form = AccountUserCreationForm


_User = get_user_model()
if admin.site.is_registered(_User) and type(admin.site.get_model_admin(_User)) is UserAdmin:
    admin.site.unregister(_User)
    admin.site.register(_User, AccountUserAdmin)
