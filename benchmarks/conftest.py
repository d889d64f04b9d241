"""`pytest benchmarks` options, records and the closing summary table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BASELINE = Path(__file__).with_name("baseline.json")


def pytest_addoption(parser):
    group = parser.getgroup("benchmarks")
    group.addoption("--bench-seeds", type=int, default=1, help="seeds per case (default 1)")
    group.addoption("--bench-report", default="bench-results",
                    help="folder for JSON records and learning-curve plots")


def pytest_generate_tests(metafunc):
    if "seed" in metafunc.fixturenames:
        metafunc.parametrize("seed", range(metafunc.config.getoption("--bench-seeds")),
                             ids=lambda s: f"seed{s}")


@pytest.fixture(scope="session")
def report_dir(request) -> Path:
    path = Path(request.config.getoption("--bench-report"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def pytest_terminal_summary(terminalreporter, config):
    folder = Path(config.getoption("--bench-report"))
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] \
        if folder.is_dir() else []
    started = getattr(config, "_bench_started", None)
    records = [r for r in records if started is None or r["finished_at"] >= started]
    if not records:
        return
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    write = terminalreporter.write_line
    write("")
    write(f"{'case':34s} {'seed':>4s} {'pass':>5s} {'steps to 0.9':>12s} {'baseline':>9s} "
          f"{'wall s':>7s} {'steps/s':>8s} {'final':>7s}")
    for r in records:
        base = baseline.get(r["case"], {}).get("steps_to_threshold")
        steps = r["steps_to_threshold"]
        write(f"{r['case']:34s} {r['seed']:4d} {'yes' if r['passed'] else 'NO':>5s} "
              f"{steps if steps is not None else '-':>12} {base if base is not None else '-':>9} "
              f"{r['wall_seconds']:7.1f} {r['agent_steps_per_s']:8.0f} "
              f"{r['final_return']:+7.3f}")
        if steps is not None and base and steps > 1.5 * base:
            write(f"  ^ {r['case']}: needs {steps / base:.1f}x the baseline's agent-steps")


def pytest_sessionstart(session):
    import time

    session.config._bench_started = time.time()
