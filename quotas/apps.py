from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "Quotas and platform protection"
    default_auto_field = "django.db.models.BigAutoField"
