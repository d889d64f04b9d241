"""Runs that are not lost, mixed or changed: kill -9, SIGTERM, exceptions, resume, folder claims."""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from poca import checkpoint, runfolder
from poca.adapters import make_env
from poca.cli import main
from poca.config import POCAConfig
from poca.trainer import Trainer, train

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--num-envs", "8", "--set", "hyperparameters.buffer_size=256", "--set",
        "hyperparameters.batch_size=128", "--set", "summary_freq=200", "--set",
        "checkpoint_interval=600", "--no-progress"]


def small_config(**over):
    base = {"hyperparameters.batch_size": 32, "hyperparameters.buffer_size": 128,
            "network_settings.hidden_units": 16, "network_settings.num_layers": 1,
            "num_envs": 4, "max_steps": 600, "checkpoint_interval": 300, "summary_freq": 150}
    return POCAConfig().override({**base, **over})


def metrics(run: Path) -> list[int]:
    with open(run / "metrics.csv", newline="") as f:
        return [int(row["agent_steps"]) for row in csv.DictReader(f)]


STARTED: list[subprocess.Popen] = []


def start(run: Path, *extra: str) -> subprocess.Popen:
    STARTED.append(subprocess.Popen(
        [sys.executable, "-m", "poca.cli", "train", "groupenvs/Goal-v0", "--config", "goal",
         "--run-dir", str(run), *FAST, *extra], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True))
    return STARTED[-1]


@pytest.fixture(autouse=True)
def _no_run_left_behind():
    """A test that fails midway must not leave its 10M-step `poca train` running."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def saved_steps(run: Path) -> int:
    return checkpoint.load(run / "checkpoints" / "latest.pt")["agent_steps"]


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX only")
def test_sighup_of_a_closed_terminal_saves_as_ctrl_c_does(tmp_path):
    """A closed terminal or dropped SSH session sends SIGHUP: it stops the run as Ctrl-C does,
    with everything logged saved, not a kill that loses the stretch since the last checkpoint."""
    run = tmp_path / "run"
    proc = start(run, "--max-steps", "10000000")
    wait_for(lambda: (run / "metrics.csv").exists() and len(metrics(run)) >= 2)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted after" in out
    assert metrics(run)[-1] == saved_steps(run) > 0


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX only")
def test_a_run_under_nohup_keeps_ignoring_sighup():
    """`nohup` sets SIGHUP to ignored so that a run outlives its terminal: that stays so."""
    from poca.runfolder import Interrupts

    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with Interrupts():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # nothing happens
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


def test_kill_9_then_sigterm_then_resume_loses_at_most_the_last_interval(tmp_path, capsys):
    run = tmp_path / "run"
    proc = start(run, "--max-steps", "10000000")
    wait_for(lambda: len(list((run / "checkpoints").glob("step-*.pt"))) >= 2)
    wait_for(lambda: metrics(run)[-1] > saved_steps(run))  # past the last checkpoint
    proc.kill()  # SIGKILL: no chance to save
    proc.communicate(timeout=30)
    before, at = metrics(run), saved_steps(run)
    assert before[-1] - at <= 600 + 256 + 64  # at most one interval (and a rollout) lost

    proc = start(run, "--resume", "--max-steps", "10000000")
    wait_for(lambda: saved_steps(run) > at + 600)  # it runs on from the checkpoint
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted after" in out and f"resuming at {at:,} agent-steps" in out
    rows, last = metrics(run), saved_steps(run)
    assert rows == sorted(set(rows)), rows  # monotonic: the killed stretch was dropped
    assert [r for r in rows if r <= at] == [r for r in before if r <= at]
    assert rows[-1] <= last  # SIGTERM saved everything it had logged
    assert not list((run / "checkpoints").glob("*.tmp"))

    assert main(["train", "groupenvs/Goal-v0", "--run-dir", str(run), "--resume",
                 "--max-steps", str(last + 500), "--no-progress"]) == 0
    out = capsys.readouterr().out
    steps = int(out.split("trained ")[1].split(" agent-steps")[0].replace(",", ""))
    assert 500 <= steps <= 500 + 512 and f"({saved_steps(run):,} in all)" in out
    rows = metrics(run)
    assert rows == sorted(set(rows)) and rows[-1] == saved_steps(run) >= last + 500


def test_readme_resume_example_keeps_the_runs_config(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "groupenvs/Goal-v0", "--config", "goal", "--run-dir", "runs/mine",
                 "--max-steps", "2000", "--no-progress"]) == 0
    first = json.loads(Path("runs/mine/config.json").read_text())
    capsys.readouterr()
    assert main(["train", "groupenvs/Goal-v0", "--run-dir", "runs/mine", "--resume",
                 "--no-progress"]) == 0  # as written in the README; nothing left to train
    assert ("the run had already reached max_steps 2,000; to train it further, resume with a "
            "larger --max-steps") in capsys.readouterr().out
    before = checkpoint.load(Path("runs/mine/checkpoints/latest.pt"))
    assert main(["train", "groupenvs/Goal-v0", "--run-dir", "runs/mine", "--resume",
                 "--max-steps", "3000", "--no-progress"]) == 0
    state = checkpoint.load(Path("runs/mine/checkpoints/latest.pt"))
    # this process's steps and episodes, then the run's
    assert (f"trained {state['agent_steps'] - before['agent_steps']:,} agent-steps "
            f"({state['agent_steps']:,} in all), {state['episodes'] - before['episodes']:,} "
            f"episodes ({state['episodes']:,} in all) in ") in capsys.readouterr().out
    assert state["agent_steps"] >= 3000
    config = json.loads(Path("runs/mine/config.json").read_text())
    assert config["config"] == {**first["config"], "max_steps": 3000}
    assert POCAConfig.from_dict(state["config"]).hyperparameters.learning_rate == 5e-3
    capsys.readouterr()


@pytest.mark.parametrize("argv, fragment, forced", [
    (["--set", "hyperparameters.learning_rate=3e-3"], "hyperparameters.learning_rate 0.001 -> "
                                                       "0.003", 0),
    (["--config", "goal"], "network_settings.hidden_units 16 -> 32", 2),  # other shapes
    (["--num-envs", "2"], "num_envs 4 -> 2", 0),
    (["--seed", "3"], "seed 0 -> 3", 0),
    (["--env-kwargs", '{"num_agents": 3}'], "env_kwargs {} -> {'num_agents': 3}", 0),
    (["groupenvs/GoalMemory-v0"], "environment 'Goal-v0' -> 'groupenvs/GoalMemory-v0'", 0),
])
def test_resume_refuses_other_settings_unless_forced(tmp_path, capsys, argv, fragment, forced):
    run = tmp_path / "run"
    train("Goal-v0", small_config(), run_dir=run)
    env = argv[:1] if not argv[0].startswith("-") else ["Goal-v0"]
    flags = argv[1:] if env == argv[:1] else argv
    assert main(["train", *env, "--run-dir", str(run), "--resume", *flags,
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "pass --force" in err
    assert main(["train", *env, "--run-dir", str(run), "--resume", "--force", *flags,
                 "--max-steps", "800", "--no-progress"]) == forced
    if forced:
        assert "does not fit this network configuration" in capsys.readouterr().err
    else:
        assert saved_steps(run) >= 800


def test_python_resume_uses_the_runs_config(tmp_path):
    run = tmp_path / "run"
    first = train("Goal-v0", small_config(), {"num_agents": 3}, run_dir=run)
    more = train("Goal-v0", run_dir=run, resume=True)
    assert more.agent_steps == first.agent_steps  # max_steps reached: nothing more to do
    with pytest.raises(ValueError, match="num_envs 4 -> 16"):
        train("Goal-v0", POCAConfig(), run_dir=run, resume=True)
    result = train("Goal-v0", small_config(max_steps=900), run_dir=run, resume=True)
    assert result.agent_steps >= 900
    assert checkpoint.load(run / "checkpoints" / "latest.pt")["env_kwargs"] == {"num_agents": 3}


def test_a_forced_resume_with_no_step_left_saves_the_config_it_wrote(tmp_path):
    """config.json says the new setting; the checkpoint that a later resume reads must too
    (it kept the old one when the run had nothing left to train). A plain resume with nothing
    to do rewrites nothing."""
    run = tmp_path / "run"
    train("Goal-v0", small_config(), run_dir=run)
    latest = run / "checkpoints" / "latest.pt"
    before = latest.stat().st_mtime_ns
    train("Goal-v0", run_dir=run, resume=True)
    assert latest.stat().st_mtime_ns == before
    train("Goal-v0", small_config(**{"hyperparameters.beta": 0.02}), run_dir=run, resume=True,
          force=True)
    shown = json.loads((run / "config.json").read_text())["config"]["hyperparameters"]["beta"]
    assert shown == checkpoint.load(latest)["config"]["hyperparameters"]["beta"] == 0.02


def test_wall_seconds_go_on_across_a_resume(tmp_path):
    run = tmp_path / "run"
    train("Goal-v0", small_config(), run_dir=run)
    train("Goal-v0", small_config(max_steps=1200), run_dir=run, resume=True)
    with open(run / "metrics.csv", newline="") as f:
        rows = [(int(r["agent_steps"]), float(r["wall_s"])) for r in csv.DictReader(f)]
    assert [s for s, _ in rows] == sorted(s for s, _ in rows) and rows[-1][0] >= 1200
    walls = [w for _, w in rows]
    assert walls == sorted(walls), walls  # no restart at 0 where the second process began


def test_a_run_folder_is_claimed_by_one_process(tmp_path, capsys):
    run = tmp_path / "run"
    with runfolder.claim(run, fresh=True, agent_steps=0):
        with pytest.raises(runfolder.RunFolderError, match="in use by another training "
                                                           f"process \\(pid {os.getpid()}\\)"):
            train("Goal-v0", small_config(), run_dir=run)
        assert main(["train", "Goal-v0", "--run-dir", str(run), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "in use by another training process" in err
        # a resume of the run before its first checkpoint: not "a run stopped before it"
        with pytest.raises(runfolder.RunFolderError, match="in use by another training "):
            train("Goal-v0", run_dir=run, resume=True)
        assert main(["train", "Goal-v0", "--run-dir", str(run), "--resume"]) == 2
        assert "in use by another training process" in capsys.readouterr().err
    assert not (run / "metrics.csv").exists()  # nobody wrote into the held folder
    train("Goal-v0", small_config(), run_dir=run)  # released: free again
    with pytest.raises(runfolder.RunFolderError, match="already holds a run; pass --resume"):
        train("Goal-v0", small_config(), run_dir=run)
    capsys.readouterr()


def test_default_run_folders_do_not_collide(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(time, "strftime", lambda fmt: "20260101-000000")
    argv = ["train", "Goal-v0", "--max-steps", "150", "--set", "hyperparameters.buffer_size=128",
            "--set", "hyperparameters.batch_size=64", "--num-envs", "4", "--no-progress"]
    assert main(argv) == 0 and main(argv) == 0
    runs = sorted(p.name for p in Path("runs/Goal-v0").iterdir())
    assert runs == ["20260101-000000", "20260101-000000-2"]
    capsys.readouterr()


def test_an_exception_from_the_env_saves_then_reraises(tmp_path):
    trainer = Trainer(make_env("Goal-v0", 4), small_config(max_steps=5000), tmp_path, "Goal-v0",
                      progress=False)
    step = trainer.env.step

    def failing(actions):
        if trainer.updates == 3:
            raise OSError("the simulator went away")
        return step(actions)

    trainer.env.step = failing
    with pytest.raises(OSError, match="the simulator went away") as info:
        trainer.run()
    assert info.traceback[-1].name == "failing"  # the original traceback
    state = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert state["updates"] == 3 and state["agent_steps"] == trainer.agent_steps


def test_an_exception_inside_update_saves_the_state_before_it(tmp_path):
    trainer = Trainer(make_env("Goal-v0", 4), small_config(max_steps=5000), tmp_path, "Goal-v0",
                      progress=False)
    before = {}
    original = trainer.update

    def update(rollout):
        if trainer.updates == 2:
            before.update({k: v.clone() for k, v in trainer.actor.state_dict().items()})
            trainer.optimizer.step = lambda *a, **k: (_ for _ in ()).throw(
                RuntimeError("bug in the middle of an update"))
            for p in trainer.actor.parameters():  # half-applied: parameters already changed
                p.data.add_(1.0)
        return original(rollout)

    trainer.update = update
    with pytest.raises(RuntimeError, match="bug in the middle"):
        trainer.run()
    state = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert state["updates"] == 2
    for name, value in before.items():
        assert torch.equal(state["actor"][name], value), name


def test_time_cadence_saves_without_a_step_interval(tmp_path, monkeypatch):
    monkeypatch.setattr(runfolder, "SAVE_EVERY_SECONDS", 0.0)
    trainer = Trainer(make_env("Goal-v0", 4), small_config(max_steps=500,
                                                           checkpoint_interval=10**9),
                      tmp_path, "Goal-v0", progress=False)
    trainer.run()
    assert len(list((tmp_path / "checkpoints").glob("step-*.pt"))) >= 3


def test_truncate_metrics_keeps_rows_up_to_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("agent_steps,x\n100,a\n200,b\n300,c\n150,d\n40")
    runfolder.truncate_metrics(path, 200)
    assert path.read_text().splitlines() == ["agent_steps,x", "100,a", "200,b"]
    path.write_text("agent_steps,x\n100,a\n20")  # a row cut short by kill -9
    runfolder.truncate_metrics(path, 200)
    assert path.read_text().splitlines() == ["agent_steps,x", "100,a"]


def test_interrupts_wait_inside_held_blocks_and_fire_once():
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    done = False
    with runfolder.Interrupts() as signals:
        with pytest.raises(KeyboardInterrupt):
            with signals.held():
                os.kill(os.getpid(), signal.SIGTERM)
                done = True  # still running: the signal waits
        assert done
        os.kill(os.getpid(), signal.SIGINT)  # after the first, signals only wait for the exit
        with signals.held(then_raise=False):
            pass
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


def test_a_run_killed_before_its_first_checkpoint_starts_again(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "metrics.csv").write_text("agent_steps,episodes\n100,3\n")
    (run / "checkpoints" / "latest.pt4x2.tmp").write_bytes(b"half")
    assert main(["train", "Goal-v0", "--run-dir", str(run), "--resume", "--no-progress"]) == 2
    assert "holds no checkpoint to resume from" in capsys.readouterr().err
    train("Goal-v0", small_config(), run_dir=run)
    assert metrics(run)[0] > 100 and not list((run / "checkpoints").glob("*.tmp"))
    (run / "checkpoints" / "latest.pt4x2.tmp").write_bytes(b"half")
    train("Goal-v0", small_config(max_steps=800), run_dir=run, resume=True)
    assert not list((run / "checkpoints").glob("*.tmp"))


def spawning(render_mode=None):
    """A PettingZoo env that adds agents under new names (needs max_agents), with frames."""
    from tests.test_adapters import Spawning

    env = Spawning()
    env.render_mode = render_mode
    env.render = lambda: np.zeros((8, 8, 3), np.uint8)
    return env


def test_a_resume_refuses_agents_in_other_slots_than_the_run_saved(tmp_path):
    """A run saved before slots were put in name order, or an env whose agents changed names:
    the absorbing critic would read them in other slots, silently."""
    run = tmp_path / "run"
    train("tests.test_adapters:Leaving", small_config(), run_dir=run)
    latest = run / "checkpoints" / "latest.pt"
    state = checkpoint.load(latest)
    assert state["slot_names"] == ["a_0", "a_1", "a_2"]
    checkpoint.save(latest, {**state, "slot_names": ["a_2", "a_0", "a_1"]})
    with pytest.raises(checkpoint.CheckpointError, match=r"saved with the agents in slots "
                       r"\['a_2', 'a_0', 'a_1'\]; this env puts them in \['a_0', 'a_1', 'a_2'\]"):
        train("tests.test_adapters:Leaving", small_config(max_steps=900), run_dir=run,
              resume=True)
    assert train("tests.test_adapters:Leaving", small_config(max_steps=700), run_dir=run,
                 resume=True, force=True).agent_steps >= 700
    state = checkpoint.load(latest)
    del state["slot_names"]  # a checkpoint from before slot names were kept
    checkpoint.save(latest, state)
    assert train("tests.test_adapters:Leaving", small_config(max_steps=900), run_dir=run,
                 resume=True).agent_steps >= 900


def test_max_agents_stays_with_the_run(tmp_path, monkeypatch, capsys):
    """The slots a run was trained with are saved: eval, play and resume make the env so
    without --max-agents again, and a resume that changes them is refused without --force."""
    monkeypatch.chdir(tmp_path)
    env, latest = "tests.test_run_safety:spawning", "run/checkpoints/latest.pt"
    assert main(["train", env, "--max-agents", "4", "--run-dir", "run", *FAST,
                 "--max-steps", "300"]) == 0
    assert checkpoint.load(Path(latest))["max_agents"] == 4
    assert json.loads(Path("run/config.json").read_text())["max_agents"] == 4
    assert main(["eval", env, "--checkpoint", latest, "--episodes", "2"]) == 0
    assert main(["play", env, "--checkpoint", latest, "--episodes", "1", "--record",
                 "spawn.gif"]) == 0
    assert main(["train", env, "--run-dir", "run", "--resume", "--max-steps", "600",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["train", env, "--run-dir", "run", "--resume", "--max-agents", "6",
                 "--max-steps", "900", "--no-progress"]) == 2
    assert "max_agents 4 -> 6" in capsys.readouterr().err


def test_a_damaged_latest_checkpoint_names_the_ones_to_resume_from(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "groupenvs/Goal-v0", "--config", "goal", "--run-dir", str(run),
                 "--max-steps", "1500", *FAST]) == 0
    folder = run / "checkpoints"
    kept = sorted(p.name for p in folder.glob("step-*.pt"))
    assert kept
    (folder / "latest.pt").write_bytes((folder / "latest.pt").read_bytes()[:100])
    capsys.readouterr()
    resume = ["train", "groupenvs/Goal-v0", "--run-dir", str(run), "--resume", "--max-steps",
              "2500", "--no-progress"]
    assert main(resume) == 2
    assert f"the run also keeps {kept}: copy one over latest.pt" in capsys.readouterr().err
    (folder / "latest.pt").write_bytes((folder / kept[0]).read_bytes())
    assert main(resume) == 0 and saved_steps(run) >= 2500


def test_a_closure_factory_is_recorded_by_the_module_attribute_that_holds_it(tmp_path,
                                                                           monkeypatch):
    """PettingZoo's env modules hold `parallel_env` as a closure made by `parallel_wrapper_fn`:
    its qualname (`parallel_wrapper_fn.<locals>.par_fn`) is the same for every env and no
    process can import it, so a run recorded every PettingZoo env alike and a resume on
    another env went unnoticed. The attribute that holds it names it; one that no module
    holds (a lambda) gets a fingerprint of what it computes."""
    from poca.adapters import env_name

    (tmp_path / "closures.py").write_text(
        "from envs.pettingzoo import GroupParallelEnv\n\n\n"
        "def wrapper(num_agents):\n"
        "    def par_fn():\n"
        "        return GroupParallelEnv('Goal-v0', num_agents=num_agents)\n"
        "    return par_fn\n\n\n"
        "two = wrapper(2)\nthree = wrapper(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import closures

    assert (env_name(closures.two), env_name(closures.three)) == ("closures:two",
                                                                  "closures:three")
    assert make_env(env_name(closures.three), 1).spec.num_agents == 3  # what the CLI makes
    run = tmp_path / "run"
    train(closures.two, small_config(), run_dir=run)
    with pytest.raises(ValueError, match="environment 'closures:two' -> 'closures:three'"):
        train(closures.three, small_config(max_steps=900), run_dir=run, resume=True)
    # held by no module: the qualname and a fingerprint, the same in another process and
    # different for other values closed over
    unheld = [env_name(closures.wrapper(n)) for n in (4, 4, 5)]
    assert unheld[0].startswith("closures:wrapper.<locals>.par_fn#")
    assert unheld[0] == unheld[1] != unheld[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    elsewhere = subprocess.run(
        [sys.executable, "-c", "import closures; from poca.adapters import env_name; "
                               "print(env_name(closures.wrapper(4)))"],
        env=env, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert elsewhere == unheld[0]
    # runs saved before the fingerprint still resume
    assert runfolder.same_env_id(unheld[0], "closures:wrapper.<locals>.par_fn")
    assert not runfolder.same_env_id(unheld[0], unheld[2])
    assert runfolder.same_env_id(  # every PettingZoo env was recorded so: nothing to compare
        "mpe2.simple_spread_v3:parallel_env",
        "pettingzoo.utils.conversions:parallel_wrapper_fn.<locals>.par_fn")
    assert not runfolder.same_env_id("Goal-v0",
                                     "pettingzoo.utils.conversions:parallel_wrapper_fn.<locals>."
                                     "par_fn")
    assert not runfolder.same_env_id("Goal-v0", "mytrain:<lambda>")
    assert runfolder.same_env_id("mytrain:<lambda>#3f2a9c01", "mytrain:<lambda>")


def test_a_fingerprint_is_the_same_in_every_process_and_tells_arrays_apart(tmp_path):
    """Set order follows string hashing, which differs per process (PYTHONHASHSEED); a numpy
    repr elides the middle of a large array; an object array's bytes are pointers."""
    import numpy as np

    from poca.adapters import env_name

    (tmp_path / "fp_mod.py").write_text(
        "N = 2\n\n\n"
        "def chooser(key):\n    return lambda: key in {'alpha', 'beta', 'gamma', 'delta'}\n\n\n"
        "def holding(values):\n    return lambda: values\n\n\n"
        "def reads_n():\n    return lambda: N\n\n\n"
        "def calling(k):\n    inner = lambda: k  # noqa: E731\n    return lambda: inner()\n")
    code = ("import fp_mod, numpy as np; from poca.adapters import env_name; "
            "print(env_name(fp_mod.chooser({'x', 'y', 'z', 'w'})), "
            "env_name(fp_mod.holding(np.array([{'k': 1}, 'x', None], dtype=object))), "
            "env_name(fp_mod.holding({k: 1 for k in {'p', 'q', 'r', 's'}})), "
            "env_name(__import__('functools').partial(fp_mod.holding, lambda: 1, {'a', 'b'})))")
    names = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH":
                                 os.pathsep.join([str(tmp_path), str(ROOT)])},
                            timeout=60, check=True).stdout.strip() for seed in range(4)}
    # object arrays too (pointers), and a partial's arguments (a lambda's repr holds an address)
    assert len(names) == 1 and names.pop().count("#") == 4
    sys.path.insert(0, str(tmp_path))
    try:
        import fp_mod
    finally:
        sys.path.remove(str(tmp_path))
    big = np.arange(5000.0)
    other = big.copy()
    other[2500] = -1.0
    assert env_name(fp_mod.holding(big)) != env_name(fp_mod.holding(other))
    assert env_name(fp_mod.holding(big)) == env_name(fp_mod.holding(big.copy()))
    # what it reads through a function it closes over, and the plain globals it reads
    assert env_name(fp_mod.calling(2)) != env_name(fp_mod.calling(3))
    before = env_name(fp_mod.reads_n())
    fp_mod.N = 3
    assert env_name(fp_mod.reads_n()) != before

    class NoRepr:
        def __repr__(self):
            raise RuntimeError("no repr")

    cycle = []
    cycle.append(cycle)
    odd = (NoRepr(), torch.eye(3).to_sparse(), cycle)  # a name never stops a run
    assert "#" in env_name(fp_mod.holding(odd))

    class AnswersAnything(dict):
        def __getattr__(self, key):
            return self[key]

        def __call__(self):
            return None

    assert env_name(AnswersAnything()).endswith(":AnswersAnything")
    nest = []
    for _ in range(60):  # one list shared at every level: 2**60 paths, each part once
        nest = [nest, nest]
    assert "#" in env_name(fp_mod.holding(nest))


def test_a_resume_imports_the_recorded_module_of_the_package_that_holds_the_factory(
        tmp_path, monkeypatch):
    """mpe2's `parallel_env` says it comes from pettingzoo (`pettingzoo.utils.conversions`,
    where the closure is made); the package to import a recorded module from is the one that
    holds it, named by the run (`mpe2.simple_spread_v3`)."""
    (tmp_path / "conv_helpers.py").write_text(
        "from envs.pettingzoo import GroupParallelEnv\n\n\n"
        "def wrap(num_agents):\n"
        "    def par_fn():\n"
        "        return GroupParallelEnv('Goal-v0', num_agents=num_agents)\n"
        "    return par_fn\n")
    (tmp_path / "pkgz").mkdir()
    (tmp_path / "pkgz" / "__init__.py").write_text("")
    (tmp_path / "pkgz" / "implementation.py").write_text("from conv_helpers import wrap\n\n"
                                                          "par = wrap(2)\n")
    (tmp_path / "pkgz" / "v1.py").write_text("from pkgz.implementation import par  # noqa\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import pkgz
    import pkgz.v1

    run = tmp_path / "run"
    train(pkgz.v1.par, small_config(), run_dir=run)
    assert checkpoint.load(run / "checkpoints" / "latest.pt")["env_id"] == "pkgz.v1:par"
    del sys.modules["pkgz.v1"], pkgz.v1  # as in a new process that imported the other path
    result = train("pkgz.implementation:par", small_config(max_steps=900), run_dir=run,
                   resume=True)
    assert result.agent_steps >= 900


def test_a_name_in_a_checkpoint_imports_nothing_outside_the_factorys_package(tmp_path,
                                                                            monkeypatch):
    """A resume compares the run's recorded env with the one given by importing the recorded
    name's module, but only a public module of the factory's own package: `unittest.__main__`
    (unittest is imported with torch) would run test discovery."""
    from poca.adapters import recorded_as

    (tmp_path / "plain_factory.py").write_text("def make():\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import plain_factory

    before = set(sys.modules)
    for saved in ("unittest.__main__:main", "json.tool:main", "plain_factory._x:make"):
        assert recorded_as(plain_factory.make, "plain_factory:make", saved) == \
            "plain_factory:make"
    assert not {"unittest.__main__", "json.tool"} & (set(sys.modules) - before)
    assert recorded_as("this", "this", "plain_factory:make") == "this"  # a bare ID: no import
    assert "this" not in set(sys.modules) - before


def test_a_resume_accepts_the_same_factory_under_another_import_path(tmp_path, monkeypatch):
    """PettingZoo's `from pettingzoo.sisl import pursuit_v5` leaves that module out of
    sys.modules: one `parallel_env` is recorded under the module it was made in by one import
    and under `pursuit_v5` by another. A resume that names the very object another way goes
    on (with the run's name); another object is still refused."""
    (tmp_path / "made_here.py").write_text(
        "from envs.pettingzoo import GroupParallelEnv\n\n\n"
        "def wrapper(num_agents):\n"
        "    def par_fn():\n"
        "        return GroupParallelEnv('Goal-v0', num_agents=num_agents)\n"
        "    return par_fn\n\n\n"
        "par = wrapper(2)\nother = wrapper(2)\n")
    (tmp_path / "public_alias_v1.py").write_text("from made_here import other, par  # noqa\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import made_here

    run = tmp_path / "run"
    train(made_here.par, small_config(), run_dir=run)
    assert checkpoint.load(run / "checkpoints" / "latest.pt")["env_id"] == "made_here:par"
    assert main(["train", "public_alias_v1:par", "--run-dir", str(run), "--resume",
                 "--max-steps", "900", "--no-progress"]) == 0
    saved = checkpoint.load(run / "checkpoints" / "latest.pt")
    assert saved["env_id"] == "made_here:par" and saved["agent_steps"] >= 900
    assert main(["train", "public_alias_v1:other", "--run-dir", str(run), "--resume",
                 "--max-steps", "1200", "--no-progress"]) == 2


def test_a_run_trained_on_a_partial_resumes_in_another_process(tmp_path, monkeypatch):
    """A callable is recorded as module:qualname (a partial with its arguments), not its repr
    with a memory address that differs in every process."""
    import functools

    (tmp_path / "factories.py").write_text(
        "from envs.pettingzoo import GroupParallelEnv\n\n\n"
        "def goal(num_agents=2):\n    return GroupParallelEnv('Goal-v0', num_agents=num_agents)\n")
    run = tmp_path / "run"
    script = ("import functools, sys; import factories; from poca.trainer import train; "
              "from tests.test_run_safety import small_config; "
              "train(functools.partial(factories.goal, num_agents=3), small_config(), "
              f"run_dir={str(run)!r})")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = checkpoint.load(run / "checkpoints" / "latest.pt")
    assert saved["env_id"] == "partial(factories:goal, num_agents=3)"
    monkeypatch.syspath_prepend(str(tmp_path))
    import factories

    result = train(functools.partial(factories.goal, num_agents=3),
                   small_config(max_steps=900), run_dir=run, resume=True)
    assert result.agent_steps >= 900 > saved["agent_steps"]
    with pytest.raises(ValueError, match=r"partial\(factories:goal, num_agents=3\)' -> "
                                         r"'partial\(factories:goal, num_agents=2\)'"):
        train(functools.partial(factories.goal, num_agents=2), small_config(max_steps=1200),
              run_dir=run, resume=True)
    # runs saved before this recorded a callable by its bare qualname; they still resume
    assert runfolder.same_env_id("factories:goal", "goal")
    assert not runfolder.same_env_id("factories:goal", "other")
    assert not runfolder.same_env_id("Goal-v0", "goal")


def test_a_factory_of_the_training_script_resumes_from_the_cli(tmp_path, capsys):
    """A script's own function is recorded under the script's module name (not `__main__`),
    the module:factory ID that `poca train` imports from the script's folder."""
    (tmp_path / "mytrain.py").write_text(
        "import sys\n\n"
        "from envs.pettingzoo import GroupParallelEnv\n"
        "from poca.trainer import train\n"
        "from tests.test_run_safety import small_config\n\n\n"
        "def goal():\n    return GroupParallelEnv('Goal-v0')\n\n\n"
        "def wrapper(num_agents):\n"
        "    def par_fn():\n"
        "        return GroupParallelEnv('Goal-v0', num_agents=num_agents)\n"
        "    return par_fn\n\n\n"
        "made = wrapper(3)\n\n"
        "if __name__ == '__main__' and sys.argv[1:] == ['resume']:\n"
        "    train(made, {'max_steps': 900}, run_dir='cli_made', resume=True)\n"
        "elif __name__ == '__main__':\n    train(goal, small_config(), run_dir='run')\n"
        "    train(made, small_config(), run_dir='made')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "mytrain.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert saved["env_id"] == "mytrain:goal"
    done = subprocess.run([sys.executable, "-m", "poca.cli", "train", "mytrain:goal",
                           "--run-dir", "run", "--resume", "--max-steps", "900",
                           "--no-progress"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")["agent_steps"] >= 900
    # a closure the script holds is fingerprinted (its own __main__ is not scanned); the CLI
    # resumes it by the script's attribute, the same object
    made = checkpoint.load(tmp_path / "made" / "checkpoints" / "latest.pt")["env_id"]
    assert made.startswith("mytrain:wrapper.<locals>.par_fn#")
    done = subprocess.run([sys.executable, "-m", "poca.cli", "train", "mytrain:made",
                           "--run-dir", "made", "--resume", "--max-steps", "900",
                           "--no-progress"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    # and the other way: a run the CLI started on the script's closure resumes from the script
    done = subprocess.run([sys.executable, "-m", "poca.cli", "train", "mytrain:made",
                           "--run-dir", "cli_made", "--no-progress", "--max-steps", "600",
                           "--num-envs", "4"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run([sys.executable, "mytrain.py", "resume"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert checkpoint.load(tmp_path / "cli_made" / "checkpoints" / "latest.pt")[
        "agent_steps"] >= 900
    # runs recorded as __main__:qualname before this still resume under the script's name
    assert runfolder.same_env_id("mytrain:goal", "__main__:goal")
    assert not runfolder.same_env_id("mytrain:goal", "__main__:other")


@pytest.mark.parametrize("saved, given, changed", [
    ("linear", None, False),  # saved before unset schedules existed; the same config today
    (None, "linear", False),  # follows linear: the same as saying linear
    ("constant", None, True),  # None follows linear here: a real change
])
def test_resume_compares_beta_and_epsilon_schedules_as_they_run(saved, given, changed):
    linear = {"hyperparameters.learning_rate_schedule": "linear"}
    run_config = small_config(**linear).to_dict()
    run_config["hyperparameters"].update(beta_schedule=saved, epsilon_schedule=saved)
    state = {"config": run_config, "env_id": "Goal-v0", "env_kwargs": {}}
    config = small_config(**linear, **{"hyperparameters.beta_schedule": given,
                                       "hyperparameters.epsilon_schedule": given})
    if changed:
        with pytest.raises(ValueError, match=r"beta_schedule 'constant' -> 'linear'"):
            runfolder.resumed_config(state, config, "Goal-v0", None, None, False)
    else:
        assert runfolder.resumed_config(state, config, "Goal-v0", None, None, False)[0] == config


def test_a_folder_with_step_checkpoints_but_no_latest_is_not_taken_by_a_new_run(tmp_path,
                                                                                capsys):
    run = tmp_path / "run"
    train("Goal-v0", small_config(max_steps=900, checkpoint_interval=300), run_dir=run)
    (run / "checkpoints" / "latest.pt").unlink()
    kept = [p.name for p in runfolder.step_checkpoints(run / "checkpoints")]
    assert kept and main(["train", "Goal-v0", "--run-dir", str(run), "--resume",
                          "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"it keeps {kept}: copy one over" in err
    with pytest.raises(runfolder.RunFolderError, match="already holds a run"):
        train("Goal-v0", small_config(), run_dir=run)
    assert [p.name for p in runfolder.step_checkpoints(run / "checkpoints")] == kept


def test_step_checkpoints_are_ordered_by_their_agent_steps(tmp_path):
    for n in (999_999_999, 1_000_000_000, 5):
        (tmp_path / f"step-{n:09d}.pt").touch()
    assert [p.name for p in runfolder.step_checkpoints(tmp_path)] == [
        "step-000000005.pt", "step-999999999.pt", "step-1000000000.pt"]


def test_a_resume_with_more_steps_keeps_the_derived_rollout_sizes(tmp_path):
    """Unset sizes follow max_steps (buffer capped at max_steps / 32): a resume that raises
    max_steps would otherwise change what each update learns from."""
    config = POCAConfig().override({"num_envs": 2, "max_steps": 640,
                                    "network_settings.hidden_units": 16})
    assert config.rollout_sizes(2) == (20, 5)
    run = tmp_path / "run"
    train("Goal-v0", config, run_dir=run)
    for steps in (1600, 3200):  # the second resume compares with sizes saved by the first
        result = train("Goal-v0", config.override({"max_steps": steps}), run_dir=run,
                       resume=True)
        state = checkpoint.load(result.checkpoint)
        saved = state["config"]["hyperparameters"]
        assert (saved["buffer_size"], saved["batch_size"]) == (20, 5)
        assert state["agent_steps"] >= steps


def test_resume_with_a_config_file_keeps_the_run_s_own_max_steps(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["train", "Goal-v0", "--config", "goal", "--max-steps", "1000", "--run-dir", run,
                 "--no-progress"]) == 0
    steps = checkpoint.load(Path(run) / "checkpoints" / "latest.pt")["agent_steps"]
    assert main(["train", "Goal-v0", "--config", "goal", "--run-dir", run, "--resume",
                 "--no-progress"]) == 0  # the preset says 20,000; the run says 1,000
    assert checkpoint.load(Path(run) / "checkpoints" / "latest.pt")["agent_steps"] == steps
    assert json.loads((Path(run) / "config.json").read_text())["config"]["max_steps"] == 1000
    capsys.readouterr()


def test_an_empty_config_a_flag_given_twice_and_a_folder_as_checkpoint_are_usage_errors(
        tmp_path, capsys):
    with pytest.raises(SystemExit) as usage:  # argparse's own exit
        main(["train", "Goal-v0", "--config", "", "--no-progress"])
    assert usage.value.code == 2 and "--config: is empty" in capsys.readouterr().err
    assert main(["train", "Goal-v0", "--seed", "6", "--set", "seed=5", "--run-dir",
                 str(tmp_path / "r"), "--no-progress"]) == 2
    assert "both --seed and --set seed=... given" in capsys.readouterr().err
    run = tmp_path / "run"
    train("Goal-v0", small_config(max_steps=200), run_dir=run)
    assert main(["eval", "Goal-v0", "--checkpoint", str(run), "--episodes", "2"]) == 2
    assert f"is a directory, not a checkpoint file; a run folder's latest is {run}" in (
        capsys.readouterr().err)


def test_a_forced_resume_with_more_envs_derives_its_sizes_for_them(tmp_path):
    config = POCAConfig().override({"num_envs": 1, "max_steps": 100_000})
    state = {"config": config.to_dict(), "env_id": "Goal-v0", "env_kwargs": {},
             "spec": {"num_agents": 2}}
    more = config.override({"num_envs": 64, "max_steps": 200_000})
    resumed, *_ = runfolder.resumed_config(state, more, "Goal-v0", None, None, force=True)
    hp = resumed.hyperparameters
    expected = more.override({"max_steps": 100_000}).rollout_sizes(2)
    assert (hp.buffer_size, hp.batch_size) == expected == (3125, 781)
    (tmp_path / "step-best.pt").touch()  # a user's file: never pruned as a step checkpoint
    assert runfolder.step_checkpoints(tmp_path) == []


def test_checkpoints_get_the_permissions_of_the_runs_other_files(tmp_path):
    """Written through a temporary file, yet readable as metrics.csv is (the umask's mode, not
    the owner-only mode of tempfile.mkstemp)."""
    old = os.umask(0o022)
    try:
        train("Goal-v0", small_config(), run_dir=tmp_path / "run")
    finally:
        os.umask(old)
    run = tmp_path / "run"
    modes = {p.name: p.stat().st_mode & 0o777 for p in
             [run / "metrics.csv", run / "config.json", *(run / "checkpoints").iterdir()]}
    assert set(modes.values()) == {0o644}, modes


def test_a_new_run_refuses_files_of_those_names_that_no_run_wrote(tmp_path, capsys):
    mine = tmp_path / "mydata"
    mine.mkdir()
    (mine / "metrics.csv").write_text(",loss,acc\n0,0.5,0.9\n")  # pandas' to_csv
    (mine / "notes.txt").write_text("other names are left alone\n")
    assert main(["train", "groupenvs/Goal-v0", "--run-dir", str(mine), "--max-steps", "300",
                 *FAST]) == 2
    assert "holds metrics.csv that no run wrote" in capsys.readouterr().err
    assert (mine / "metrics.csv").read_text() == ",loss,acc\n0,0.5,0.9\n"
    (mine / "metrics.csv").unlink()
    (mine / "config.json").write_text("keep")
    assert main(["train", "groupenvs/Goal-v0", "--run-dir", str(mine), "--max-steps", "300",
                 *FAST]) == 2
    assert "holds config.json that no run wrote" in capsys.readouterr().err
    (mine / "config.json").unlink()
    assert main(["train", "groupenvs/Goal-v0", "--run-dir", str(mine), "--max-steps", "300",
                 *FAST]) == 0
    assert (mine / "notes.txt").exists()
    # what a run wrote before dying ahead of its first checkpoint is its own: a new run takes it
    (mine / "checkpoints" / "latest.pt").unlink()
    for step in runfolder.step_checkpoints(mine / "checkpoints"):
        step.unlink()
    assert main(["train", "groupenvs/Goal-v0", "--run-dir", str(mine), "--max-steps", "300",
                 *FAST]) == 0
    with pytest.raises(SystemExit) as usage:  # "$UNSET": not the current folder
        main(["train", "groupenvs/Goal-v0", "--run-dir", "", *FAST])
    assert usage.value.code == 2
    assert "argument --run-dir: is empty" in capsys.readouterr().err


def test_config_json_says_what_the_derived_settings_became(tmp_path):
    train("Goal-v0", POCAConfig().override({"max_steps": 300}), run_dir=tmp_path / "run")
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    hp = saved["config"]["hyperparameters"]
    assert hp["buffer_size"] is None and hp["beta_schedule"] is None  # as given: derived
    state = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    config = POCAConfig.from_dict(state["config"])
    assert saved["derived"] == {"buffer_size": config.rollout_sizes(2)[0],
                                "batch_size": config.rollout_sizes(2)[1],
                                **config.hyperparameters.schedules()}


def test_tensorboard_hides_what_a_killed_process_logged_past_the_checkpoint(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "run"
    train("Goal-v0", small_config(), run_dir=run)
    at = checkpoint.load(run / "checkpoints" / "latest.pt")["agent_steps"]
    killed = SummaryWriter(str(run / "tensorboard"))  # rows past the checkpoint, then kill -9
    for step in (at + 100, at + 250):
        killed.add_scalar("episodes", 1e6, step)
    killed.close()
    train("Goal-v0", small_config(max_steps=at + 300), run_dir=run, resume=True)
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    logged = [(e.step, e.value) for e in events.Scalars("episodes")]
    with open(run / "metrics.csv") as f:
        rows = [(int(r["agent_steps"]), float(r["episodes"])) for r in csv.DictReader(f)]
    assert logged == rows


def test_a_checkpoint_that_cannot_be_written_is_one_line(tmp_path, monkeypatch, capsys):
    """A read-only folder or a full disk: an OSError of our own writing, not torch's
    RuntimeError from inside its zip writer."""
    def no_space(path, mode="r", *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(checkpoint, "open", no_space, raising=False)
    assert main(["train", "groupenvs/Goal-v0", "--run-dir", str(tmp_path / "run"),
                 "--max-steps", "300", *FAST]) == 2
    err = capsys.readouterr().err
    assert "error: cannot write the checkpoint" in err and "No space left on device" in err
    assert "Traceback" not in err and not list((tmp_path / "run").rglob("*.tmp"))


def test_a_run_killed_before_its_header_reached_the_disk_is_still_its_own(tmp_path):
    """kill -9 before the first row could leave metrics.csv empty: a new run takes the folder,
    and a resume writes the header its rows need."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").write_text("")
    train("Goal-v0", small_config(), run_dir=run)
    (run / "metrics.csv").write_text("")  # killed after the checkpoint, before the first row
    train("Goal-v0", small_config(max_steps=1200), run_dir=run, resume=True)
    with open(run / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(int(r["agent_steps"]) > 0 for r in rows)


def test_config_json_is_whole_or_unchanged_and_a_failed_write_is_one_line(tmp_path,
                                                                          monkeypatch):
    target = tmp_path / "config.json"
    target.write_text("{}")

    def no_space(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runfolder.os, "replace", no_space)
    with pytest.raises(runfolder.RunFolderError, match=r"cannot write .*config.json: No space"):
        runfolder.write_atomically(target, '{"env_id": "x"}')
    assert target.read_text() == "{}" and [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_a_rolled_back_run_sets_the_abandoned_branch_aside(tmp_path):
    """Resumed from an earlier step file copied over latest.pt, the later step files belong to
    the branch left behind: moved aside (not deleted), they no longer outrank the new branch's
    files, which pruning deleted in their place (even the one just written, with keep 1). A
    second roll back to the same step keeps both abandoned branches."""
    run = tmp_path / "run"
    train("Goal-v0", small_config(max_steps=1200, keep_checkpoints=0), run_dir=run)
    folder = run / "checkpoints"
    steps = runfolder.step_checkpoints(folder)
    back, later = steps[1], steps[2:]
    assert later
    saved = back.read_bytes()
    branches = []
    for _ in range(2):
        (folder / "latest.pt").write_bytes(saved)
        result = train("Goal-v0", small_config(max_steps=1000, keep_checkpoints=1),
                       run_dir=run, resume=True, force=True)
        assert runfolder.step_checkpoints(folder) == [result.checkpoint]
        assert result.checkpoint.exists()
        branches.append(result.checkpoint.name)
    aside = folder / f"abandoned-after-{int(back.stem[5:])}"
    assert sorted(p.name for p in aside.iterdir()) == [p.name for p in later]
    assert [p.name for p in (folder / f"{aside.name}-2").iterdir()] == branches[:1]


def test_a_broken_tensorboard_install_costs_the_logs_not_the_run(tmp_path, monkeypatch):
    """An installed TensorBoard whose import fails with something else than ImportError (a
    protobuf version clash raises TypeError) killed the run before its first checkpoint."""
    import builtins

    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "torch.utils.tensorboard":
            raise TypeError("Descriptors cannot be created directly.")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken)
    with pytest.warns(RuntimeWarning, match="TensorBoard logs are off: importing it failed "
                                            r"\(TypeError: Descriptors cannot"):
        result = train("Goal-v0", small_config(), run_dir=tmp_path / "run")
    assert result.checkpoint.exists() and (tmp_path / "run" / "metrics.csv").exists()


def test_more_threads_than_cpus_warn():
    with pytest.warns(RuntimeWarning, match=r"torch threads on \d+ CPUs wait on each other"):
        Trainer(make_env("Goal-v0", 4), small_config(threads=(os.cpu_count() or 1) + 1),
                progress=False)


def test_a_run_saved_on_a_gpu_resumes_on_a_cpu(tmp_path):
    """What a CUDA run saves: its device, and its generator's 16-byte state (a CPU one holds
    5,056), which set_state refused as a checkpoint that did not fit."""
    run = tmp_path / "run"
    train("Goal-v0", small_config(), run_dir=run)
    latest = run / "checkpoints" / "latest.pt"
    state = checkpoint.load(latest)
    checkpoint.save(latest, {**state, "config": {**state["config"], "device": "cuda"},
                             "generator": torch.zeros(16, dtype=torch.uint8)})
    result = train("Goal-v0", small_config(max_steps=900), run_dir=run, resume=True)
    assert result.agent_steps >= 900


def test_a_resume_may_move_the_run_to_another_device():
    """Trained on a GPU, continued on a CPU: where it computes, not what it learns (threads
    round differently too, and may change)."""
    config = POCAConfig().override({"device": "cuda", "max_steps": 1000})
    state = {"config": config.to_dict(), "env_id": "Goal-v0", "env_kwargs": {},
             "spec": {"num_agents": 2}}
    moved, *_ = runfolder.resumed_config(state, config.override({"device": "cpu"}), "Goal-v0",
                                         None, None, force=False)
    assert moved.device == "cpu"
    with pytest.raises(ValueError, match="seed 0 -> 1"):
        runfolder.resumed_config(state, config.override({"device": "cpu", "seed": 1}),
                                 "Goal-v0", None, None, force=False)
