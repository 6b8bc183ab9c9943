from django.apps import AppConfig


class LearningConfig(AppConfig):
    name = "learning"
    verbose_name = "Learning data"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The snapshot builders for the four target types (learning/SNAPSHOT.md).
        from learning.snapshots import register_builders

        register_builders()
