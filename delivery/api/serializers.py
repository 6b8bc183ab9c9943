"""The bodies of /ai/devices (contract 11.1). A device's token is written, never read."""

from __future__ import annotations

from rest_framework import serializers

from delivery.models import Platform


class DeviceRegisterSerializer(serializers.Serializer):
    platform = serializers.ChoiceField(choices=Platform.choices, help_text="ios (APNs) or android (FCM)")
    # Checked by the service (contract 11.1's rules per platform); bounded here.
    token = serializers.CharField(
        max_length=4096, trim_whitespace=False, write_only=True,
        help_text="The device's APNs token (64 to 200 hexadecimal characters) or FCM registration token "
        "(1 to 4096 characters of [A-Za-z0-9_:.-]); never returned",
    )  # fmt: skip
    # Their bounds are the service's, checked with the token's rules so that every bad field is named at once.
    locale = serializers.CharField(
        required=False, help_text="The device's language, a BCP 47 tag of at most 35 characters (default en)"
    )
    appVersion = serializers.CharField(
        required=False, allow_blank=True, help_text="The app's version, as the app names it (at most 64 characters)"
    )


class DeviceSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The device's id (dev_...)")
    platform = serializers.ChoiceField(choices=Platform.choices, help_text="ios or android")
    tokenSuffix = serializers.CharField(
        source="token_suffix", help_text="The token's last 6 characters; the token itself is never returned"
    )
    locale = serializers.CharField(help_text="The language its pushes speak (BCP 47)")
    appVersion = serializers.CharField(source="app_version", help_text="The app's version it registered with")
    enabled = serializers.BooleanField(
        help_text="False once APNs or FCM said the token is dead; registering it again enables it"
    )
    createdAt = serializers.DateTimeField(source="created_at", help_text="When the token was first registered")
    lastPushAt = serializers.DateTimeField(
        source="last_push_at", allow_null=True, help_text="When a push last reached it (null: never)"
    )
