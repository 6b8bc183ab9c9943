from django.apps import AppConfig


class DeliveryConfig(AppConfig):
    name = "delivery"
    verbose_name = "Deliveries: pushes and webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The push senders register themselves with the outbox (``outbox.sender_register``).
        pass
