"""Outputs and notices name their job by a plain ``job_id`` instead of a foreign key
with CASCADE, so retention can delete a finished job and leave the user's outputs
(contract §9). The column, its values and its indexes stay as they are: only the
foreign key constraint is dropped (the first step), the rest is Django's state."""

import django.db.models.deletion
from django.db import migrations, models

JOB_LINKED = [
    "ailearninganalysis",
    "weakpointcandidate",
    "nextactionrecommendation",
    "quizquestion",
    "quizquestioncandidate",
    "flashcard",
    "flashcardcandidate",
    "notification",
]
CONSTRAINTS = {
    "ailearninganalysis": ("ai_analysis_one_per_job", ("job",), ("job_id",)),
    "notification": ("ai_notification_once", ("job", "kind"), ("job_id", "kind")),
}


def _drop_constraint(model_name):
    # The FK stays in the state for one step with db_constraint=False: the schema
    # editor drops the constraint and keeps the column and its index.
    return migrations.AlterField(
        model_name=model_name,
        name="job",
        field=models.ForeignKey(
            db_constraint=False,
            on_delete=django.db.models.deletion.DO_NOTHING,
            related_name="+",
            to="ai_jobs.airuntimejob",
        ),
    )


def _to_plain_value(model_name):
    state = []
    if model_name in CONSTRAINTS:
        name, _, _ = CONSTRAINTS[model_name]
        state.append(migrations.RemoveConstraint(model_name=model_name, name=name))
    state += [
        migrations.RemoveField(model_name=model_name, name="job"),
        migrations.AddField(
            model_name=model_name,
            name="job_id",
            field=models.CharField(db_index=True, max_length=40, default=""),
            preserve_default=False,
        ),
    ]
    if model_name in CONSTRAINTS:
        name, _, fields = CONSTRAINTS[model_name]
        state.append(
            migrations.AddConstraint(model_name=model_name, constraint=models.UniqueConstraint(fields=fields, name=name))
        )
    # Same column (job_id varchar(40)), same index names: nothing to do in the database.
    return migrations.SeparateDatabaseAndState(state_operations=state, database_operations=[])


class Migration(migrations.Migration):
    dependencies = [
        ("ai_jobs", "0005_job_type_from_the_registry"),
    ]

    operations = [_drop_constraint(name) for name in JOB_LINKED] + [_to_plain_value(name) for name in JOB_LINKED]
