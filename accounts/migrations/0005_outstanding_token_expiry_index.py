"""An index on simplejwt's ``token_blacklist_outstandingtoken.expires_at``, for the
retention that deletes expired tokens (``accounts.retention``) in bounded batches
from the oldest: the app's own tables have none. Its SQL is the same on PostgreSQL and
SQLite; the table is new with this release, so building it locks nothing for long."""

from django.db import migrations

INDEX = "accounts_outstanding_token_expires"


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0004_account_username_key_unique"),
        ("token_blacklist", "0013_alter_blacklistedtoken_options_and_more"),
    ]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON token_blacklist_outstandingtoken (expires_at)",
            f"DROP INDEX IF EXISTS {INDEX}",
        ),
    ]
