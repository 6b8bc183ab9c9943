import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def record_earlier_reruns(apps, schema_editor):
    """A job rerun before this column existed names its first rerun, so it is not rerun again."""
    Job = apps.get_model("ai_jobs", "AiRuntimeJob")
    first_rerun = Job.objects.filter(retried_from_job=OuterRef("pk")).order_by("created_at", "id").values("pk")[:1]
    Job.objects.filter(pk__in=Job.objects.filter(retried_from_job__isnull=False).values("retried_from_job")).update(
        rerun_as=Subquery(first_rerun)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("ai_jobs", "0008_user_targets_by_public_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="airuntimejob",
            name="rerun_as",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="ai_jobs.airuntimejob",
            ),
        ),
        migrations.RunPython(record_earlier_reruns, migrations.RunPython.noop),
        migrations.AlterModelOptions(name="aiinvocationlog", options={"verbose_name": "AI invocation log"}),
        migrations.AlterModelOptions(name="aijobsnapshot", options={"verbose_name": "AI job snapshot"}),
        migrations.AlterModelOptions(name="airuntimejob", options={"verbose_name": "AI runtime job"}),
        migrations.AlterModelOptions(name="airuntimeresult", options={"verbose_name": "AI runtime result"}),
    ]
