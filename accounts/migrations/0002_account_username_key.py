"""The key, empty for now, and indexed so that the backfill (0003) finds a taken
key quickly; 0004 makes it unique."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="account",
            name="username_key",
            field=models.TextField(db_index=True, editable=False, null=True),
        ),
    ]
