"""``python manage.py create_tenant_key <tenant> [--admin]``: a new X-Api-Key, printed once."""

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from asynch import services


class Command(BaseCommand):
    help = "Create an X-Api-Key for a model-asynch tenant (the tenant too, if new). The key is printed once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="tenant name")
        parser.add_argument("--admin", action="store_true", help="mark the tenant admin (may manage model configs)")

    def handle(self, *args: object, tenant: str, admin: bool, **options: object) -> None:
        with transaction.atomic():
            found = services.tenant_ensure(name=tenant, is_admin=admin)
            issued = services.tenant_key_create(tenant=found)
        if found.is_admin:
            role = "an admin tenant: it may manage model configs (/model/*) and read every tenant's statistics"
        else:
            role = (
                "not an admin: it may create and fetch its own tasks and list the enabled models (--admin makes it one)"
            )
        self.stderr.write(f"Tenant {found.name} ({found.id}), {role}.\nIts new X-Api-Key, shown only now:")
        self.stdout.write(issued.key)
