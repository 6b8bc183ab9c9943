from django.apps import AppConfig


class AiJobsConfig(AppConfig):
    name = "ai_jobs"
    verbose_name = "AI runtime jobs"
    default_auto_field = "django.db.models.BigAutoField"
