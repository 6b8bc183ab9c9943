from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save

        from accounts import services

        # Every user gets a public id the moment it exists, however it was made
        # (registration, the admin, createsuperuser, a test's factory).
        post_save.connect(services.account_on_user_saved, sender=get_user_model(), dispatch_uid="accounts.public_id")
