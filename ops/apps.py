from django.apps import AppConfig
from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "operations"

    def ready(self) -> None:
        from ops import checks  # noqa: F401  (registers the deploy checks)
        from ops.services import user_deleted

        post_delete.connect(user_deleted, sender=get_user_model(), dispatch_uid="ops.user_deleted")
