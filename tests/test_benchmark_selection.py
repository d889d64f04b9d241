"""The benchmark's opt-in groups: the default `pytest benchmarks` leaves out the slow cases, the
paper comparison and the third-party group; each one's flag adds it, its marker selects it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GROUPS = {"--slow": "paper-push-block", "--paper": "test_paper.py",
          "--third-party": "test_third_party.py"}  # flag -> what only it collects


def collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "benchmarks", "--collect-only", "-q",
                          "-p", "no:cacheprovider", *args],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if "::" in line]


def test_opt_in_groups_stay_out_by_default_and_come_with_their_flag_or_marker():
    default = collected()
    assert any("group-discrete" in test for test in default)
    for part in GROUPS.values():
        assert not [test for test in default if part in test], part
    flagged = collected(*GROUPS)
    assert set(default) <= set(flagged)
    for flag, part in GROUPS.items():
        assert any(part in test for test in flagged), flag
    assert collected("-m", "slow") == [test for test in flagged if GROUPS["--slow"] in test]


def test_ctrl_c_stops_a_benchmark_run_instead_of_judging_it(monkeypatch):
    """The trainer turns Ctrl-C into a saved, cut-short result; a benchmark run must not
    evaluate that as if it were the final policy (pytest would carry on to the next case)."""
    from benchmarks.cases import CASES
    from benchmarks.test_learning import run_case
    from poca.trainer import Trainer

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "collect", interrupted)
    with pytest.raises(KeyboardInterrupt, match="interrupted at 0 agent-steps"):
        run_case(CASES[0], 0)


def test_ctrl_c_stops_a_third_party_measurement_instead_of_judging_it(monkeypatch):
    pytest.importorskip("mpe2")
    from benchmarks.third_party import CASES, measure
    from poca.trainer import Trainer

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Trainer, "collect", interrupted)
    with pytest.raises(KeyboardInterrupt, match="attention seed 0 interrupted at 0 agent-steps"):
        measure(CASES[0], "attention", 0)


@pytest.mark.parametrize("argv, fragment", [
    (["--seeds", "0"], "argument --seeds: must be >= 1, got 0"),
    (["--budget", "-5"], "argument --budget: must be >= 1, got -5"),
    (["--workers", "0"], "argument --workers: must be >= 1, got 0"),
    (["--report", "{file}"], "is a file; give a folder for the records"),
])
def test_the_sweep_refuses_counts_below_one(argv, fragment, capsys, tmp_path):
    """--seeds 0 ran nothing and printed an empty table with exit status 0; a --report that
    is a file was a traceback with exit status 1 (which means a missed threshold)."""
    from benchmarks.sweep import main

    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as stop:
        main(["--cases", "simple-discrete", *[a.replace("{file}", str(tmp_path / "file"))
                                              for a in argv]])
    assert stop.value.code == 2 and fragment in capsys.readouterr().err


def test_the_sweep_runs_by_default_the_cases_pytest_runs_by_default():
    from benchmarks.sweep import selected

    pytest_default = {test.split("[seed0-")[1].rstrip("]")
                      for test in collected() if "test_learning.py" in test}
    assert set(selected(None, slow=False)) == pytest_default
    assert set(selected(None, slow=True)) - pytest_default == {"paper-push-block"}
    assert selected(",", slow=False) == []  # refused by main: a green sweep of nothing


def test_a_budget_run_reports_but_does_not_fail_on_thresholds(tmp_path, capsys):
    from benchmarks.sweep import main

    assert main(["--cases", "simple-discrete", "--budget", "100", "--report",
                 str(tmp_path)]) == 0  # 100 agent-steps reach no threshold
    assert "simple-discrete" in capsys.readouterr().out


@pytest.mark.parametrize("flag", ["--bench-seeds", "--third-party-seeds", "--paper-seeds"])
def test_seed_counts_below_one_are_refused_not_a_green_run_of_nothing(flag):
    out = subprocess.run([sys.executable, "-m", "pytest", "benchmarks", "--collect-only", "-q",
                          "-p", "no:cacheprovider", flag, "0"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"argument {flag}: must be at least 1, got 0" in out.stderr


def test_bench_strict_counts_a_seed_that_never_reached_the_threshold_as_too_slow():
    """Counted as its budget, a never-reached seed could not fail a case whose budget is under
    2x its baseline (visual-1: budget 3,000, baseline 1,720), however slow the trainer."""
    from benchmarks.conftest import _too_slow

    def records(*steps):
        return [{"case": "c", "seed": i, "steps_to_threshold": s, "budget": 3000,
                 "finished_at": 0.0} for i, s in enumerate(steps)]

    baseline = {"c": {"steps_to_threshold": 1720}}
    assert _too_slow(records(1700, 1800, None), baseline) == {}  # median 1,800: fine
    assert _too_slow(records(2900, None, None), baseline) == {"c": float("inf")}
    assert _too_slow(records(3000, 3600, 4000), {"c": {"steps_to_threshold": 1500}}) == \
        {"c": 3600 / 1500}


def test_the_break_matrix_stops_when_pytest_ran_nothing_and_skips_old_records(tmp_path, capsys):
    """A -k that selects nothing (or any usage error) stops the matrix with pytest's status,
    rather than printing one from records an earlier run left in the same folders."""
    import json

    from benchmarks.breaks import main, matrix

    old = {"case": "simple-discrete", "seed": 0, "passed": False, "final_return": -1.0,
           "steps_to_threshold": None, "finished_at": 100.0}
    (tmp_path / "sign").mkdir()
    (tmp_path / "sign" / "simple-discrete-seed0.json").write_text(json.dumps(old))
    code = main(["--breaks", "sign", "--seeds", "1", "--workers", "0", "--report", str(tmp_path),
                 "--", "-k", "no_such_case_xyz"])
    assert code == 5  # pytest: no tests collected
    assert "no matrix" in capsys.readouterr().err
    assert "simple-discrete" in matrix(tmp_path, [None, "sign"])
    assert "simple-discrete" not in matrix(tmp_path, [None, "sign"], since=200.0)


def test_a_break_with_the_third_party_group_is_refused_not_ignored():
    """The third-party tasks take no break: with --break they would train and pass unbroken."""
    out = subprocess.run([sys.executable, "-m", "pytest", "benchmarks", "--collect-only", "-q",
                          "-p", "no:cacheprovider", "--third-party", "--break", "sign"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == pytest.ExitCode.USAGE_ERROR
    assert "the third-party group would train unbroken" in out.stderr


def test_a_bench_report_that_is_a_file_is_a_usage_error(tmp_path):
    (tmp_path / "file").write_text("")
    out = subprocess.run([sys.executable, "-m", "pytest", "benchmarks", "--collect-only", "-q",
                          "-p", "no:cacheprovider", "--bench-report", str(tmp_path / "file")],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == pytest.ExitCode.USAGE_ERROR and "is a file" in out.stderr


def test_a_broken_runs_record_does_not_overwrite_the_unbroken_one(tmp_path):
    from benchmarks.cases import CASES
    from benchmarks.test_learning import write_record

    case = next(c for c in CASES if c.id == "simple-discrete")
    for name in (None, "sign"):
        write_record(case, {"case": case.id, "seed": 0, "break": name, "final_return": 1.0,
                            "episode_log": [(10, 1.0)]}, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [
        "simple-discrete-seed0-break-sign.json", "simple-discrete-seed0.json"]


def test_a_sweep_stopped_by_ctrl_c_prints_the_runs_that_finished(monkeypatch, tmp_path, capsys):
    import benchmarks.sweep as sweep

    def first_then_ctrl_c(fn, jobs, workers, ray, done):
        case, seed, *_ = jobs[0]
        done({"case": case, "seed": seed, "break": None, "passed": True, "final_return": 1.0,
              "steps_to_threshold": 500, "budget": 3000, "wall_seconds": 1.0,
              "agent_steps_per_s": 1000.0, "episode_log": [(500, 1.0)]})
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "map_runs", first_then_ctrl_c)
    code = sweep.main(["--cases", "simple-discrete", "--seeds", "2", "--report", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 130 and "interrupted: 1 of 2 runs finished" in err
    assert "simple-discrete" in out and " 1/1 " in out


def test_a_record_keeps_its_curve_and_the_commit_it_measured(tmp_path):
    """Without matplotlib the curve used to be lost; the commit says which code was measured."""
    import csv

    from benchmarks.cases import CASES
    from benchmarks.test_learning import _source_commit, write_record

    case = next(c for c in CASES if c.id == "simple-discrete")
    write_record(case, {"case": case.id, "seed": 0, "break": None, "final_return": 1.0,
                        "episode_log": [(10, 0.5), (24, 1.0)]}, tmp_path)
    with open(tmp_path / "simple-discrete-seed0-curve.csv") as f:
        assert list(csv.reader(f)) == [["agent_steps", "group_return"], ["10", "0.5"],
                                       ["24", "1.0"]]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True)
    if head.returncode:
        assert _source_commit() is None
    else:
        assert _source_commit().removesuffix("+dirty") == head.stdout.strip()


def test_the_summary_median_counts_never_reached_seeds_as_strict_does():
    from benchmarks.conftest import summary_table

    def record(seed, steps):
        return {"case": "c", "seed": seed, "passed": steps is not None, "final_return": 1.0,
                "steps_to_threshold": steps, "wall_seconds": 1.0, "agent_steps_per_s": 1.0}

    one_never = summary_table([record(0, 100), record(1, 300), record(2, None)], {})[-1]
    assert "300 (1 never)" in one_never  # not 200, the median of the two that reached it
    assert "never (2 never)" in summary_table([record(0, 100), record(1, None),
                                               record(2, None)], {})[-1]


@pytest.mark.parametrize("child_got_it", [True, False])
def test_ctrl_c_of_the_break_matrix_stops_without_a_traceback(child_got_it, monkeypatch,
                                                               capsys, tmp_path):
    """A terminal's Ctrl-C reaches pytest too; one sent to the matrix alone is passed on."""
    import benchmarks.breaks as breaks

    class Interrupted:
        def __init__(self, cmd):
            self.waits, self.signals = 0, []
            children.append(self)

        def wait(self, timeout=None):
            self.waits += 1
            if self.waits == 1:
                raise KeyboardInterrupt
            if not (child_got_it or self.signals):
                raise subprocess.TimeoutExpired("pytest", timeout)
            return 2  # pytest's own status after its Ctrl-C

        def send_signal(self, number):
            self.signals.append(number)

        def kill(self):
            raise AssertionError("killed")

    children = []
    monkeypatch.setattr(breaks.subprocess, "Popen", Interrupted)
    assert breaks.main(["--breaks", "sign", "--report", str(tmp_path)]) == 130
    assert "interrupted during break none: stopped, no matrix" in capsys.readouterr().err
    assert children[0].signals == ([] if child_got_it else [breaks.signal.SIGINT])


def test_the_summary_judges_the_records_its_tests_reported_not_the_files(monkeypatch):
    """A second session writing into the same report folder replaced this one's record files,
    and --bench-strict passed on a case it then never saw."""
    import json
    import types

    import benchmarks.conftest as conftest

    reported = {name: [] for name in conftest._REPORTED}
    monkeypatch.setattr(conftest, "_REPORTED", reported)
    record = {"case": "c", "seed": 0, "steps_to_threshold": None}
    for when in ("setup", "call", "teardown"):
        conftest.pytest_runtest_logreport(types.SimpleNamespace(
            when=when, user_properties=[(conftest.RECORD_PROPERTY, json.dumps(record)),
                                        ("other", 1)]))
    assert reported[conftest.RECORD_PROPERTY] == [record]
    conftest.pytest_sessionstart(None)  # a second session in this process: its own only
    assert reported[conftest.RECORD_PROPERTY] == []
    conftest.pytest_runtest_logreport(types.SimpleNamespace(
        when="call", user_properties=[(conftest.RECORD_PROPERTY, json.dumps(record))]))
    assert conftest._too_slow(reported[conftest.RECORD_PROPERTY],
                              {"c": {"steps_to_threshold": 100}}) == {"c": float("inf")}


@pytest.mark.parametrize("argv, fragment", [
    (["--cases", "sisl-persuit"], "--cases: unknown ['sisl-persuit']"),
    (["--methods", "attention,indep"], "--methods: unknown ['indep']"),
    (["--seeds", "0"], "--seeds and --budget must be at least 1"),
    (["--cases", ""], "--cases: names none")])
def test_the_third_party_script_refuses_unknown_names_as_a_usage_error(argv, fragment, capsys):
    """A typo in --cases was a KeyError traceback after the report folder was made."""
    from benchmarks.third_party import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2 and fragment in capsys.readouterr().err
