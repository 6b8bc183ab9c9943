"""The shape of the project (docs/architecture/index.md): no import cycle between any of its modules,
imports that point down the layers, and no import inside a function to get round
either. Read from the source by grimp, so a new cycle or an upward import fails the
suite the moment it is written.

    protocol  ←  config  ←  accounts  ←  learning, credentials, quotas  ←  ai_jobs  ←  the interfaces (api, admin, ...)
    config  ←  delivery (the outbox: plain values in, nothing of jobs or tasks)
    config, delivery  ←  asynch (beside ai_jobs: it shares only config, where the keyring lives, and the outbox)
    ops: what operators watch (metrics, probes, the dashboard), over every app
    runtime_worker: a program of its own; it imports only ``protocol`` (the output schemas
    and the error code names, framework-free), which every layer may import and which
    imports nothing of the project

The tests keep a shape too: what test modules share lives in ``tests/support/``, and
no test module imports another one (nor conftest.py, whose fixtures pytest hands out).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "accounts", "ai_jobs", "asynch", "config", "credentials", "delivery", "learning", "ops", "protocol", "quotas",
    "runtime_worker",
)  # fmt: skip

# The stack: an app's domain modules import only its own and those of apps below it.
# accounts (users' public ids) sits on config, below every app that names a user.
# delivery (the outbox) sits on config alone: it knows no user, job or task, only plain values.
RANK = {"config": 0, "accounts": 1, "delivery": 1, "learning": 2, "credentials": 2, "quotas": 2, "ai_jobs": 3}
ASIDE = {"asynch"}  # beside ai_jobs: its own modules, config and delivery (the outbox) only
CLIENT = "runtime_worker"
SHARED = "protocol"  # below everything, the runtime's one link to the server's code
# Entry points nothing else imports: the APIs, the admin, commands, Celery tasks, app configs.
INTERFACES = {"api", "admin", "admin_outputs", "admin_operations", "management", "tasks", "apps"}
OPERATIONS = "ops"  # reads every app; only the root URLconf includes it
WIRING = {"config.urls"}  # the root URLconf: it mounts every app's interfaces
# Imports inside a function that are not there to get round a cycle: Django's app
# registry (AppConfig.ready), and gunicorn's hook file, which gunicorn reads outside Django.
FUNCTION_IMPORTS_ALLOWED = {("apps.py", "ready"), ("gunicorn.py", "worker_exit")}


def _app(module: str) -> str:
    return module.split(".")[0]


def _is_interface(module: str) -> bool:
    return any(part in INTERFACES for part in module.split(".")[1:])


def allowed(importer: str, imported: str) -> bool:
    """May ``importer`` import ``imported`` directly? Every upward chain has one
    upward link, so checking direct imports checks every chain."""
    source, target = _app(importer), _app(imported)
    if source == SHARED or target == SHARED:
        return target == SHARED
    if importer in WIRING:
        return target != CLIENT
    if source == OPERATIONS or target == OPERATIONS:
        return target != CLIENT and (source == OPERATIONS or importer in WIRING)
    if source == CLIENT or target == CLIENT:
        return source == target
    if source in ASIDE or target in ASIDE:
        return source == target or target == "config" or (target == "delivery" and not _is_interface(imported))
    if source == target:
        return _is_interface(importer) or not _is_interface(imported)
    if _is_interface(importer):
        return True  # the interfaces sit above every app of the stack
    return not _is_interface(imported) and RANK[target] < RANK[source]


def layer_violations(graph: grimp.ImportGraph) -> list[str]:
    return sorted(
        f"{importer} -> {imported}"
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if not allowed(importer, imported)
    )


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The groups of modules that import each other through some chain (the strongly
    connected components of more than one module, or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(iter(children), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1 or graph.direct_import_exists(importer=module, imported=module):
                    found.append(sorted(group))
    return found


def function_imports() -> list[str]:
    """Imports of the project's modules inside a function, but for ``AppConfig.ready``,
    where Django wants them."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for function in ast.walk(ast.parse(path.read_text())):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if (path.name, function.name) in FUNCTION_IMPORTS_ALLOWED:
                    continue
                for node in ast.walk(function):
                    if isinstance(node, ast.Import):
                        names = [alias.name for alias in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                        names = [node.module]
                    else:
                        continue
                    found += [
                        f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names if _app(name) in PACKAGES
                    ]
    return found


# Beside the test modules, what pytest itself loads from tests/: the fixtures, the
# plugin named in pyproject's addopts, and the packages' __init__.py.
TESTS_PYTEST_LOADS = {"conftest.py", "environment.py", "__init__.py"}


def layout_violations_of_tests(tests: Path) -> list[str]:
    """Helper modules outside ``tests/support/``, and imports of a test module (or of
    conftest.py) from anywhere under ``tests/``."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        relative = path.relative_to(tests.parent)
        in_support = relative.parts[1] == "support"
        if not in_support and not path.name.startswith("test_") and path.name not in TESTS_PYTEST_LOADS:
            found.append(f"{relative}: a helper module outside tests/support/")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "tests" and any(part.startswith("test_") or part == "conftest" for part in parts[1:]):
                    found.append(f"{relative}:{node.lineno} imports {name}")
    return found


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def test_no_two_modules_of_the_project_import_each_other_through_any_chain(graph):
    assert cycles(graph) == []


def test_every_import_points_down_the_layers(graph):
    assert layer_violations(graph) == []


def test_no_function_imports_a_module_of_the_project():
    assert function_imports() == []


def test_test_modules_share_only_the_support_package():
    assert layout_violations_of_tests(ROOT / "tests") == []


def test_the_tests_layout_check_finds_a_planted_helper_and_imports_of_test_modules(tmp_path: Path):
    tests = tmp_path / "tests"
    (tests / "support").mkdir(parents=True)
    (tests / "support" / "clients.py").write_text("from tests.support.factories import UserFactory\n")
    (tests / "conftest.py").write_text("import pytest\n")
    (tests / "test_a.py").write_text("from tests.test_b import helper\nfrom tests import test_c\n")
    (tests / "test_b.py").write_text("from tests.conftest import RUNTIME_TOKEN\n")
    (tests / "b_support.py").write_text("")
    assert layout_violations_of_tests(tests) == [
        "tests/b_support.py: a helper module outside tests/support/",
        "tests/test_a.py:1 imports tests.test_b.helper",
        "tests/test_a.py:2 imports tests.test_c",
        "tests/test_b.py:1 imports tests.conftest.RUNTIME_TOKEN",
    ]


def test_the_checks_find_a_planted_cycle_and_upward_imports():
    planted = grimp.ImportGraph()
    edges = [
        ("quotas.services", "ai_jobs.models"),  # a lower app importing a higher one
        ("ai_jobs.models", "quotas.models"),
        ("ai_jobs.services", "ai_jobs.api.views"),  # a service importing its API
        ("ai_jobs.api.views", "ai_jobs.services"),
        ("learning.services", "credentials.models"),  # siblings are independent
        ("accounts.services", "quotas.models"),  # accounts is below the apps that name users
        ("learning.selectors", "accounts.selectors"),
        ("asynch.services", "credentials.crypto"),  # asynch shares only config
        ("runtime_worker.job", "ai_jobs.models"),  # the runtime is a client
        ("runtime_worker.job", "ai_jobs.output_schemas"),  # not even the server's re-export
        ("runtime_worker.job", "protocol.output_schemas"),  # the shared module
        ("ai_jobs.services", "protocol.output_schemas"),
        ("protocol.errors", "config.errors"),  # the shared module imports nothing of the server
        ("quotas.api.views", "ai_jobs.services"),  # an interface may use any app below it
        ("ops.selectors", "asynch.selectors"),  # operations read every app...
        ("ai_jobs.admin", "ops.dashboard"),  # ...and only the root URLconf reads them
        ("config.urls", "ops.dashboard"),
    ]
    for importer, imported in edges:
        planted.add_import(importer=importer, imported=imported)
    assert cycles(planted) == [["ai_jobs.api.views", "ai_jobs.services"]]
    assert layer_violations(planted) == [
        "accounts.services -> quotas.models",
        "ai_jobs.admin -> ops.dashboard",
        "ai_jobs.services -> ai_jobs.api.views",
        "asynch.services -> credentials.crypto",
        "learning.services -> credentials.models",
        "protocol.errors -> config.errors",
        "quotas.services -> ai_jobs.models",
        "runtime_worker.job -> ai_jobs.models",
        "runtime_worker.job -> ai_jobs.output_schemas",
    ]
