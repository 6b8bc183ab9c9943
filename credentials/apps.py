from django.apps import AppConfig


class CredentialsConfig(AppConfig):
    name = "credentials"
    verbose_name = "Model credentials"
    default_auto_field = "django.db.models.BigAutoField"
