"""Every account's ``username_key`` (``accounts.usernames``), in batches from the
oldest account. Usernames that already normalize to one key (``alice`` and ``Alice``
made in the admin, say): the oldest account (the lowest user id) gets the key; each
younger one keeps its exact username, which still logs it in, and no key, until an
operator renames it. Nobody is renamed or locked out by the migration. Its own
migration, between adding the column and making it unique, so each step is its own
transaction; it sets only keys still empty, so it can run again."""

import importlib
import logging

from django.db import migrations

from accounts.usernames import username_key

BATCH = 1000

logger = logging.getLogger("accounts.migrations")


def backfill(apps, schema_editor):
    Account = apps.get_model("accounts", "Account")
    # Users made without their account (bulk_create) get one first, as 0001 gave them.
    importlib.import_module("accounts.migrations.0001_initial").backfill(apps, schema_editor)
    last = 0
    younger: list[int] = []
    while True:
        rows = list(
            Account.objects.filter(user_id__gt=last, username_key__isnull=True)
            .order_by("user_id")
            .values_list("user_id", "user__username")[:BATCH]
        )
        if not rows:
            break
        keys = {pk: username_key(name) for pk, name in rows}
        taken = set(Account.objects.filter(username_key__in=set(keys.values())).values_list("username_key", flat=True))
        keyed = []
        for pk, key in keys.items():
            if key in taken:
                younger.append(pk)
                continue
            taken.add(key)
            keyed.append(Account(user_id=pk, username_key=key))
        Account.objects.bulk_update(keyed, ["username_key"])
        last = rows[-1][0]
    if younger:
        logger.warning(
            "%d accounts share their username, in another case or spelling, with an older account: they keep "
            "their exact username to log in, without a username key, until renamed (user ids: %s)",
            len(younger),
            ", ".join(map(str, younger[:100])),
        )


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_account_username_key")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
