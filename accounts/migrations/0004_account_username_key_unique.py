from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("accounts", "0003_backfill_username_key")]

    operations = [
        migrations.AlterField(
            model_name="account",
            name="username_key",
            field=models.TextField(editable=False, null=True, unique=True),
        ),
    ]
