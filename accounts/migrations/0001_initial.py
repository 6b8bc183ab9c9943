import functools

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import config.ids

BATCH = 1000


def backfill(apps, schema_editor):
    """A public id for every user that existed before accounts, dated when they joined."""
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    Account = apps.get_model("accounts", "Account")
    last = 0
    while True:
        users = list(
            User.objects.filter(pk__gt=last, account__isnull=True).order_by("pk").values_list("pk", "date_joined")[:BATCH]
        )
        if not users:
            return
        Account.objects.bulk_create(
            [
                Account(user_id=pk, public_id=config.ids.new_id("usr", at_ms=int(joined.timestamp() * 1000)))
                for pk, joined in users
            ],
            ignore_conflicts=True,
        )
        last = users[-1][0]


class Migration(migrations.Migration):
    initial = True

    dependencies = [migrations.swappable_dependency(settings.AUTH_USER_MODEL)]

    operations = [
        migrations.CreateModel(
            name="Account",
            fields=[
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="account",
                        serialize=False,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "public_id",
                    models.CharField(
                        default=functools.partial(config.ids.new_id, "usr"), editable=False, max_length=40, unique=True
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={"db_table": "accounts_account"},
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
