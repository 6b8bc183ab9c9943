"""For ``make run`` only: make sure an admin exists and say where everything is."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from ai_jobs import services


class Command(BaseCommand):
    help = "Create the local admin account if missing and print the local URLs and credentials."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--password", default="admin")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: object, username: str, password: str, port: int, **options: object) -> None:
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            user = User.objects.create_superuser(username=username, email="", password=password)
        # AI analysis is opt-in (contract §4); the local account that tries jobs out has opted in.
        services.ai_settings_update(user=user, ai_analysis_enabled=True)
        base = f"http://127.0.0.1:{port}"
        lines = [
            "",
            "AI job platform, embedded setup (SQLite, no Redis, file-based Celery broker)",
            f"  API docs:  {base}/api/docs   (schema: {base}/api/schema)",
            f"  Admin:     {base}/admin/     user '{username}', password '{password}' (AI analysis on)",
            f"  Database:  {settings.DATABASES['default']['NAME']}",
        ]
        if not settings.PLATFORM_DEEPSEEK_API_KEY:
            lines.append(
                "  Model:     no PLATFORM_DEEPSEEK_API_KEY set: answers come from a local stand-in, not DeepSeek"
            )
        self.stdout.write("\n".join(lines) + "\n")
