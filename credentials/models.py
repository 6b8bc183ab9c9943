"""Users' own model keys (apiKeyMode = user_deepseek_key), AES-256-GCM at rest.

The clear key is never stored: only ``key_id``, ``nonce`` and ``ciphertext`` (see
``credentials.crypto``) and a mask such as ``sk-****abcd`` for people to recognise it.
Deletion is soft: the row stays for the jobs that name it, the ciphertext is wiped.
"""

from __future__ import annotations

from functools import partial

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from config.ids import new_id


class Provider(models.TextChoices):
    DEEPSEEK = "deepseek", "DeepSeek"


class CredentialStatus(models.TextChoices):
    ACTIVE = "active"  # usable; not known to be rejected
    INVALID = "invalid"  # the provider answered 401 to the last test
    DELETED = "deleted"


class Credential(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=partial(new_id, "cred"), editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="model_credentials")
    name = models.CharField(max_length=100)
    provider = models.CharField(max_length=32, choices=Provider.choices, default=Provider.DEEPSEEK)
    # Empty: the provider's configured URL (DEEPSEEK_BASE_URL). Users cannot set it,
    # so a key is only ever sent to the provider the operator configured.
    base_url = models.CharField(max_length=255, blank=True, default="")
    key_mask = models.CharField(max_length=32)
    status = models.CharField(max_length=16, choices=CredentialStatus.choices, default=CredentialStatus.ACTIVE)

    # The sealed key: which key encrypted it, the GCM nonce, the ciphertext with its tag.
    key_id = models.CharField(max_length=64, blank=True, default="")
    nonce = models.BinaryField(max_length=12, default=bytes)
    ciphertext = models.BinaryField(default=bytes)

    last_tested_at = models.DateTimeField(null=True, blank=True)
    last_test_ok = models.BooleanField(null=True, blank=True)
    last_test_http_status = models.IntegerField(null=True, blank=True)
    last_test_message = models.CharField(max_length=255, blank=True, default="")

    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "ai_model_credential"
        indexes = [
            models.Index(
                fields=["user", "-created_at", "-id"], name="cred_user_live", condition=Q(deleted_at__isnull=True)
            ),
            # Rotation walks the rows still sealed under a given key.
            models.Index(fields=["key_id", "id"], name="cred_key_id"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=CredentialStatus.values), name="cred_status_valid"),
            models.CheckConstraint(
                condition=Q(deleted_at__isnull=False) | ~Q(key_id=""), name="cred_live_rows_are_sealed"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.name} {self.key_mask}"

    @property
    def effective_base_url(self) -> str:
        return self.base_url or settings.DEEPSEEK_BASE_URL

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None
