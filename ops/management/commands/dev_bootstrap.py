"""For ``make run`` only: the operator, the demo learner and tenant (``ops.demo``), and
a summary with the quick start (``ops.quickstart``), printed once before the processes start."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from learning.models import KnowledgePoint, StudyRecord
from ops import demo, quickstart


class Command(BaseCommand):
    help = "Create make run's operator, demo learner and demo tenant if missing, and print the quick start."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin", help="the operator (a superuser)")
        parser.add_argument("--password", default="admin")
        parser.add_argument("--demo-username", default="demo", help="the demo learner")
        parser.add_argument("--demo-password", default="demo")
        parser.add_argument("--tenant-key", default=quickstart.DEFAULT_TENANT_KEY, help="the demo tenant's X-Api-Key")
        parser.add_argument("--standin-url", default="", help="the local stand-in model, when make run starts one")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: object, **options: str) -> None:
        if not settings.DEBUG:  # its accounts' passwords and the tenant's key are public
            raise CommandError(
                "dev_bootstrap makes accounts with known passwords and a known tenant key: it runs only "
                "with DEBUG=true (make run sets it), never in production."
            )
        demo.operator_ensure(username=options["username"], password=options["password"])
        learner = demo.demo_learner_ensure(username=options["demo_username"], password=options["demo_password"])
        demo.demo_tenant_ensure(key=options["tenant_key"])
        standin = options["standin_url"]
        if standin:
            demo.demo_model_ensure(standin_url=standin)
        api = f"http://127.0.0.1:{options['port']}"
        points = KnowledgePoint.objects.filter(knowledge_base=learner.knowledge_base).count()
        records = StudyRecord.objects.filter(knowledge_point__knowledge_base=learner.knowledge_base).count()
        lines = [
            "",
            "AI job platform, embedded setup (SQLite, no Redis, file-based Celery broker)",
            f"  API docs:  {api}/api/docs   (schema: {api}/api/schema)",
            f"  Admin:     {api}/admin/   operator '{options['username']}', password '{options['password']}'",
            f"  Learner:   '{options['demo_username']}', password '{options['demo_password']}': AI analysis on, "
            f"knowledge base '{learner.knowledge_base.name}' ({points} knowledge points, {records} study records)",
            f"  Tenant:    '{demo.DEMO_TENANT}' (admin), X-Api-Key {options['tenant_key']}"
            + (f"; model config '{demo.DEMO_MODEL}' calls {standin}" if standin else ""),
            "  Pushes:    the demo learner's phone (iOS, zh-Hans) is registered; "
            + (
                "APNs is configured"
                if settings.APNS_KEY_FILE
                else "no APNs settings: the worker logs where each push would go ('push stand-in')"
            ),
            f"  Database:  {settings.DATABASES['default']['NAME']}",
        ]
        if not any(entry.strip() for entry in settings.CREDENTIAL_ENCRYPTION_KEYS):
            lines.append(
                "  Keys:      CREDENTIAL_ENCRYPTION_KEYS is not set: secrets at rest use a development key "
                "derived from SECRET_KEY"
            )
        values = {
            "api": api,
            "learner": options["demo_username"],
            "password": options["demo_password"],
            "tenant_key": options["tenant_key"],
        }
        lines += ["", "Quick start (paste into a shell; it needs curl and jq):", ""]
        lines.append(quickstart.render("learner", **values))
        if standin:
            lines += ["And a model-asynch task's trip, as the demo tenant:", ""]
            lines.append(quickstart.render("model_asynch", **values))
        else:
            lines.append(
                f"model-asynch: no stand-in runs, so no demo model config; create one with POST {api}/model/createModel"
                " (docs/api/model-asynch.md)."
            )
        lines += ["An account of your own (registration is on under make run):", ""]
        lines.append(quickstart.render("account", **values))
        self.stdout.write("\n".join(lines))
