"""poca as a library: train() and Trainer check what they are given as the CLI does, leave the
caller's torch state as they found it, and an interrupted object never holds half an update."""

import csv
import dataclasses
import shutil
import warnings

import numpy as np
import pytest
import torch
from gymnasium import spaces
from pettingzoo import ParallelEnv

import envs
from poca import checkpoint
from poca.adapters import make_env
from poca.config import POCAConfig
from poca.evaluate import checkpoint_returns
from poca.trainer import Trainer, train


def small(**over):
    return POCAConfig.load("goal").override({"max_steps": 1500, "summary_freq": 500, **over})


@pytest.mark.parametrize("change, fragment", [
    ({"learning_rate": 0.0}, "learning_rate must be > 0"),
    ({"learning_rate_schedule": "linaer"}, "learning_rate_schedule"),
    ({"lambd": 2.0}, "lambd must be in"),
    ({"batch_size": 4096}, "must not exceed buffer_size"),
])
def test_a_config_built_in_python_is_checked_as_a_files_is(change, fragment):
    config = small()
    bad = dataclasses.replace(config, hyperparameters=dataclasses.replace(
        config.hyperparameters, **change))
    with pytest.raises(ValueError, match=fragment):
        train("Goal-v0", bad)
    with pytest.raises(ValueError, match=fragment):
        Trainer(make_env("Goal-v0", bad.num_envs), bad, progress=False)


def test_numpy_numbers_in_a_config_or_a_spec_train_and_save(tmp_path):
    config = dataclasses.replace(small(), max_steps=np.int64(1200), seed=np.int64(3))
    result = train("Goal-v0", config, run_dir=tmp_path / "a")
    assert result.agent_steps >= 1200 and result.checkpoint.exists()
    spec = envs.GroupSpec(np.int64(2), [envs.ObsSpec("v", "vector", (np.int64(3),),
                                                     np.float32(-1), np.float64(1))],
                          np.int64(0), [np.int64(2)], np.int64(10))
    assert checkpoint.spec_dict(spec) == checkpoint.spec_dict(envs.GroupSpec(
        2, (envs.ObsSpec("v", "vector", (3,), -1.0, 1.0),), 0, (2,), 10))
    checkpoint.check_plain(checkpoint.spec_dict(spec), "spec")  # what a save requires
    # a float32 setting is the number it was written as, so a resume given it plainly agrees
    narrow = small().override({"hyperparameters.learning_rate": np.float32(1e-3),
                               "hyperparameters.beta": np.float16(0.3)})
    assert narrow.hyperparameters.learning_rate == 1e-3 and narrow.hyperparameters.beta == 0.3
    assert POCAConfig.from_dict(narrow.to_dict()) == small().override(
        {"hyperparameters.learning_rate": 1e-3, "hyperparameters.beta": 0.3})


@pytest.mark.parametrize("context", ["no_grad", "inference_mode", "float64"])
def test_training_works_whatever_the_callers_torch_mode(context):
    reference = train("Goal-v0", small())
    before = torch.get_default_dtype()
    if context == "float64":
        torch.set_default_dtype(torch.float64)
    try:
        with (torch.no_grad() if context == "no_grad" else torch.inference_mode()
              if context == "inference_mode" else torch.enable_grad()):
            result = train("Goal-v0", small())
        assert torch.get_default_dtype() == (torch.float64 if context == "float64" else before)
    finally:
        torch.set_default_dtype(before)
    assert result.episode_log == reference.episode_log


def test_training_leaves_the_callers_threads_and_random_numbers_alone():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        train("Goal-v0", small(threads=1))
        assert torch.get_num_threads() == 2
        torch.testing.assert_close(torch.rand(3), expected)
    finally:
        torch.set_num_threads(threads)


def test_an_interrupted_trainer_holds_what_was_saved_and_goes_on_from_it(tmp_path, monkeypatch):
    """Ctrl-C in the middle of an update (here after 5 of its Adam steps): the object goes back
    to the state saved before it, so run() again continues as a resume would (its envs started
    over then, not on the way out, which is mostly followed by close())."""
    trainer = Trainer(make_env("Goal-v0", 64), small(max_steps=4000), tmp_path / "run",
                      "Goal-v0", progress=False)
    step, calls = trainer.optimizer.step, []

    def interrupted_step(*args):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return step(*args)

    monkeypatch.setattr(trainer.optimizer, "step", interrupted_step)
    resets, reset = [], trainer.env.reset
    trainer.env.reset = lambda *args, **kwargs: resets.append(1) or reset(*args, **kwargs)
    result = trainer.run()
    monkeypatch.undo()
    assert not resets  # the envs start over when run() is called again, not on the way out
    saved = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert result.interrupted and trainer.agent_steps == saved["agent_steps"] == \
        result.agent_steps and trainer.updates == saved["updates"]
    assert trainer.episode_log == saved["episode_log"]
    for name, value in trainer.actor.state_dict().items():
        torch.testing.assert_close(value, saved["actor"][name])
    shutil.copytree(tmp_path / "run", tmp_path / "copy")
    went_on = trainer.run()
    assert len(resets) == 1
    resumed = train("Goal-v0", run_dir=tmp_path / "copy", resume=True)
    assert went_on.agent_steps >= 4000 and went_on.episode_log == resumed.episode_log


def test_clear_errors_for_an_env_object_an_empty_run_dir_and_no_episodes(tmp_path):
    with pytest.raises(TypeError, match=r"got a GoalGroup object .*Trainer\(env, config\)"):
        train(envs.make_group("Goal-v0", num_envs=4), small())
    with pytest.raises(ValueError, match="run_dir is empty"):
        train("Goal-v0", small(), run_dir="")
    run = tmp_path / "run"
    train("Goal-v0", small(), run_dir=run)
    with pytest.raises(ValueError, match="episodes must be >= 1"):
        checkpoint_returns(run / "checkpoints" / "latest.pt",
                           lambda n: make_env("Goal-v0", n), episodes=0)


def test_a_trainer_records_the_env_it_was_given():
    trainer = Trainer(make_env("Goal-v0", 4), small(), progress=False)  # the preset says 64
    assert trainer.config.num_envs == 4
    assert trainer.buffer_size == small().hyperparameters.buffer_size


class Endless(ParallelEnv):
    """Two agents whose episode never ends."""

    metadata = {"name": "endless_v0"}
    possible_agents = ["a", "b"]

    def observation_space(self, agent):
        return spaces.Box(-1, 1, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        no = dict.fromkeys(self.agents, False)
        return ({a: np.zeros(1, np.float32) for a in self.agents},
                {a: float(actions[a]) for a in self.agents}, no, dict(no),
                {a: {} for a in self.agents})


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_trainer_on_a_device_that_is_not_there_says_so():
    """Trainer is the documented API as train() is: the same one-line error, not torch's."""
    with pytest.raises(ValueError, match="device 'cuda' is not available here"):
        Trainer(make_env("Goal-v0", 4), small().override({"device": "cuda"}), progress=False)


def test_means_of_no_episodes_are_empty_cells_not_nan(tmp_path):
    """Before any episode has ended, the mean returns do not exist: metrics.csv leaves them
    empty, as it does every value that does not exist."""
    config = small().override({"max_steps": 600, "summary_freq": 200})
    train(Endless, config, run_dir=tmp_path / "run")
    with open(tmp_path / "run" / "metrics.csv") as file:
        rows = list(csv.DictReader(file))
    assert rows and all(row["mean_group_return"] == row["mean_team_return"] == ""
                        for row in rows)
    assert all(row["policy_loss"] != "" for row in rows)


class Unpaid(Endless):
    """Endless, paying nothing: the returns never vary."""

    def step(self, actions):
        obs, rewards, *rest = super().step(actions)
        return (obs, dict.fromkeys(rewards, 0.0), *rest)


def test_explained_variance_of_returns_that_do_not_vary_is_an_empty_cell_not_nan(tmp_path):
    config = small().override({"max_steps": 600, "summary_freq": 200})
    train(Unpaid, config, run_dir=tmp_path / "run")
    with open(tmp_path / "run" / "metrics.csv") as file:
        rows = list(csv.DictReader(file))
    assert rows and all(row["explained_variance_value"] == row["explained_variance_baseline"]
                        == "" for row in rows)
    assert all(float(row["value_loss"]) >= 0 for row in rows)


class BadClose(Endless):
    """Endless, whose close() raises (a simulator already gone, say); its step raises too when
    `fail_at` steps are reached."""

    fail_at = None

    def step(self, actions):
        self.steps = getattr(self, "steps", 0) + 1
        if self.steps == self.fail_at:
            raise RuntimeError("the simulator crashed")
        return super().step(actions)

    def close(self):
        raise RuntimeError("the simulator is gone")


def test_an_env_whose_close_raises_after_training_leaves_the_result_and_a_warning(caplog):
    with caplog.at_level("WARNING"):
        result = train(BadClose, small().override({"max_steps": 400, "num_envs": 3}))
    assert result.agent_steps >= 400
    closes = [r.getMessage() for r in caplog.records if "close() raised" in r.getMessage()]
    assert len(closes) == 1 + 3  # the probe made first to read the spaces, then every copy
    assert all("the simulator is gone" in message for message in closes)


def test_an_env_whose_close_raises_after_it_crashed_shows_the_crash():
    class Crashing(BadClose):
        fail_at = 5

    with pytest.raises(RuntimeError, match="the simulator crashed"):
        train(Crashing, small().override({"max_steps": 4000}))


def test_train_takes_a_dict_or_a_preset_name_as_the_cli_takes_a_file():
    """A dict of settings and a preset name train as the POCAConfig they describe (the same
    run, step for step); anything else is a TypeError that says what to pass."""
    config = small(max_steps=600)
    runs = [train("Goal-v0", c).team_log for c in (config, config.to_dict())]
    assert runs[0] and runs[0] == runs[1]
    runs = [train("Goal-v0", c, until=lambda trainer: trainer.agent_steps >= 600).team_log
            for c in ("goal", POCAConfig.load("goal"))]
    assert runs[0] and runs[0] == runs[1]
    with pytest.raises(ValueError, match="learning_rate must be > 0"):
        train("Goal-v0", {"hyperparameters": {"learning_rate": 0.0}})
    with pytest.raises(ValueError, match="learning_rate must be > 0"):  # dotted, as override
        train("Goal-v0", {"hyperparameters.learning_rate": 0.0})
    with pytest.raises(TypeError, match="config must be a POCAConfig, a dict of settings"):
        train("Goal-v0", 3)


def test_a_resume_given_a_dict_changes_only_the_settings_it_names(tmp_path):
    """On resume a dict holds the settings to change, laid over the run's own: keys it leaves
    out keep the run's values (before, they fell back to the defaults, and the resume was
    refused for changing them); a setting that may not change is still refused."""
    run = tmp_path / "run"
    train("Goal-v0", small(max_steps=600, summary_freq=200, num_envs=4), run_dir=run)
    result = train("Goal-v0", {"max_steps": 1200}, run_dir=run, resume=True)
    assert result.agent_steps >= 1200
    saved = checkpoint.load(run / "checkpoints" / "latest.pt")["config"]
    assert (saved["max_steps"], saved["summary_freq"], saved["num_envs"]) == (1200, 200, 4)
    with pytest.raises(ValueError, match=r"summary_freq 200 -> 100. Only max_steps, "):
        train("Goal-v0", {"summary_freq": 100}, run_dir=run, resume=True)
    with pytest.raises(TypeError, match="resume must be True, False or a checkpoint's state"):
        train("Goal-v0", {"max_steps": 1800}, run_dir=run, resume=None)  # not a resume by
        # accident (None is not False)


def test_a_resume_tells_a_lambda_env_from_another(tmp_path):
    """Every lambda of a module has the qualname `<lambda>`: a run records it with a
    fingerprint of what it computes, so that a resume on a lambda that makes another env is
    refused (it went on silently) and one on the same lambda written again is not."""
    config, run = small(max_steps=200, num_envs=2), tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train(lambda: Endless(), config, run_dir=run)
        train(lambda: Endless(), config.override({"max_steps": 400}), run_dir=run, resume=True)
    with pytest.raises(ValueError, match=r"environment '.*<lambda>#[0-9a-f]{8}' -> "):
        train(lambda: ZeroSum(), config.override({"max_steps": 600}), run_dir=run, resume=True)


class ZeroSum(Endless):
    """Two-step episodes; one agent wins +1 and the other loses -1, on the last step or, with
    `staggered`, the loser on the first and the winner on the last (`cooperative`: both +1)."""

    cooperative = staggered = False

    def reset(self, seed=None, options=None):
        self.t = 0
        return super().reset(seed, options)

    def step(self, actions):
        self.t += 1
        obs, _, term, trunc, infos = super().step(actions)
        end = self.t == 2
        if self.t == 1:  # the outcome: whether the first actions matched
            self.win = 1.0 if actions["a"] == actions["b"] else -1.0
        lose = self.win if self.cooperative else -self.win
        rew = {"a": self.win * end, "b": lose * (self.t == 1 if self.staggered else end)}
        term = dict.fromkeys(term, end)
        if end:
            self.agents = []
        return obs, rew, term, trunc, infos


class Staggered(ZeroSum):
    staggered = True


class Cooperative(ZeroSum):
    cooperative = True


def _cancel_notes(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "poca.trainer" and "summed to 0" in r.getMessage()]


@pytest.mark.parametrize("env", [ZeroSum, Staggered])
def test_episodes_that_always_sum_to_zero_are_logged_once(env, caplog):
    """Logged (stderr), not warned: training a zero-sum game on purpose is no error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train(env, small(max_steps=400, num_envs=2))
    notes = _cancel_notes(caplog)
    assert len(notes) == 1 and "learns nothing" in notes[0]


def test_a_cooperative_task_or_one_with_too_few_episodes_is_not_logged(caplog):
    train(Cooperative, small(max_steps=400, num_envs=2))
    few = small(max_steps=60, num_envs=2, **{"hyperparameters.buffer_size": 32,
                                             "hyperparameters.batch_size": 8})
    assert train(ZeroSum, few).episodes < 20  # too few to say
    assert _cancel_notes(caplog) == []
