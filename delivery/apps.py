from django.apps import AppConfig


class DeliveryConfig(AppConfig):
    name = "delivery"
    verbose_name = "Deliveries: pushes and webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The senders register themselves with the outbox (``outbox.sender_register``);
        # webhook secrets take part in every key rotation.
        from django.contrib.auth import get_user_model
        from django.db.models.signals import pre_delete

        from config import keyring
        from delivery.models import WebhookEndpoint
        from delivery.senders import push as _push  # noqa: F401
        from delivery.services import outbox, push, webhooks

        outbox.sender_register(webhooks.SENDER)
        for name, field in (
            ("webhook endpoints' secrets", "secret_encrypted"),
            ("webhook endpoints' previous secrets", "previous_secret_encrypted"),
        ):
            keyring.register_column(
                keyring.TextColumn(
                    name=name, noun="webhook endpoint", model=WebhookEndpoint, field=field,
                    context=webhooks.SECRET_CONTEXT,
                )
            )  # fmt: skip
        # A user's devices go by their foreign key; their pushes, which name them as a plain value, go here.
        pre_delete.connect(push.pushes_on_user_deleting, sender=get_user_model(), dispatch_uid="delivery.pushes")
