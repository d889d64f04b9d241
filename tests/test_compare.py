"""`poca compare`: one JSON per run, a table per critic, a PNG of the curves, clear errors."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from poca.cli import main


def test_compare_writes_a_record_per_run_and_a_table(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", "groupenvs/Goal-v0", "--config", "goal", "--critics",
                 "attention,independent", "--seeds", "2", "--max-steps", "3000",
                 "--eval-episodes", "20", "--threshold", "0.5", "--out", str(out)])
    assert code == 0
    records = {p.name: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert sorted(records) == ["attention-seed0.json", "attention-seed1.json",
                               "independent-seed0.json", "independent-seed1.json"]
    for name, r in records.items():
        assert name == f"{r['critic']}-seed{r['seed']}.json"
        assert r["config"]["critic"] == r["critic"] and r["config"]["seed"] == r["seed"]
        assert r["agent_steps"] >= 3000 and r["eval_episodes"] == 20
        assert r["score"] == "group return" and -1.0 <= r["final_return"] <= 1.0
        assert r["curve"] and (out / f"{r['critic']}-seed{r['seed']}" / "checkpoints").is_dir()
    printed = capsys.readouterr().out
    assert "| attention |" in printed and "| independent |" in printed
    assert (out / "table.md").read_text().strip() in printed  # kept beside the records
    # the same --out again: refused before training anything, naming the runs it holds
    assert main(["compare", "groupenvs/Goal-v0", "--critics", "attention", "--out",
                 str(out)]) == 2
    assert "already holds the runs ['attention-seed0', 'attention-seed1']; choose another " \
           "--out" in capsys.readouterr().err
    pytest.importorskip("matplotlib")
    assert (out / "curves.png").stat().st_size > 0


def test_compare_refuses_an_unknown_critic(tmp_path, capsys):
    assert main(["compare", "groupenvs/Goal-v0", "--critics", "attention,coma",
                 "--out", str(tmp_path)]) == 2
    assert "unknown ['coma']" in capsys.readouterr().err
    assert main(["compare", "groupenvs/Goal-v0", "--critics", "attention,attention",
                 "--out", str(tmp_path)]) == 2
    assert "each critic once, got 'attention,attention'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("extra, message", [
    (["--max-steps", "0"], "max_steps must be"),
    (["--eval-episodes", "0"], "--eval-episodes must be >= 1, got 0"),
    (["--threshold", "nan"], "--threshold must be a number, got nan"),
    (["--set", "seed=7"], "--set seed: compare trains every critic"),
    (["--set", "max_steps=500", "--max-steps", "3000"],  # the flag had won in silence
     "both --max-steps and --set max_steps=... given"),
    (["--env-kwargs", '{"no_such_argument": 1}'], "no_such_argument"),
])
def test_compare_refuses_bad_input_before_training(extra, message, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", "groupenvs/Goal-v0", "--critics", "attention", "--seeds", "1",
                 "--out", str(out), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # nothing trained, no empty folder left behind


def test_compare_refuses_networks_the_env_does_not_fit_before_saying_it_compares(tmp_path,
                                                                               capsys):
    assert main(["compare", "groupenvs/GoalVisual-v0", "--env-kwargs",
                 '{"visual_size": [6, 6, 3]}', "--critics", "attention", "--seeds", "1",
                 "--out", str(tmp_path / "cmp")]) == 2
    captured = capsys.readouterr()
    assert "comparing" not in captured.out and "6x6" in captured.err.replace(" x ", "x")
    assert not (tmp_path / "cmp").exists()


def test_compare_refuses_an_unknown_env_before_making_its_folder(tmp_path, capsys):
    assert main(["compare", "groupenvs/NoSuchTask-v0", "--critics", "attention",
                 "--out", str(tmp_path / "cmp")]) == 2
    assert "NoSuchTask" in capsys.readouterr().err and not (tmp_path / "cmp").exists()


def test_compare_stops_at_ctrl_c_and_keeps_only_finished_runs(tmp_path, capsys, monkeypatch):
    """Ctrl-C during the second run: the first run's record stays, the cut-short run is neither
    evaluated nor recorded as a result, the third never starts, and the exit status is 130."""
    from poca.trainer import Trainer

    trainers, collect = [], Trainer.collect

    def interrupted_in_second_run(self):
        if self not in trainers:
            trainers.append(self)
        if len(trainers) == 2:
            raise KeyboardInterrupt
        return collect(self)

    monkeypatch.setattr(Trainer, "collect", interrupted_in_second_run)
    out = tmp_path / "cmp"
    assert main(["compare", "groupenvs/Goal-v0", "--config", "goal", "--critics", "attention",
                 "--seeds", "3", "--max-steps", "2000", "--eval-episodes", "5",
                 "--out", str(out)]) == 130
    captured = capsys.readouterr()
    assert sorted(p.name for p in out.glob("*.json")) == ["attention-seed0.json"]
    assert "['attention-seed0']" in captured.err and "| attention |" not in captured.out
    assert (out / "attention-seed1" / "checkpoints").is_dir()  # its checkpoint is kept
    assert not (out / "attention-seed2").exists() and len(trainers) == 2


def _run_or_fail(name: str, seconds: float, fail: bool, started: str):
    """A run for map_runs in spawned workers: notes that it started, takes `seconds`, fails."""
    (Path(started) / name).touch()
    time.sleep(seconds)
    if fail:
        raise RuntimeError(f"run {name} failed")
    return name


def test_a_failed_run_stops_a_sweep_in_processes_before_the_next_run_starts(tmp_path):
    from poca.sweep import map_runs

    jobs = [("a", 0.3, True), ("b", 1.5, False), ("c", 0.1, False), ("d", 0.1, False)]
    finished = []
    with pytest.raises(RuntimeError, match="run a failed"):
        map_runs(_run_or_fail, [(*job, str(tmp_path)) for job in jobs], workers=2,
                 done=finished.append)
    assert finished == ["b"]  # going when a failed: it finished and was handed over
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # c and d never started


def _run_until_interrupted(name: str, seconds: float, fail: bool, setup: float = 0.0):
    """A run that, like a trainer, stops early on SIGINT once it trains, after `setup` seconds
    of being built (workers ignore SIGINT until then, and between runs)."""
    time.sleep(setup)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        time.sleep(seconds)
    except KeyboardInterrupt:
        return f"{name} interrupted"
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if fail:
        raise RuntimeError(f"run {name} failed")
    return name


@pytest.mark.skipif(os.name != "posix", reason="the runs going are interrupted by SIGINT")
def test_a_failed_run_interrupts_the_runs_going_instead_of_waiting_for_them():
    from poca.sweep import map_runs

    finished, start = [], time.monotonic()
    with pytest.raises(RuntimeError, match="run a failed"):
        map_runs(_run_until_interrupted, [("a", 0.5, True), ("b", 120.0, False)], workers=2,
                 done=finished.append)
    assert finished == ["b interrupted"] and time.monotonic() - start < 60


@pytest.mark.skipif(os.name != "posix", reason="the runs going are interrupted by SIGINT")
def test_a_run_still_starting_when_the_sweep_stops_is_interrupted_once_it_trains():
    from poca.sweep import map_runs

    finished, start = [], time.monotonic()
    with pytest.raises(RuntimeError, match="run a failed"):
        map_runs(_run_until_interrupted, [("a", 0.2, True), ("b", 60.0, False, 1.5)],
                 workers=2, done=finished.append)
    assert finished == ["b interrupted"] and time.monotonic() - start < 30


@pytest.mark.skipif(os.name != "posix", reason="the runs going are interrupted by SIGINT")
def test_an_interrupt_inside_done_stops_the_runs_going():
    from poca.sweep import map_runs

    def done(record):
        raise KeyboardInterrupt  # a Ctrl-C while the caller writes a record

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        map_runs(_run_until_interrupted, [("a", 0.2, False), ("b", 60.0, False)], workers=2,
                 done=done)
    assert time.monotonic() - start < 30


@pytest.mark.skipif(os.name != "posix", reason="signals to one process")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_compare_alone_stops_its_worker_runs_saved(tmp_path, signum):
    """kill -TERM (or -INT) to compare's process, not to its workers: the runs going stop,
    saved, and compare exits 130. SIGTERM used to end compare alone, its workers training on,
    orphaned, to the end of their budgets."""
    import subprocess
    import sys

    out = tmp_path / "cmp"
    with open(tmp_path / "stderr", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "poca.cli", "compare", "groupenvs/Goal-v0", "--config", "goal",
             "--critics", "attention", "--seeds", "2", "--workers", "2", "--max-steps",
             "100000000", "--eval-episodes", "5", "--out", str(out)],
            cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.DEVNULL, stderr=err,
            start_new_session=True)  # a process group to kill if the test fails midway
        try:
            deadline = time.monotonic() + 120
            while len(list(out.glob("*/checkpoints/step-*.pt"))) < 2:  # both runs under way
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
            proc.send_signal(signum)  # to compare's process alone
            assert proc.wait(timeout=60) == 130
        finally:  # a failed assertion must not leave a 1e8-step compare and its workers running
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    files = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    time.sleep(2)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == files  # no orphan
    assert sorted(p.parent.parent.name for p in out.glob("*/checkpoints/latest.pt")) == [
        "attention-seed0", "attention-seed1"]


@pytest.mark.parametrize("workers", [1, 2])
def test_map_runs_hands_over_each_finished_run_before_a_failure_stops_it(workers):
    import operator

    from poca.sweep import map_runs

    assert map_runs(operator.truediv, [(1, 2), (3, 4)], workers) == [0.5, 0.75]
    finished = []
    with pytest.raises(ZeroDivisionError):
        map_runs(operator.truediv, [(1, 2), (1, 0)], workers, done=finished.append)
    assert finished == [0.5]


def test_compare_says_it_replaces_the_seed_and_critic_of_a_config(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("seed: 7\ncritic: independent\nnum_envs: 4\n")
    out = tmp_path / "cmp"
    assert main(["compare", "groupenvs/Goal-v0", "--config", str(config), "--critics",
                 "attention", "--seeds", "1", "--max-steps", "300", "--eval-episodes", "4",
                 "--threshold", "inf", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "sets {'seed': 7, 'critic': 'independent'}; compare replaces them" in err
    record = json.loads((out / "attention-seed0.json").read_text())
    assert record["steps_to_threshold"] is None  # an unreachable threshold is never reached


def test_ctrl_c_in_the_caller_waits_for_the_runs_going_and_keeps_their_records():
    """The sweep's own process is interrupted while two runs are going: nothing more is
    submitted, the runs going are stopped and waited for, the one that still finishes reaches
    `done`, then the Ctrl-C is raised. A second Ctrl-C stops the waiting at once."""
    from poca.sweep import _gather

    def run(interrupts):
        submitted, stopped, finished = [], [], []
        waits = iter(interrupts)

        def ready(handles):
            if next(waits, False):
                raise KeyboardInterrupt
            return handles[:1]

        with pytest.raises(KeyboardInterrupt):
            _gather([("a",), ("b",), ("c",)], lambda job: submitted.append(job[0]) or job[0],
                    2, ready, lambda handle: handle.upper(), stopped.extend, finished.append)
        return submitted, stopped, finished

    assert run([True]) == (["a", "b"], ["a", "b"], ["A", "B"])
    assert run([True, False, True]) == (["a", "b"], ["a", "b"], ["A"])


def test_compare_evaluates_in_batches_of_env_copies(tmp_path, batch_evaluation):
    """compare's final evaluation takes the same batched path as `poca eval`: at most
    EVAL_BATCH env copies at once (it made all --eval-episodes copies in one env)."""
    sizes = batch_evaluation()
    out = tmp_path / "cmp"
    assert main(["compare", "groupenvs/Goal-v0", "--config", "mlagents_test", "--critics",
                 "attention", "--seeds", "1", "--max-steps", "300", "--eval-episodes", "10",
                 "--out", str(out)]) == 0
    assert json.loads((out / "attention-seed0.json").read_text())["eval_episodes"] == 10
    assert sizes[-3:] == [4, 4, 4] and max(sizes[1:]) == 4  # after the training env's


def test_compare_with_no_ray_cluster_is_one_line_and_leaves_no_folder(tmp_path, monkeypatch,
                                                                      capsys):
    import sys
    import types

    ray = types.ModuleType("ray")  # Ray's own behaviour with no cluster at the address
    ray.is_initialized = lambda: False

    def init(address=None):
        raise ConnectionError("Could not find any running Ray instance.\nMore detail.")

    ray.init = init
    monkeypatch.setitem(sys.modules, "ray", ray)
    out = tmp_path / "out"
    assert main(["compare", "groupenvs/Goal-v0", "--config", "goal", "--seeds", "1",
                 "--max-steps", "500", "--critics", "attention", "--ray", "auto", "--out",
                 str(out)]) == 2
    err = capsys.readouterr().err
    assert "--ray auto: no Ray cluster to join (Could not find any running Ray instance.); " \
           "start one" in err and "More detail" not in err
    assert not out.exists()
