"""`pytest benchmarks` options, records and the closing summary table."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest

BASELINE = Path(__file__).with_name("baseline.json")
# Each test reports its records in its report's user_properties, as JSON (what xdist carries to
# the controller): the summary and --bench-strict judge this session's own, whatever another
# session writes into the same report folder meanwhile (it may replace the files).
RECORD_PROPERTY, THIRD_PARTY_PROPERTY, PAPER_PROPERTY = (
    "bench_record", "third_party_record", "paper_table")
_REPORTED: dict[str, list[dict]] = {RECORD_PROPERTY: [], THIRD_PARTY_PROPERTY: [],
                                    PAPER_PROPERTY: []}
STRICT_FACTOR = 2.0  # --bench-strict: median steps-to-threshold at most this x the baseline


def _seeds(value: str) -> int:
    """A seed count: 0 would run nothing and pass (a green CI that checked nothing)."""
    import argparse

    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {value!r}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {count}")
    return count


def pytest_addoption(parser):
    from benchmarks.breaks import BREAKS

    group = parser.getgroup("benchmarks")
    group.addoption("--bench-seeds", type=_seeds, default=1, help="seeds per case (default 1)")
    group.addoption("--bench-report", default="bench-results",
                    help="folder for JSON records and learning-curve plots")
    group.addoption("--bench-strict", action="store_true",
                    help=f"fail a case whose median steps-to-threshold exceeds "
                         f"{STRICT_FACTOR:g}x benchmarks/baseline.json")
    group.addoption("--break", dest="break_name", choices=sorted(BREAKS),
                    help="apply one deliberate break of MA-POCA (benchmarks/breaks.py)")
    group.addoption("--third-party", action="store_true",
                    help="also run the third-party group (PettingZoo tasks, minutes per case; "
                         "or select it alone with -m third_party)")
    group.addoption("--third-party-seeds", type=_seeds, default=3,
                    help="seeds per third-party case (default 3)")
    group.addoption("--paper", action="store_true",
                    help="also run the paper comparison: POCA against the `independent` critic "
                         "on the paper tasks, same seeds (minutes per seed; or -m paper)")
    group.addoption("--paper-seeds", type=_seeds, default=3,
                    help="seeds per paper comparison (default 3)")
    group.addoption("--slow", action="store_true",
                    help="also run the slow cases (Push Block's 3M agent-steps: 5-11 minutes of "
                         "one core; or select them alone with -m slow)")


# marker -> the flag that runs it
OPT_IN = {"third_party": "--third-party", "paper": "--paper", "slow": "--slow"}


def pytest_collection_modifyitems(config, items):
    """Opt-in groups are deselected unless asked for (their flag, or -m naming their marker)."""
    named = set(re.findall(r"\w+", config.getoption("markexpr") or ""))
    off = [m for m, flag in OPT_IN.items() if not config.getoption(flag) and m not in named]
    skipped = [item for item in items if any(item.get_closest_marker(m) for m in off)]
    if skipped:
        config.hook.pytest_deselected(items=skipped)
        dropped = set(skipped)
        items[:] = [item for item in items if item not in dropped]
    report = Path(config.getoption("--bench-report"))
    if report.exists() and not report.is_dir():  # else a FileExistsError in every test
        raise pytest.UsageError(f"--bench-report {report} is a file; give a folder for the "
                                "records")
    if config.getoption("break_name") and any(item.get_closest_marker("third_party")
                                              for item in items):
        raise pytest.UsageError("--break patches this trainer's learning cases; the third-party "
                                "group would train unbroken and be judged as such: run it "
                                "without --break")


@pytest.fixture(scope="session")
def third_party_seeds(request) -> int:
    return request.config.getoption("--third-party-seeds")


@pytest.fixture(scope="session")
def paper_seeds(request) -> int:
    return request.config.getoption("--paper-seeds")


def pytest_generate_tests(metafunc):
    if "seed" in metafunc.fixturenames:
        metafunc.parametrize("seed", range(metafunc.config.getoption("--bench-seeds")),
                             ids=lambda s: f"seed{s}")


@pytest.fixture(scope="session")
def report_dir(request) -> Path:
    path = Path(request.config.getoption("--bench-report"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def break_name(request) -> str | None:
    return request.config.getoption("break_name")


def pytest_sessionstart(session):
    for reported in _REPORTED.values():  # a second session in one process starts afresh
        reported.clear()


def pytest_runtest_logreport(report):
    if report.when == "call":
        for name, value in report.user_properties:
            if name in _REPORTED:
                _REPORTED[name].append(json.loads(value))


def _by_case(records: list[dict]) -> dict[str, list[dict]]:
    cases: dict[str, list[dict]] = {}
    for r in records:
        cases.setdefault(r["case"], []).append(r)
    return cases


def _median_steps(records: list[dict]) -> float:
    """Median agent-steps to the threshold over every seed, one that never reached it counted
    as infinitely slow (inf when half the seeds or more never did): the figure --bench-strict
    judges and the summary prints, so the two never disagree."""
    return statistics.median(r["steps_to_threshold"] or math.inf for r in records)


def _too_slow(records: list[dict], baseline: dict) -> dict[str, float]:
    """case -> median steps-to-threshold / baseline, for cases over STRICT_FACTOR. A seed that
    never reached the threshold counts as infinitely slow: counted as its budget, a case whose
    budget is under STRICT_FACTOR x its baseline could never fail, however slow."""
    slow = {}
    for case, rs in _by_case(records).items():
        base = baseline.get(case, {}).get("steps_to_threshold")
        if not base:
            continue
        median = _median_steps(rs)
        if median > STRICT_FACTOR * base:
            slow[case] = median / base
    return slow


def pytest_sessionfinish(session, exitstatus):
    if session.config.getoption("--bench-strict") and not hasattr(session.config, "workerinput"):
        baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
        if _too_slow(_REPORTED[RECORD_PROPERTY], baseline) and exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config):
    third = _REPORTED[THIRD_PARTY_PROPERTY]
    if third:
        from benchmarks.third_party import table

        terminalreporter.write_line("")
        for line in table(third).splitlines():
            terminalreporter.write_line(line)
    for paper in _REPORTED[PAPER_PROPERTY]:
        terminalreporter.write_line(f"\n{paper['case']}: POCA (attention) vs independent")
        for line in paper["table"].splitlines():
            terminalreporter.write_line(line)
    records = _REPORTED[RECORD_PROPERTY]
    if not records:
        return
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    write = terminalreporter.write_line
    write("")
    for line in summary_table(records, baseline):
        write(line)
    for case, ratio in _too_slow(records, baseline).items():
        write(f"  ^ {case}: median steps-to-threshold is "
              + (f"{ratio:.1f}x the baseline" if math.isfinite(ratio) else
                 "never (half the seeds or more did not reach the threshold in training)")
              + (" (fails with --bench-strict)" if not config.getoption("--bench-strict")
                 else " -> FAILED (--bench-strict)"))
    unchecked = sorted(case for case in _by_case(records)
                       if not baseline.get(case, {}).get("steps_to_threshold"))
    if config.getoption("--bench-strict") and unchecked:
        write(f"  --bench-strict did not check {', '.join(unchecked)}: no steps_to_threshold "
              f"in {BASELINE.name}")


def summary_table(records: list[dict], baseline: dict) -> list[str]:
    """Per case: passed seeds, median steps-to-threshold against the baseline, mean final
    return, wall seconds per seed (mean) and agent-steps/s (also printed by
    `python -m benchmarks.sweep`)."""
    broken = {r["break"] for r in records if r.get("break")}
    lines = [f"break applied: {', '.join(sorted(broken))}"] if broken else []
    lines.append(f"{'case':34s} {'pass':>5s} {'median steps to thr':>19s} {'baseline':>9s} "
                 f"{'final (eval)':>13s} {'s/seed':>7s} {'steps/s':>8s}")
    for case, rs in _by_case(records).items():
        median = _median_steps(rs)
        never = sum(not r["steps_to_threshold"] for r in rs)
        shown = "never" if math.isinf(median) else f"{median:,.0f}"
        base = baseline.get(case, {}).get("steps_to_threshold")
        finals = [r["final_return"] for r in rs]
        lines.append(f"{case:34s} {sum(r['passed'] for r in rs):>2d}/{len(rs):<2d} "
                     f"{shown + (f' ({never} never)' if never else ''):>19} "
                     f"{'-' if base is None else f'{base:,.0f}':>9} "
                     f"{statistics.mean(finals):+13.3f} "
                     f"{statistics.mean(r['wall_seconds'] for r in rs):7.1f} "
                     f"{statistics.mean(r['agent_steps_per_s'] for r in rs):8.0f}")
    return lines
