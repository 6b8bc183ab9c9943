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

        keyring.register_column(
            keyring.TextColumn(
                name="model configs' apiKey headers",
                noun="model config",
                model=AsynchModel,
                field="api_key_encrypted",
                context=CONTEXT,
            )
        )
        keyring.register_column(
            keyring.TextColumn(
                name="tasks' forwarded headers",
                noun="task",
                model=AsynchTask,
                field="forward_headers_encrypted",
                context=CONTEXT,
            )
        )
