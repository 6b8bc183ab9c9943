from django.apps import AppConfig


class LearningConfig(AppConfig):
    name = "learning"
    verbose_name = "Learning data"
    default_auto_field = "django.db.models.BigAutoField"
