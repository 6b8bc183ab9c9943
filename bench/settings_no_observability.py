"""The project's settings without the observability middleware: the baseline of
``bench_metrics``'s CPU-per-request comparison."""

from config.settings import *  # noqa: F403
from config.settings import MIDDLEWARE

MIDDLEWARE = [name for name in MIDDLEWARE if not name.startswith("config.observability.")]
