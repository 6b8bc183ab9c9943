"""The project's settings plus a bench-only URL: the baseline views live here,
never in the product's URLconf."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
