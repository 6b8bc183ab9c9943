from django.apps import AppConfig


class RuntimeWorkerConfig(AppConfig):
    name = "runtime_worker"
    verbose_name = "Reference runtime"
    default_auto_field = "django.db.models.BigAutoField"
