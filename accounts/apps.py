from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save, pre_delete, pre_save

        from accounts import services

        user_model = get_user_model()
        # However a user is made or changed (registration, the admin, createsuperuser,
        # a test's factory): its username is stored normalized, it gets a public id and
        # a username key the moment it exists, and its refresh tokens go with it.
        pre_save.connect(services.user_on_saving, sender=user_model, dispatch_uid="accounts.username")
        post_save.connect(services.account_on_user_saved, sender=user_model, dispatch_uid="accounts.public_id")
        pre_delete.connect(services.tokens_on_user_deleting, sender=user_model, dispatch_uid="accounts.tokens")
