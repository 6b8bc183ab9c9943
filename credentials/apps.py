from django.apps import AppConfig


class CredentialsConfig(AppConfig):
    name = "credentials"
    verbose_name = "Model credentials"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from config import keyring
        from credentials import checks  # noqa: F401  (registers the system checks)
        from credentials.services import CREDENTIAL_KEYS

        keyring.register_column(CREDENTIAL_KEYS)
