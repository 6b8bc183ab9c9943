"""A real browser for the tests that drive the admin and the dashboard: Debian's
chromium through Playwright, headless; screenshots go to ``var/artifacts/``."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from django.db import connections

from tests.support.runtime_fixtures import ROOT

ARTIFACTS = ROOT / "var" / "artifacts"  # screenshots
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


@pytest.fixture(name="browser")
def browser_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    # Playwright's sync API keeps an event loop on this thread; the ORM calls here are
    # the test's own set-up, made between browser steps, never from inside that loop.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    if not shutil.which("chromium"):
        pytest.fail("Debian's chromium is not installed (make test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()
        # While Playwright's loop is marked running, Django keeps this thread's connections
        # per context rather than per thread: close them here, or they outlive the test.
        connections.close_all()
