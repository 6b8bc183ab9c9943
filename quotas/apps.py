from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotas"
    verbose_name = "Quotas and platform protection"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from config import auth_failures
        from quotas.throttles import DatabaseWindows

        # Without Redis, wrong credentials are counted where every web process sees them.
        auth_failures.share_counts_with(DatabaseWindows())
