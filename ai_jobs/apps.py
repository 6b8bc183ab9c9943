from django.apps import AppConfig


class AiJobsConfig(AppConfig):
    name = "ai_jobs"
    verbose_name = "AI runtime jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The outbox asks, as each push is sent, whether the user consents and what their badge is.
        from ai_jobs.notifications import push_recipient
        from delivery.services import push

        push.recipient_lookup_set(push_recipient)
