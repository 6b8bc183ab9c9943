from django.apps import AppConfig


class AsynchConfig(AppConfig):
    name = "asynch"
    verbose_name = "model-asynch"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The encrypted columns, for rotate_encryption_keys.
        from asynch.crypto import CONTEXT
        from asynch.models import AsynchModel, AsynchTask
        from config import keyring

        for name, noun, model, field in (
            ("model configs' apiKey headers", "model config", AsynchModel, "api_key_encrypted"),
            ("tasks' forwarded headers", "task", AsynchTask, "forward_headers_encrypted"),
        ):
            keyring.register_column(keyring.TextColumn(name=name, noun=noun, model=model, field=field, context=CONTEXT))
