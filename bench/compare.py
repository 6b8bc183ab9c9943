"""Two commits, one benchmark, one sitting: the runs alternate, so both see the same machine.

    .venv/bin/python -m bench.compare --base a497f6b [--head HEAD] --rounds 6 -- bench/bench_e2e.py --jobs 1000

Each commit is exported (``git archive``, no worktree) to ``var/compare/<commit>``, with
the benchmark files of the tree this command runs from laid over its ``bench/`` (the
same benchmark measures both; ``--own-bench`` keeps each commit's own). ``--head .``
runs this working tree as it is. A commit whose locked requirements are this tree's
runs on this tree's venv; another gets ``var/compare/venv-<digest>``, installed once
with ``--require-hashes``. Each commit has its own databases, migrated by its own
migrations (the benchmarks' ``BENCH_DB`` and ``BENCH_E2E_DATABASE_URL`` get a suffix).

Rounds alternate the order (base then head, head then base, ...), so neither side
always runs second on a warmer machine. Every figure the benchmark prints that this
module knows how to read (``FIGURES``) is collected; at the end each is printed per
round for both commits, with the mean of each side, the ratio of the means, and the
spread: each side's range (min to max) and its relative standard deviation, and the
range of the per-round ratios. A change stands out when the ratio of the means is
further from 1 than the per-round ratios' own spread; ``--rounds`` buys that.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "var" / "compare"
LOCKS = ("requirements.txt", "requirements-dev.txt")

# What each benchmark prints, read back: (name, regular expression with one number group,
# whether higher is better). A line the benchmark does not print is left out.
FIGURES: dict[str, list[tuple[str, str, bool]]] = {
    "bench_e2e": [
        ("floor, jobs/s", r"raw-SQL lifecycle floor.*?:\s+([\d.]+) jobs/s", True),
        ("end to end, jobs/s", r"end to end, gunicorn.*?:\s+([\d.]+) jobs/s", True),
        ("end to end / floor", r"ratio end-to-end / floor: ([\d.]+)", True),
        ("gunicorn CPU per job, ms", r"CPU per end-to-end job:.*?gunicorn ([\d.]+) ms", False),
        ("runtimes CPU per job, ms", r"CPU per end-to-end job:.*?bench-rt-a ([\d.]+) ms", False),
        ("PostgreSQL CPU per job, ms", r"CPU per end-to-end job:.*?postgres backends ([\d.]+) ms", False),
    ],
    "bench_create": [
        ("bare DRF view, req/s", r"^\s+bare DRF view, one INSERT\s+([\d.]+) req/s", True),
        ("POST /ai/jobs, req/s", r"^\s+POST /ai/jobs[^:\n]*?\s+([\d.]+) req/s", True),
        ("POST /ai/jobs / bare view, %", r"^\s+POST /ai/jobs[^:\n]*?\s+[\d.]+ req/s\s+([\d.]+)%", True),
        ("gunicorn CPU per POST /ai/jobs, ms", r"^\s+POST /ai/jobs[^:\n]*: gunicorn\s+([\d.]+) ms", False),
        ("PostgreSQL CPU per POST /ai/jobs, ms", r"^\s+POST /ai/jobs[^:\n]*: PostgreSQL\s+([\d.]+) ms", False),
    ],
    "profile_requests": [  # with --plain: CPU per request in process, no profiler
        ("POST /ai/jobs, ms CPU", r"^\s+POST /ai/jobs\s+([\d.]+) ms CPU", False),
        ("claim with include, ms CPU", r"^\s+claim \(limit 1[^)]*\)\s+([\d.]+) ms CPU", False),
        ("heartbeat, ms CPU", r"^\s+heartbeat\s+([\d.]+) ms CPU", False),
        ("result, ms CPU", r"^\s+result \(with one invocation log\)\s+([\d.]+) ms CPU", False),
    ],
    "bench_lifecycle": [
        ("service layer / its statements, %", r"service layer.*?([\d.]+)% of", True),
        ("HTTP lifecycle, jobs/s", r"HTTP API through gunicorn.*?\s([\d.]+) jobs/s", True),
    ],
}


@dataclass
class Side:
    label: str
    commit: str
    tree: Path
    python: str
    env: dict[str, str]
    runs: list[dict[str, float]] = field(default_factory=list)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def export(commit: str, own_bench: bool) -> Path:
    """``commit``'s files in ``var/compare/<commit>`` (made once), this tree's ``bench/`` over them."""
    tree = WORK / commit[:12]
    if not (tree / "manage.py").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
    if not own_bench:
        shutil.copytree(
            ROOT / "bench", tree / "bench", dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
        )
    return tree


def lock_digest(tree: Path) -> str:
    digest = hashlib.sha256()
    for name in LOCKS:
        digest.update((tree / name).read_bytes())
    return digest.hexdigest()[:12]


def python_for(tree: Path) -> str:
    """This tree's interpreter when the locks agree, else a venv of the commit's locks."""
    if lock_digest(tree) == lock_digest(ROOT):
        return sys.executable
    venv = WORK / f"venv-{lock_digest(tree)}"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"compare: installing {tree.name}'s locked requirements into {venv.relative_to(ROOT)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--require-hashes", "-r", str(tree / "requirements-dev.txt")],
            check=True,
        )
    return str(python)


def side_env(suffix: str) -> dict[str, str]:
    """Databases of the side's own, so each is migrated by its own migrations."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("VIRTUAL_ENV", None)
    env["BENCH_DB"] = f"{os.environ.get('BENCH_DB', 'aijobs_bench')}_{suffix}"
    e2e = os.environ.get("BENCH_E2E_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/aijobs_bench_e2e")
    env["BENCH_E2E_DATABASE_URL"] = f"{e2e}_{suffix}"
    return env


def read_figures(kind: str, output: str) -> dict[str, float]:
    figures = {}
    for name, pattern, _higher in FIGURES.get(kind, []):
        found = re.search(pattern, output, re.MULTILINE)
        if found:
            figures[name] = float(found.group(1))
    return figures


def run_once(side: Side, command: list[str], kind: str, round_no: int) -> None:
    script, *rest = command
    # Run as a module of the side's tree whichever way it was named (bench/x.py or bench.x).
    module = script.removesuffix(".py").replace("/", ".")
    args = [side.python, "-m", module, *rest]
    started = time.perf_counter()
    print(f"compare: round {round_no}, {side.label} ({side.commit[:9]}) ...", flush=True)
    done = subprocess.run(args, cwd=side.tree, env=side.env, capture_output=True, text=True)
    log = WORK / f"round{round_no}-{side.label}.log"
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"compare: {side.label} failed (exit {done.returncode}); see {log.relative_to(ROOT)}")
    figures = read_figures(kind, done.stdout)
    if not figures:
        raise SystemExit(f"compare: no figure read from {side.label}'s output; see {log.relative_to(ROOT)}")
    side.runs.append(figures)
    shown = ", ".join(f"{name} {value:g}" for name, value in figures.items())
    print(f"  {time.perf_counter() - started:.0f} s: {shown}", flush=True)


def summary(kind: str, base: Side, head: Side) -> None:
    print(f"\n{kind}: {len(base.runs)} rounds, alternated; base {base.commit[:9]}, head {head.commit[:9]}")
    higher = {name: better for name, _, better in FIGURES.get(kind, [])}
    for name in higher:
        b = [run[name] for run in base.runs if name in run]
        h = [run[name] for run in head.runs if name in run]
        if not b or not h:
            continue
        ratios = [y / x for x, y in zip(b, h, strict=False) if x]
        mean_b, mean_h = statistics.fmean(b), statistics.fmean(h)
        print(f"\n  {name} ({'higher' if higher[name] else 'lower'} is better)")
        print(f"    base: {', '.join(f'{v:g}' for v in b)}")
        print(f"    head: {', '.join(f'{v:g}' for v in h)}")
        print(
            f"    mean base {mean_b:.4g} (range {min(b):g}-{max(b):g}, rsd {rsd(b):.1%}); "
            f"head {mean_h:.4g} (range {min(h):g}-{max(h):g}, rsd {rsd(h):.1%})"
        )
        print(
            f"    head / base: {mean_h / mean_b:.3f} of the means; per round {min(ratios):.3f}-{max(ratios):.3f}"
            f" (median {statistics.median(ratios):.3f})"
        )


def rsd(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 and statistics.fmean(values) else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the commit measured against")
    parser.add_argument("--head", default="HEAD", help="the commit measured, or . for this working tree as it is")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--own-bench", action="store_true", help="each commit runs its own bench/ files")
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- the benchmark (a .py path or a module) and its options"
    )
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the benchmark after --")
    kind = Path(command[0]).stem.rsplit(".", 1)[-1]
    if kind not in FIGURES:
        parser.error(f"no figures known for {kind}; known: {', '.join(FIGURES)}")
    WORK.mkdir(parents=True, exist_ok=True)

    sides = []
    for label, ref in (("base", args.base), ("head", args.head)):
        if ref == ".":
            commit = git("rev-parse", "HEAD")
            tree, python, suffix = ROOT, sys.executable, "worktree"
        else:
            commit = git("rev-parse", "--verify", f"{ref}^{{commit}}")
            tree = export(commit, args.own_bench)
            python, suffix = python_for(tree), commit[:7]
        sides.append(Side(label, commit, tree, python, side_env(suffix)))
    base, head = sides
    for round_no in range(1, args.rounds + 1):
        order = (base, head) if round_no % 2 else (head, base)
        for side in order:
            run_once(side, command, kind, round_no)
    summary(kind, base, head)


if __name__ == "__main__":
    main()
