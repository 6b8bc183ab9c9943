"""A user on the wire is their opaque public id (contract §2): the ``targetId`` of the
``user`` targets stored before it was the integer key; it becomes the public id, and
stored snapshots lose the username (they are pseudonymous)."""

from django.conf import settings
from django.db import migrations

import config.ids

TABLES = [
    "ai_runtime_job",
    "ai_job_snapshot",
    "ai_learning_analysis",
    "ai_weak_point_candidate",
    "ai_next_action_recommendation",
    "ai_quiz_question",
    "ai_quiz_question_candidate",
    "ai_flashcard",
    "ai_flashcard_candidate",
    "ai_notification",
]
PUBLIC_ID = "(SELECT a.public_id FROM accounts_account a WHERE a.user_id = {table}.user_id)"
BATCH = 500


def forwards(apps, schema_editor):
    # Users made since accounts' own backfill without its post_save (raw SQL) get their id first.
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    Account = apps.get_model("accounts", "Account")
    for pk, joined in User.objects.filter(account__isnull=True).values_list("pk", "date_joined").iterator():
        Account.objects.get_or_create(
            user_id=pk, defaults={"public_id": config.ids.new_id("usr", at_ms=int(joined.timestamp() * 1000))}
        )
    for table in TABLES:
        schema_editor.execute(
            f"UPDATE {table} SET target_id = {PUBLIC_ID.format(table=table)} "
            f"WHERE target_type = 'user' AND target_id = CAST(user_id AS TEXT)"
        )
    table = "ai_next_action_recommendation"
    schema_editor.execute(
        f"UPDATE {table} SET action_target_id = {PUBLIC_ID.format(table=table)} "
        f"WHERE action_target_type = 'user' AND action_target_id = CAST(user_id AS TEXT)"
    )
    Snapshot = apps.get_model("ai_jobs", "AiJobSnapshot")
    last = ""
    while True:
        batch = list(Snapshot.objects.filter(id__gt=last).order_by("id")[:BATCH])
        if not batch:
            return
        public = dict(Account.objects.filter(user_id__in={s.user_id for s in batch}).values_list("user_id", "public_id"))
        for snapshot in batch:
            payload = snapshot.payload if isinstance(snapshot.payload, dict) else {}
            public_id = public.get(snapshot.user_id)
            if "learner" not in payload or public_id is None:
                continue
            payload["learner"] = {"userId": public_id}
            target = payload.get("target") or {}
            if target.get("type") == "user" and target.get("id") == str(snapshot.user_id):
                target["id"] = public_id
            Snapshot.objects.filter(id=snapshot.id).update(payload=payload)
        last = batch[-1].id


class Migration(migrations.Migration):
    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("accounts", "0001_initial"),
        ("ai_jobs", "0007_retention"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
