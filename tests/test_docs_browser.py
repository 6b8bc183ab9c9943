"""The built manual works where it is opened: ``var/site/index.html`` from disk, in
Chromium, with no server and no network, navigates and searches (the offline plugin, its
worker shim carried by the site). The screenshot is left in ``var/artifacts/``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import ARTIFACTS, browser_fixture  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``make docs`` builds it (its own folder here, so a test never races a build)."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [str(Path(sys.executable).with_name("mkdocs")), "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=180, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def test_the_site_opened_from_disk_navigates_and_searches_with_no_network(site: Path, browser: Any):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    asked: list[str] = []
    context.route("**/*", lambda route: (asked.append(route.request.url), route.continue_())[1])
    page = context.new_page()
    page.goto((site / "index.html").as_uri())
    page.get_by_role("link", name="Getting started").first.click()
    page.wait_for_load_state()
    assert page.url == (site / "getting-started.html").as_uri()
    assert page.locator("h1").first.inner_text().startswith("Getting started")

    page.goto((site / "index.html").as_uri())
    page.locator("input[data-md-component=search-query]").click()
    page.keyboard.type("notifications")
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=15000)
    titles = page.locator(".md-search-result__article h1").all_inner_texts()
    assert "For mobile developers" in titles, titles
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "docs-search-from-disk.png"))
    page.locator(".md-search-result__link", has_text="For mobile developers").first.click()
    page.wait_for_load_state()
    assert page.url.startswith((site / "api" / "mobile.html").as_uri())
    context.close()
    assert asked and [url for url in asked if not url.startswith("file://")] == []
