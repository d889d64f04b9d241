"""PettingZoo env copies stepped in worker processes (`num_env_workers`, `--env-workers`)."""

import functools
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv

from envs.pettingzoo import GroupParallelEnv
from poca import cli
from poca.adapters import ParallelEnvGroup, make_env
from poca.config import POCAConfig
from poca.trainer import train
from poca.workers import EnvWorkerError, WorkerEnvGroup

GOAL = functools.partial(GroupParallelEnv, "Goal-v0")
OBS, ACT = spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2)


def small_config(**over):
    base = {"hyperparameters.batch_size": 32, "hyperparameters.buffer_size": 128,
            "network_settings.hidden_units": 16, "network_settings.num_layers": 1,
            "num_envs": 5, "max_steps": 600, "checkpoint_interval": 300, "summary_freq": 150}
    return POCAConfig().override({**base, **over})


def test_same_seed_same_run_for_any_number_of_workers():
    logs = {}
    for workers in (0, 1, 2):
        result = train(GOAL, small_config(num_env_workers=workers, seed=3, max_steps=1000))
        logs[workers] = (result.episode_log, result.team_log, result.pays_group_reward)
    assert len(logs[0][0]) >= 10
    assert logs[1] == logs[0]
    assert logs[2] == logs[0]  # 5 copies over 2 workers: shares of 3 and 2 (padded)


def test_every_field_matches_the_in_process_adapter():
    # Baton Pass: agents join mid-episode, discrete actions with masks off, episode ends
    fn = functools.partial(GroupParallelEnv, "BatonPass-v0")
    here, there = ParallelEnvGroup(fn, 3), WorkerEnvGroup(fn, 3, 2)
    try:
        assert there.slot_names == here.slot_names == [f"agent_{i}" for i in range(4)]
        a, b = here.reset(seed=7), there.reset(seed=7)
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(120):
            for f in ("alive", "reward", "group_reward", "terminated", "truncated",
                      "group_done"):
                np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
            for x, y in zip(a.obs + a.final_obs, b.obs + b.final_obs, strict=True):
                np.testing.assert_array_equal(x, y)
            ended += int(a.group_done.sum())
            act = {"discrete": rng.integers(0, 5, (3, here.max_agents, 1))}
            a, b = here.step(act), there.step(act)
        assert ended > 0
    finally:
        there.close()
    assert there.vec.closed


class Failing(ParallelEnv):
    """Two agents; at episode step `at` the env does `what`: raise, die, or send a NaN reward."""

    metadata = {"name": "failing_v0"}

    def __init__(self, what="raise", at=3):
        self.what, self.at = what, at
        self.possible_agents = ["a", "b"]

    def observation_space(self, agent):
        return OBS

    def action_space(self, agent):
        return ACT

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, list(self.possible_agents)
        return {a: np.zeros(2, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        reward = 1.0
        if self.t == self.at:
            if self.what == "raise":
                raise RuntimeError("the physics engine broke")
            if self.what == "die":
                os._exit(3)
            reward = float("nan")
        obs = {a: np.zeros(2, np.float32) for a in self.agents}
        return (obs, dict.fromkeys(self.agents, reward), dict.fromkeys(self.agents, False),
                dict.fromkeys(self.agents, False), {a: {} for a in self.agents})


def test_an_exception_in_a_worker_reaches_the_trainer_with_its_traceback(tmp_path):
    with pytest.raises(EnvWorkerError) as err:
        train(Failing, small_config(num_env_workers=2), run_dir=tmp_path / "run")
    message = str(err.value)
    assert "env worker 0 (env copies 0-2) raised RuntimeError in step()" in message
    assert "the physics engine broke (raised by env copy 0, episode step 3)" in message
    assert "the worker's traceback" in message and 'raise RuntimeError("the physics' in message
    assert (tmp_path / "run" / "checkpoints" / "latest.pt").exists()  # the run was saved


def test_a_worker_that_dies_stops_the_run_naming_it():
    env = make_env(functools.partial(Failing, "die"), 4, workers=2)
    env.reset(seed=0)
    act = {"discrete": np.zeros((4, 2, 1), np.int64)}
    env.step(act)
    env.step(act)
    with pytest.raises(EnvWorkerError, match=r"env worker (0 \(env copies 0-1|1 \(env copies 2-3), "
                                            r"exit code 3\) stopped during step\(\)"):
        env.step(act)
    assert env.vec.closed
    with pytest.raises(RuntimeError, match="is closed"):
        env.step(act)


def test_bad_env_values_in_a_worker_name_the_copy_as_without_workers():
    env = make_env(functools.partial(Failing, "nan", at=2), 5, workers=2)
    env.reset(seed=0)
    act = {"discrete": np.zeros((5, 2, 1), np.int64)}
    env.step(act)
    with pytest.raises(ValueError, match=r"env worker 0: env copy 0, episode step 2: agent "
                                         r"'a': reward is nan"):
        env.step(act)
    assert env.vec.closed


def test_bad_actions_are_refused_in_the_trainers_process_naming_the_copy():
    env = make_env(GOAL, 5, workers=2)
    try:
        env.reset(seed=0)
        act = np.zeros((5, 2, 1), np.int64)
        act[4, 1] = 7
        with pytest.raises(ValueError, match="for env 4, agent_1 "):
            env.step({"discrete": act})
    finally:
        env.close()


class OnlyOne(Failing):
    """Failing that never fails, with an info action mask allowing only action 1."""

    def reset(self, seed=None, options=None):
        obs, infos = super().reset(seed, options)
        return obs, {a: {"action_mask": np.array([0, 1], np.int8)} for a in self.agents}

    def step(self, actions):
        obs, rew, term, trunc, _ = super().step(actions)
        return obs, rew, term, trunc, {a: {"action_mask": np.array([0, 1], np.int8)}
                                       for a in self.agents}


def test_masked_actions_are_refused_naming_the_copy_of_the_whole_batch():
    env = make_env(functools.partial(OnlyOne, at=-1), 5, workers=2)
    try:
        env.reset(seed=0)
        act = np.ones((5, 2, 1), np.int64)
        act[4, 1] = 0  # copy 4 runs in worker 1, where it is that worker's copy 1
        with pytest.raises(ValueError, match=r"not allowed by the action_mask \(allowed there: "
                                             r"\[1\]\) for env 4, b "):
            env.step({"discrete": act})
    finally:
        env.close()


def test_workers_are_refused_where_they_do_not_apply():
    with pytest.raises(ValueError, match=r"num_env_workers must be in \[0, num_envs=4\]"):
        POCAConfig().override({"num_envs": 4, "num_env_workers": 5})
    with pytest.raises(ValueError, match="num_env_workers must be in"):
        POCAConfig().override({"num_env_workers": -1})
    with pytest.raises(ValueError, match="applies only to PettingZoo ParallelEnvs"):
        make_env("Goal-v0", 4, workers=2)


def test_cli_env_workers_flag(tmp_path, capsys):
    code = cli.main(["train", "envs.pettingzoo:GroupParallelEnv", "--env-workers", "2",
                     "--num-envs", "4", "--max-steps", "300", "--no-progress",
                     "--set", "hyperparameters.buffer_size=128",
                     "--set", "hyperparameters.batch_size=32",
                     "--run-dir", str(tmp_path / "run")])
    assert code == 0
    assert "trained" in capsys.readouterr().out
    assert '"num_env_workers": 2' in (tmp_path / "run" / "config.json").read_text()


def test_an_interrupted_run_with_workers_returns_and_goes_on(monkeypatch, tmp_path):
    """Ctrl-C lands while the trainer waits for the workers' step: run() returns interrupted,
    and run() again goes on in the same run folder (the workers started over after the cut-short
    call are made out of the folder's lock: they must not hold it)."""
    from poca.trainer import Trainer

    config = small_config(num_env_workers=2, max_steps=1200)
    trainer = Trainer(make_env(GOAL, 5, workers=2), config, tmp_path / "run", progress=False)
    vec, calls = trainer.env.vec, []
    step_wait = vec.step_wait

    def cut_short(*args, **kwargs):
        calls.append(1)
        if len(calls) == 40:  # the step was sent; the trainer is interrupted waiting for it
            raise KeyboardInterrupt
        return step_wait(*args, **kwargs)

    monkeypatch.setattr(vec, "step_wait", cut_short)
    first = trainer.run()
    monkeypatch.undo()
    assert first.interrupted
    result = trainer.run()
    assert not result.interrupted and result.agent_steps >= 1200
    trainer.env.close()


def test_a_call_cut_short_after_some_workers_answered_starts_the_workers_over():
    """Ctrl-C between reading worker 0's answer and worker 1's leaves the pipes out of step:
    reset() starts the workers over, and the same seed gives the same episodes."""
    env = make_env(GOAL, 4, workers=2)
    first = env.reset(seed=5)
    env.vec.step_async({"discrete": env._pad(np.zeros((4, 2, 1), np.int64))})
    env.vec.parent_pipes[0].recv()  # worker 0's answer read, worker 1's not
    env._in_call = True  # as _wait leaves it when the interrupt lands inside the call
    again = env.reset(seed=5)
    for a, b in zip(first.obs, again.obs, strict=True):
        np.testing.assert_array_equal(a, b)
    step = env.step({"discrete": np.ones((4, 2, 1), np.int64)})
    assert step.alive.shape == (4, 2)
    env.close()


MAIN_PID = os.getpid()


class Stubborn(Failing):
    """`what`: "close hangs" (in a worker, close() sleeps 60 s), "chatty" (prints each step,
    raises at step `at`), "busy" (in a worker, step sleeps 60 s)."""

    def step(self, actions):
        if self.what == "chatty":
            print(f"diagnostic line {self.t + 1}")
            if self.t + 1 == self.at:
                raise RuntimeError("failing now")
        if self.what == "busy" and os.getpid() != MAIN_PID:
            import time

            time.sleep(60)
        return super().step(actions)

    def close(self):
        if self.what == "close hangs" and os.getpid() != MAIN_PID:
            import time

            time.sleep(60)


def test_a_worker_whose_env_close_hangs_is_stopped_with_a_warning(monkeypatch):
    """Gymnasium's close waited for it without a limit: a finished run never returned."""
    import time

    import poca.workers

    monkeypatch.setattr(poca.workers, "WAIT_ON_CLOSE_S", 1.0)
    env = make_env(functools.partial(Stubborn, "close hangs"), 2, workers=2)
    env.reset(seed=0)
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match=r"env worker\(s\) \[0, 1\] did not close their envs "
                                            r"within 1 s"):
        env.close()
    assert time.monotonic() - start < 10 and env.vec.closed
    assert not any(p.is_alive() for p in env.vec.processes)


def test_what_an_env_printed_before_it_raised_in_a_worker_is_not_lost(tmp_path):
    """The worker was stopped right after the error, its block-buffered stdout with it (a
    run's output sent to a file: nohup, a batch job, CI)."""
    import subprocess

    script = tmp_path / "trainer.py"
    script.write_text(
        "import functools\n"
        "import numpy as np\n"
        "from poca.adapters import make_env\n"
        "from poca.workers import EnvWorkerError\n"
        "from tests.test_workers import Stubborn\n"
        "env = make_env(functools.partial(Stubborn, 'chatty', at=3), 2, workers=2)\n"
        "env.reset(seed=0)\n"
        "try:\n"
        "    for _ in range(3):\n"
        "        env.step({'discrete': np.zeros((2, 2, 1), np.int64)})\n"
        "except EnvWorkerError:\n"
        "    print('stopped', flush=True)\n")
    root = str(Path(__file__).resolve().parent.parent)
    with open(tmp_path / "out.txt", "w") as out:  # a file, not a terminal: block-buffered
        subprocess.run([sys.executable, str(script)], stdout=out, cwd=root, check=True,
                       env={**os.environ, "PYTHONPATH": root, "PYTHONUNBUFFERED": ""},
                       timeout=60)
    printed = (tmp_path / "out.txt").read_text()
    assert "stopped" in printed and "diagnostic line 3" in printed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG, /proc")
def test_workers_die_with_a_trainer_killed_mid_step(tmp_path):
    """kill -9 of the trainer while its workers are busy in the env's step: they went on, as
    orphans holding the env's resources, until that call returned."""
    import signal
    import subprocess
    import time

    script = tmp_path / "trainer.py"
    script.write_text(
        "import functools, os, sys, time\n"
        "import numpy as np\n"
        "from poca.adapters import make_env\n"
        "from tests.test_workers import Stubborn\n"
        "env = make_env(functools.partial(Stubborn, 'busy'), 2, workers=2)\n"
        "env.reset(seed=0)\n"
        "print(*[p.pid for p in env.vec.processes], flush=True)\n"
        "env.step({'discrete': np.zeros((2, 2, 1), np.int64)})\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trainer = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                               cwd=root, env={**os.environ, "PYTHONPATH": root})
    with trainer.stdout:
        workers = [int(pid) for pid in trainer.stdout.readline().split()]
    time.sleep(1.0)  # both are now inside step's sleep
    trainer.send_signal(signal.SIGKILL)
    trainer.wait()

    def running(pid):  # not gone, nor a zombie
        try:
            return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        except OSError:
            return False

    deadline, alive = time.monotonic() + 10, workers
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [pid for pid in workers if running(pid)]
    assert len(workers) == 2 and not alive


class TorchStepping(Failing):
    """An env that computes with torch in its step (a learned model, vectorised physics)."""

    def step(self, actions):
        import torch

        x = torch.ones(128, 128)
        (x @ x).sum()
        return super().step(actions)


def test_an_env_using_torch_in_workers_forked_after_torch_ran_on_threads(tmp_path):
    """Forked from a process whose OpenMP threads had run (a script's own torch work first,
    --threads 2), a worker's first parallel torch op waited for them forever."""
    import subprocess

    script = tmp_path / "trainer.py"
    script.write_text(
        "import functools\n"
        "import numpy as np, torch\n"
        "from poca.adapters import make_env\n"
        "from tests.test_workers import TorchStepping\n"
        "torch.set_num_threads(2)\n"
        "torch.ones(512, 512) @ torch.ones(512, 512)  # the pool's threads now exist\n"
        "env = make_env(TorchStepping, 2, workers=2)\n"
        "env.reset(seed=0)\n"
        "env.step({'discrete': np.zeros((2, 2, 1), np.int64)})\n"
        "env.close()\n"
        "print('stepped')\n")
    root = str(Path(__file__).resolve().parent.parent)
    environ = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=root, env={**environ, "PYTHONPATH": root}, timeout=120)
    assert done.returncode == 0 and "stepped" in done.stdout, done.stderr[-2000:]


def test_sigterm_to_the_whole_process_group_stops_the_run_saved(tmp_path):
    """A scheduler's stop (Slurm, systemd, coreutils timeout) signals every process of the
    group: workers that died of it first turned the stop into an env worker's failure (exit 1,
    a traceback blaming the env) instead of an interrupted run (exit 130)."""
    import signal
    import subprocess
    import time

    run = tmp_path / "run"
    trainer = subprocess.Popen(
        [sys.executable, "-m", "poca.cli", "train", "envs.pettingzoo:GroupParallelEnv",
         "--env-workers", "2", "--num-envs", "4", "--max-steps", "10000000", "--no-progress",
         "--run-dir", str(run)], cwd=str(Path(__file__).resolve().parent.parent),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (run / "metrics.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(2.0)  # training, the workers stepping
    os.killpg(trainer.pid, signal.SIGTERM)
    out, err = trainer.communicate(timeout=60)
    assert trainer.returncode == 130, err[-2000:]
    assert "interrupted after" in out and "EnvWorkerError" not in err
    assert (run / "checkpoints" / "latest.pt").exists()
