"""The documentation site (``mkdocs.yml``, ``docs/``) builds in strict mode, so a broken link
or anchor fails the suite; no page loads anything from the network; the alerts' runbook
anchors and the error codes' table are what the rules and ``config/errors.py`` say; the
README stays short, its links resolve, and nothing in the repository points outside it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from config.errors import ErrorCode, RuntimeErrorCode

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = Path(sys.executable).with_name("mkdocs")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def test_the_docs_build_in_strict_mode(site: Path):
    # A page is a file of its own (the offline plugin): the site works opened from disk.
    pages = {path.relative_to(site).as_posix() for path in site.rglob("*.html")}
    assert {"index.html", "api/errors.html", "operations/alerts.html", "benchmarks.html", "api/mobile.html"} <= pages
    assert (site / "search" / "search_index.js").read_text().startswith("var __index = ")


class _Loads(HTMLParser):
    """What a page makes the browser fetch: scripts, stylesheets and icons, images, frames."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed"):
            self.urls.append(found.get("src") or "")
        elif tag == "link" and found.get("rel") not in ("canonical", "next", "prev"):
            self.urls.append(found.get("href") or "")
        elif tag == "object":
            self.urls.append(found.get("data") or "")


def test_no_page_loads_anything_from_the_network(site: Path):
    remote = re.compile(r"^(https?:)?//", re.I)
    for page in site.rglob("*.html"):
        loads = _Loads()
        loads.feed(page.read_text())
        assert not [url for url in loads.urls if remote.match(url)], page
    for sheet in site.rglob("*.css"):
        assert not re.search(r"(@import|url\()\s*['\"]?(https?:)?//", sheet.read_text(), re.I), sheet


def test_every_alert_has_its_runbook_anchor_on_the_site(site: Path):
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    names = [rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    page = (site / "operations" / "alerts.html").read_text()
    assert names and [name for name in names if f'id="{name.lower()}"' not in page] == []


def _rows(page: str) -> set[tuple[str, ...]]:
    cells = re.findall(r"<tr>\s*<td><code>([A-Z_]+)</code></td>((?:\s*<td>[^<]*</td>)*)\s*</tr>", page)
    return {(code, *re.findall(r"<td>([^<]*)</td>", rest)) for code, rest in cells}


def test_the_error_tables_are_config_errors(site: Path):
    page = (site / "api" / "errors.html").read_text()
    flag = {True: "yes", False: "no"}
    expected = {(c.code, str(c.http_status), flag[c.retryable]) for c in ErrorCode}
    expected |= {(c.code, flag[c.retryable]) for c in RuntimeErrorCode}
    assert _rows(page) == expected


def test_the_readme_is_short_shows_the_two_commands_and_its_links_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 150
    assert "make run" in readme and "make test" in readme
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    assert links and [link for link in links if not (ROOT / link).is_file()] == []


# Built from pieces, so that this file does not name them itself.
_OUTSIDE = re.compile(
    "|".join(re.escape(piece) for piece in ("../" + "shared", "shared/" + "spec", "shared/" + "seeds"))
)
_SKIPPED = {".git", "var", "node_modules", "__pycache__", ".pytest_cache", ".ruff_cache"}


def test_nothing_in_the_repository_points_outside_it():
    offenders = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in _SKIPPED and not name.startswith(".venv")]
        for name in files:
            path = Path(folder, name)
            try:
                text = path.read_text()
            except (UnicodeDecodeError, OSError):
                continue  # not text
            found = [n for n, line in enumerate(text.splitlines(), 1) if _OUTSIDE.search(line)]
            offenders += [f"{path.relative_to(ROOT)}:{n}" for n in found]
    assert offenders == []


def test_the_vendored_worker_shim_is_iframe_workers_own_and_the_site_loads_it_not_the_networks():
    """iframe-worker 1.0.4's shim/index.js, as npm's tarball holds it (mkdocs.yml says why)."""
    import hashlib

    shim = ROOT / "docs" / "assets" / "vendor" / "iframe-worker" / "shim.js"
    assert hashlib.sha256(shim.read_bytes()).hexdigest() == (
        "e8e412dbcfea9b7e31b5ffa288d7b6035915e714c542f4176a0cdbe262fc9609"
    )
    assert "Permission is hereby granted, free of charge" in (shim.parent / "LICENSE").read_text()
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    assert config["extra"]["polyfills"] == ["assets/vendor/iframe-worker/shim.js"]
