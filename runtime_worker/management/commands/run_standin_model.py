"""Serve the local stand-in for DeepSeek's chat-completions API."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from runtime_worker.standin import StandinServer


class Command(BaseCommand):
    help = "Serve a local stand-in for DeepSeek's API (POST /chat/completions, GET /models) with fault injection."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8300)

    def handle(self, *args: object, host: str, port: int, **options: object) -> None:
        server = StandinServer(host, port)
        self.stdout.write(
            f"Stand-in model at {server.base_url}: answers come from a local stand-in, NOT from DeepSeek. "
            f"Faults: POST {server.base_url}/_standin/faults",
        )
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
