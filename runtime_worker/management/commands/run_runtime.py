"""``manage.py run_runtime``: the reference runtime (``python -m runtime_worker``) started
from the server's checkout, for ``make run``. A thin wrapper: the runtime reads its
``RUNTIME_*`` variables from the environment as the program does, never Django's settings."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime_worker import program
from runtime_worker.config import RuntimeConfigError


class Command(BaseCommand):
    help = "Claim AI jobs over the internal API and run them against the model (the reference runtime)."

    def add_arguments(self, parser: CommandParser) -> None:
        for action in program.parser()._actions:
            if action.option_strings and action.dest != "help":
                parser.add_argument(
                    *action.option_strings, dest=action.dest, type=action.type, default=action.default, help=action.help
                )

    def handle(self, *args: object, **options: object) -> None:
        names = {action.dest for action in program.parser()._actions}
        arguments = program.argparse.Namespace(**{name: options.get(name) for name in names if name != "help"})
        try:
            config = program.checked(program.config_from(arguments))
        except (program.Refused, RuntimeConfigError) as error:
            raise CommandError(str(error)) from None
        program.run(config, configure_logging=False)
