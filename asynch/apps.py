from django.apps import AppConfig


class AsynchConfig(AppConfig):
    name = "asynch"
    verbose_name = "model-asynch"
    default_auto_field = "django.db.models.BigAutoField"
