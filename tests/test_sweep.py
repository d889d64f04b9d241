"""Sweeps on Ray (`--ray`) give the records of the same runs made locally (skips without Ray).

Ray runs in a child process (`ray.init()` on this machine), as a user starts it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parent.parent
# what differs between two runs of the same work: timings, and the id of the run that wrote it
TIMING = {"wall_seconds", "agent_steps_per_s", "finished_at", "wall_s", "run_dir", "run"}


def _child(args, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get(
        "PYTHONPATH", "")]), "PYTHONWARNINGS": "ignore"}
    env.pop("RAY_ADDRESS", None)  # this machine, not a cluster the user happens to name
    done = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr[-3000:]


def _without_timing(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TIMING}


def test_ray_benchmark_sweep_gives_the_local_records(tmp_path):
    from benchmarks.sweep import one_run

    cases, seeds, budget = ("simple-discrete", "simple-continuous"), (0, 1), 400
    _child(["-m", "benchmarks.sweep", "--cases", ",".join(cases), "--seeds", str(len(seeds)),
            "--budget", str(budget), "--ray", "--report", str(tmp_path / "ray")], tmp_path)
    for case in cases:
        for seed in seeds:
            local = one_run(case, seed, None, budget)
            local.pop("episode_log")
            remote = json.loads((tmp_path / "ray" / f"{case}-seed{seed}.json").read_text())
            assert remote["agent_steps"] >= budget
            assert _without_timing(remote) == json.loads(json.dumps(_without_timing(local)))


def test_ray_compare_gives_the_local_records(tmp_path):
    from poca.cli import main

    args = ["compare", "groupenvs/Goal-v0", "--config", "mlagents_test", "--critics",
            "attention,independent", "--seeds", "1", "--max-steps", "400",
            "--eval-episodes", "10", "--env-kwargs", '{"reward_mode": "mlagents"}']
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    _child(["-m", "poca.cli", *args, "--ray", "--out", str(tmp_path / "ray")], tmp_path)
    for name in ("attention-seed0.json", "independent-seed0.json"):
        local, remote = (json.loads((tmp_path / where / name).read_text())
                         for where in ("local", "ray"))
        assert _without_timing(remote) == _without_timing(local)


def test_a_ctrl_c_inside_a_ray_task_stops_the_sweep_as_a_keyboard_interrupt(tmp_path):
    """Ray hands a task's KeyboardInterrupt back as TaskCancelledError; map_runs raises it as
    the KeyboardInterrupt it was (compare's Ctrl-C path), after passing on finished runs."""
    # in order, however slowly Ray starts its workers and whichever it starts first: b
    # finishes, then a is interrupted while c (5 s from b's end) is still going
    marker = tmp_path / "b.done"
    (tmp_path / "runs.py").write_text(
        "import os\nimport time\n\n\ndef run(name, seconds, interrupt):\n"
        f"    while name != 'b' and not os.path.exists({str(marker)!r}):\n"
        "        time.sleep(0.05)\n"
        "    time.sleep(seconds)\n"
        "    if interrupt:\n        raise KeyboardInterrupt(name)\n"
        f"    if name == 'b':\n        open({str(marker)!r}, 'w').close()\n"
        "    return name\n")
    script = (
        "import ray, runs\nfrom poca.sweep import map_runs\nray.init(num_cpus=3)\ndone = []\n"
        "try:\n    map_runs(runs.run, [('a', 0.5, True), ('b', 0.1, False), ('c', 5, False)], "
        "ray_address='', done=done.append)\nexcept KeyboardInterrupt:\n"
        "    print('interrupted', done)\nray.shutdown()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "PYTHONWARNINGS": "ignore"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert "interrupted ['b']" in done.stdout, done.stderr[-3000:]
