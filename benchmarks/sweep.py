"""The benchmark's cases x seeds as independent runs outside pytest: here in turn, in local
processes, or as Ray tasks on one machine or a cluster (poca.sweep; no scheduler of our own).

    python -m benchmarks.sweep --seeds 3 --cases simple-discrete,group-discrete --workers 2
    python -m benchmarks.sweep --seeds 5 --ray              # Ray here, or the RAY_ADDRESS cluster
    python -m benchmarks.sweep --seeds 5 --ray ray://head:10001

Each run is `benchmarks.test_learning.run_case`, the function `pytest benchmarks` calls, and this
process writes the same `<case>-seed<s>.json` records and PNGs into --report and prints the same
table, so a sweep spread over machines reads like a local `pytest benchmarks` run. Exit status 1
when a case not marked as a known failure misses its threshold.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from benchmarks.breaks import BREAKS
from benchmarks.cases import CASES
from benchmarks.conftest import BASELINE, summary_table
from poca.cli import _positive
from poca.sweep import map_runs

BY_ID = {c.id: c for c in CASES}


def one_run(case_id: str, seed: int, break_name: str | None, budget: int | None) -> dict:
    from benchmarks.test_learning import run_case

    case = BY_ID[case_id]
    return run_case(dataclasses.replace(case, budget=budget) if budget else case, seed,
                    break_name)


def selected(cases: str | None, slow: bool) -> list[str]:
    """The case ids of --cases, or with none those `pytest benchmarks` runs (and --slow's)."""
    if cases is not None:
        return [c for c in cases.split(",") if c]
    return [c for c, case in BY_ID.items() if slow or not case.slow]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sweep", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", help="comma-separated case ids (default: every case that "
                        "pytest benchmarks runs by default; --slow adds the slow ones)")
    parser.add_argument("--slow", action="store_true",
                        help="with no --cases, also the slow cases (Push Block's 3M agent-steps)")
    parser.add_argument("--seeds", type=_positive, default=1, help="seeds 0..N-1 (default 1)")
    parser.add_argument("--budget", type=_positive, help="agent-steps per run instead of the "
                        "case's (a quick check: thresholds are not meant for it, so a missed one "
                        "does not make the exit status 1)")
    parser.add_argument("--break", dest="break_name", choices=sorted(BREAKS))
    parser.add_argument("--report", type=Path, default=Path("bench-results"))
    parser.add_argument("--workers", type=_positive, default=1,
                        help="local processes (default 1)")
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="run as Ray tasks: on this machine, the cluster in RAY_ADDRESS, or "
                        "ray.init(address=ADDRESS)")
    args = parser.parse_args(argv)
    ids = selected(args.cases, args.slow)
    unknown = [c for c in ids if c not in BY_ID]
    if unknown:
        parser.error(f"unknown cases {unknown}; known: {list(BY_ID)}")
    if not ids:  # a green sweep of nothing
        parser.error(f"--cases {args.cases!r} names no case; known: {list(BY_ID)}")
    jobs = [(c, s, args.break_name, args.budget) for c in ids for s in range(args.seeds)]
    if args.report.exists() and not args.report.is_dir():
        parser.error(f"--report {args.report} is a file; give a folder for the records")

    from benchmarks.test_learning import write_record

    args.report.mkdir(parents=True, exist_ok=True)
    written = {}  # as each run finishes, so a sweep stopped later keeps them

    def write(record: dict) -> None:
        written[record["case"], record["seed"]] = write_record(BY_ID[record["case"]], record,
                                                               args.report)

    try:
        map_runs(one_run, jobs, args.workers, args.ray, done=write)
    except KeyboardInterrupt:  # as pytest benchmarks does: the table of the runs that finished
        interrupted = True
    else:
        interrupted = False
    records = [written[case, seed] for case, seed, *_ in jobs if (case, seed) in written]
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    print("\n".join(summary_table(records, baseline)))
    print(f"records in {args.report}")
    if interrupted:
        print(f"interrupted: {len(records)} of {len(jobs)} runs finished", file=sys.stderr)
        return 130
    missed = [r for r in records if not r["passed"] and not BY_ID[r["case"]].known_failure]
    return 1 if missed and not args.budget else 0


if __name__ == "__main__":
    sys.exit(main())
