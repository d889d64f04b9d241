"""Hostile inputs, one table per kind: envs, configs and CLI flags, checkpoints, signals.

Each row names what it feeds in, the exception type it must raise and a fragment of the message;
every message must name where the bad value is (agent, field, step; file and line; key)."""

import dataclasses
import functools
import math
import os
import pickle
import signal
import struct
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo import ParallelEnv

import envs
from envs.core import GroupEnv, GroupSpec, ObsSpec
from poca import checkpoint
from poca.adapters import ParallelEnvGroup, checked, make_env
from poca.cli import main
from poca.config import POCAConfig
from poca.encoders import RunningNorm
from poca.evaluate import evaluate, load_actor
from poca.trainer import Trainer, TrainingDiverged, train

SMALL = ["--set", "hyperparameters.batch_size=32", "--set", "hyperparameters.buffer_size=128",
         "--set", "network_settings.hidden_units=16", "--num-envs", "4", "--no-progress"]


def small_config(**over):
    base = {"hyperparameters.batch_size": 32, "hyperparameters.buffer_size": 128,
            "network_settings.hidden_units": 16, "network_settings.num_layers": 1,
            "num_envs": 4, "max_steps": 600, "checkpoint_interval": 300, "summary_freq": 150}
    return POCAConfig().override({**base, **over})


# --- hostile PettingZoo environments -------------------------------------------------------------


class Hostile(ParallelEnv):
    """Two agents 'a' and 'b' with Box(3) (or Discrete(4)) observations; at episode step `at`
    (0: the reset) the env does one thing wrong, named by `defect`."""

    metadata = {"name": "hostile_v0"}

    def __init__(self, defect=None, at=2, discrete_obs=False):
        self.defect, self.at = defect, at
        self.possible_agents = ["a", "b"]
        self.space = spaces.Discrete(4) if discrete_obs else spaces.Box(-1, 1, (3,), np.float32)
        if defect in ("mask missing", "mask short"):
            self.space = spaces.Dict({"obs": self.space, "action_mask": spaces.MultiBinary(2)})

    @functools.cache  # noqa: B019
    def observation_space(self, agent):
        return self.space

    @functools.cache  # noqa: B019
    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self):
        if isinstance(self.space, spaces.Dict):
            return {"obs": np.zeros(3, np.float32), "action_mask": np.ones(2, np.int8)}
        return 1 if isinstance(self.space, spaces.Discrete) else np.zeros(3, np.float32)

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, list(self.possible_agents)
        obs, infos = {a: self._obs() for a in self.agents}, {a: {} for a in self.agents}
        defect = self.defect if self.at == 0 else None
        if defect == "no infos":
            return obs
        if defect == "infos None":
            return obs, None
        if defect == "no agents":
            self.agents = []
            return {}, {}
        if defect == "missing obs":
            del obs["b"]
        return obs, infos

    def step(self, actions):
        self.t += 1
        obs = {a: self._obs() for a in self.agents}
        rew = {a: 0.5 for a in self.agents}
        term = {a: False for a in self.agents}
        trunc = {a: self.t >= 5 for a in self.agents}
        infos = {a: {} for a in self.agents}
        d = self.defect if self.t == self.at else None
        bad_values = {"reward NaN": math.nan, "reward inf": math.inf, "reward None": None,
                      "reward str": "1", "reward array": np.ones(2), "reward huge": 1e300}
        if d in bad_values:
            rew["b"] = bad_values[d]
        bad_obs = {"obs NaN": np.array([0, math.nan, 0], np.float32),
                   "obs inf": np.array([math.inf, 0, 0], np.float32), "obs None": None,
                   "obs str": "abc", "obs shape": np.zeros(4, np.float32),
                   "obs matrix": np.zeros((3, 1), np.float32), "obs discrete 7": 7,
                   "obs discrete -1": -1, "obs discrete float": 1.5,
                   "obs huge": np.array([1e300, 0, 0])}  # float64: inf once stored as float32
        if d in bad_obs:
            obs["b"] = bad_obs[d]
        if d == "raise":
            raise ValueError("boom from inside the env")
        if d == "infos None":
            infos = None
        if d == "info None":
            infos["b"] = None
        if d == "missing obs":
            del obs["b"]
        if d == "missing reward":
            del rew["b"]
        if d == "terminated but listed":
            term["b"] = True
        if d == "flag str":
            term["b"] = "no"
        if d == "flag array":
            term["b"] = np.array([False, True])
        if d == "mask missing":
            del obs["b"]["action_mask"]
        if d == "mask short":
            obs["b"]["action_mask"] = np.ones(1, np.int8)
        if self.t >= 5:
            self.agents = []
        if d == "4-tuple":
            return obs, rew, term, infos
        return obs, rew, term, trunc, infos


ENV_CASES = [  # (defect, at, discrete obs, exception, fragment)
    ("reward NaN", 2, False, ValueError, "episode step 2: agent 'b': reward is nan"),
    ("reward inf", 3, False, ValueError, "episode step 3: agent 'b': reward is inf"),
    ("reward None", 2, False, ValueError, "agent 'b': reward must be a number, got NoneType"),
    ("reward str", 2, False, ValueError, "agent 'b': reward must be a number, got str"),
    ("reward array", 2, False, ValueError, "agent 'b': reward must be a number, got ndarray"),
    ("reward huge", 2, False, ValueError, "agent 'b': reward is 1e+300, beyond float32's range"),
    ("obs NaN", 2, False, ValueError, "episode step 2: agent 'b': observation holds NaN/inf"),
    ("obs inf", 2, False, ValueError, "agent 'b': observation holds NaN/inf"),
    ("obs huge", 2, False, ValueError, "agent 'b': observation holds NaN/inf, or values beyond "
                                       "float32's range"),
    ("obs None", 2, False, ValueError, "agent 'b': observation must hold numbers"),
    ("obs str", 2, False, ValueError, "agent 'b': observation must hold numbers"),
    ("obs shape", 2, False, ValueError, "agent 'b': observation has shape (4,); the "),
    ("obs matrix", 2, False, ValueError, "agent 'b': observation has shape (3, 1)"),
    ("obs discrete 7", 2, True, ValueError, "agent 'b': observation is 7, outside Discrete(4)"),
    ("obs discrete -1", 2, True, ValueError, "agent 'b': observation is -1, outside"),
    ("obs discrete float", 2, True, ValueError, "observation must be an int of Discrete(4)"),
    ("infos None", 2, False, ValueError, "episode step 2: step() returned infos = None, not a"),
    ("info None", 2, False, ValueError, "agent 'b': infos['b'] must be a dict, got None"),
    ("4-tuple", 2, False, ValueError, "step() must return (observations, rewards, "),
    ("missing obs", 2, False, ValueError, "agent 'b' is still in agents but has no observ"),
    ("missing reward", 2, False, ValueError, "agent 'b': acted but has no reward"),
    ("terminated but listed", 2, False, ValueError,
     "agent 'b' was reported terminated or truncated but is still in agents while 'a'"),
    ("flag str", 2, False, ValueError, "agent 'b': terminations must be a bool, got 'no'"),
    ("flag array", 2, False, ValueError, "agent 'b': terminations must be a bool, got array("),
    ("mask missing", 2, False, ValueError, "agent 'b': observation lacks the key(s) "
                                           "['action_mask']"),
    ("mask short", 2, False, ValueError, "agent 'b': observation: its action_mask must hold 2 "
                                         "bools; got int8 [1]"),
    ("no infos", 0, False, ValueError, "reset: reset() must return (observations, infos)"),
    ("infos None", 0, False, ValueError, "reset: reset() returned infos = None, not a dict"),
    ("no agents", 0, False, ValueError, "env copy 0, reset: no agents after reset()"),
    ("missing obs", 0, False, ValueError, "reset: agent 'b' is in agents but has no observ"),
    ("raise", 2, False, ValueError, "boom from inside the env"),
]


@pytest.mark.parametrize("defect, at, discrete, exc, fragment", ENV_CASES,
                         ids=[f"{c[0]}@{c[1]}" for c in ENV_CASES])
def test_hostile_parallel_env(defect, at, discrete, exc, fragment):
    env = ParallelEnvGroup(lambda: Hostile(defect, at, discrete), 2)
    with pytest.raises(exc) as info:
        env.reset(seed=0)
        for _ in range(4):
            env.step({"discrete": np.zeros((2, 2, 1), np.int64)})
    assert fragment in str(info.value)
    if defect == "raise":  # the env's own exception, with its own traceback, not a rewrap
        assert str(info.traceback[-1].path) == __file__ and info.traceback[-1].name == "step"


def test_a_well_behaved_hostile_env_runs():
    env = ParallelEnvGroup(lambda: Hostile(None), 2)
    env.reset(seed=0)
    for _ in range(12):
        step = env.step({"discrete": np.zeros((2, 2, 1), np.int64)})
    assert np.isfinite(step.reward).all() and step.alive.all()


def hostile_factory(defect="reward NaN", at=2):
    return Hostile(defect, at)


def test_cli_hostile_env_is_one_line_and_env_errors_keep_their_traceback(tmp_path, capsys):
    assert main(["train", "tests.test_hostile_inputs:hostile_factory", "--run-dir",
                 str(tmp_path / "a"), *SMALL, "--max-steps", "300"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "agent 'b': reward is nan" in err
    with pytest.raises(ValueError, match="boom from inside the env") as raised:
        main(["train", "tests.test_hostile_inputs:hostile_factory", "--env-kwargs",
              '{"defect": "raise"}', "--run-dir", str(tmp_path / "b"), *SMALL,
              "--max-steps", "300"])
    if sys.version_info >= (3, 11):  # a note names the copy and step it came from
        assert any(note.startswith("(raised by env copy ") and ", episode step " in note
                   for note in raised.value.__notes__)
    # the run that raised still saved what it had (nothing yet: it failed in the first rollout)
    assert (tmp_path / "b" / "checkpoints" / "latest.pt").exists()


# --- dead slots of the core ----------------------------------------------------------------------


class Recorder(GroupEnv):
    """A task whose alive mask is given; it records the actions its `_step` receives."""

    def __init__(self, alive: np.ndarray, continuous: int = 2, branches=(3, 2)):
        E, A = alive.shape
        super().__init__(GroupSpec(A, (ObsSpec("v", "vector", (1,)),), continuous,
                                   tuple(branches), 100), E)
        self.start_alive = alive

    def _reset_envs(self, idx):
        self.alive[idx] = self.start_alive[idx]

    def _step(self, cont, disc):
        self.seen = (cont.copy(), disc.copy())
        E, A = self.alive.shape
        return np.zeros((E, A), np.float32), np.zeros(E, np.float32), np.zeros((E, A), bool), \
            np.zeros((E, A), bool)

    def _observe(self, rows=slice(None)):
        return (np.zeros((self.num_envs, self.max_agents, 1), np.float32)[rows],)


GARBAGE_FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=32)
GARBAGE_INTS = st.integers(-2**63, 2**63 - 1)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), E=st.integers(1, 4), A=st.integers(1, 4))
def test_dead_slot_garbage_is_never_read(data, E, A):
    alive = np.array(data.draw(st.lists(st.booleans(), min_size=E * A, max_size=E * A)),
                     bool).reshape(E, A)
    alive[~alive.any(axis=1), 0] = True  # a group starts with someone (the core checks it)
    env = Recorder(alive)
    env.reset(seed=0)
    cont = np.array(data.draw(st.lists(GARBAGE_FLOATS, min_size=E * A * 2,
                                       max_size=E * A * 2)), np.float32).reshape(E, A, 2)
    disc = np.array(data.draw(st.lists(GARBAGE_INTS, min_size=E * A * 2, max_size=E * A * 2)),
                    np.int64).reshape(E, A, 2)
    good_cont = np.array(data.draw(st.lists(st.floats(-1, 1, width=32), min_size=E * A * 2,
                                            max_size=E * A * 2)), np.float32).reshape(E, A, 2)
    good_disc = np.stack([np.full((E, A), data.draw(st.integers(0, 2))),
                          np.full((E, A), data.draw(st.integers(0, 1)))], -1)
    cont[alive], disc[alive] = good_cont[alive], good_disc[alive]
    sent = (cont.copy(), disc.copy())
    env.step({"continuous": cont, "discrete": disc})
    seen_cont, seen_disc = env.seen
    assert (seen_cont[~alive] == 0).all() and (seen_disc[~alive] == 0).all()
    np.testing.assert_array_equal(seen_cont[alive], good_cont[alive])
    np.testing.assert_array_equal(seen_disc[alive], good_disc[alive])
    np.testing.assert_array_equal(sent[0], cont)  # the caller's arrays are not changed
    np.testing.assert_array_equal(sent[1], disc)


class DeadSlotsHold:
    """A GroupEnv whose observation rows of slots that are not alive (in `obs`, and in the
    `final_obs` of ended groups for every slot not truncated) hold `value`: the contract lets
    them hold anything."""

    def __init__(self, env: GroupEnv, value):
        self.env, self.value = env, value

    def __getattr__(self, name):
        return getattr(self.env, name)

    def _fill(self, step):
        def fill(views, live):
            return tuple(np.where((~live).reshape(live.shape + (1,) * (v.ndim - 2)),
                                  np.asarray(self.value).astype(v.dtype), v) for v in views)
        live_final = np.where(step.group_done[:, None], step.truncated, step.alive)
        return dataclasses.replace(step, obs=fill(step.obs, step.alive),
                                   final_obs=fill(step.final_obs, live_final))

    def reset(self, *args, **kwargs):
        return self._fill(self.env.reset(*args, **kwargs))

    def step(self, *args, **kwargs):
        return self._fill(self.env.step(*args, **kwargs))


@pytest.mark.parametrize("task, kwargs, overrides", [
    ("Goal-v0", {"max_steps": 8}, {"network_settings.normalize": True}),  # truncations too
    ("GoalMemory-v0", {"max_steps": 8},
     {"network_settings.memory": {"memory_size": 8, "sequence_length": 4}}),
    ("GoalEntities-v0", {}, {}),
    ("Goal-v0", {"action_sizes": (1, 1)}, {"critic": "absorbing"}),
    ("Goal-v0", {}, {"critic": "independent"}),
])
@pytest.mark.parametrize("value", [math.nan, 1e30, -7.0])
def test_dead_slot_observations_change_nothing(task, kwargs, overrides, value):
    """Whatever the slots of agents that are not alive hold (NaN and 1e30 stopped training
    before), training and evaluation are those of a clean env, to the bit."""
    config = POCAConfig.load("goal").override({**overrides, "max_steps": 2500,
                                               "num_envs": 16, "seed": 3})
    runs = []
    for fill in (None, value):
        env = make_env(task, config.num_envs, kwargs)
        trainer = Trainer(env if fill is None else DeadSlotsHold(env, fill), config,
                          progress=False)
        result = trainer.run()
        eval_env = make_env(task, 20, kwargs)
        returns = evaluate(trainer.actor, eval_env if fill is None else
                           DeadSlotsHold(eval_env, fill), seed=5)
        runs.append((result.episode_log, returns.tolist(),
                     [p.detach().clone() for p in trainer.params]))
    (log, returns, params), (log2, returns2, params2) = runs
    assert log == log2 and returns == returns2 and len(log) > 10
    assert all(torch.equal(a, b) for a, b in zip(params, params2, strict=True))


@pytest.mark.parametrize("garbage", [math.nan, math.inf, -1e30, -1, -2, 99, 2**62])
def test_dead_slot_garbage_does_not_change_goal(garbage):
    """Two Goal batches stepped alike (agent 0 heads for the edge and leaves early, the others
    wander); one of them gets garbage in the slots of agents that have left."""
    kind = "continuous" if isinstance(garbage, float) else "discrete"
    sizes = (1, 0) if kind == "continuous" else (0, 1)
    a, b = (envs.make_group("Goal-v0", num_envs=8, num_agents=3, action_sizes=sizes)
            for _ in range(2))
    rng = np.random.default_rng(0)
    step_a, step_b = a.reset(seed=1), b.reset(seed=1)
    dirty_steps = 0
    for _ in range(30):
        if kind == "continuous":
            act = rng.uniform(-0.3, 0.3, (8, 3, 1)).astype(np.float32)
            act[:, 0] = 1.0
        else:
            act = rng.integers(0, 2, (8, 3, 1))
            act[:, 0] = 1
        dirty = act.copy()
        dirty[~step_a.alive] = garbage
        dirty_steps += int((~step_a.alive).any())
        step_a = a.step({kind: act})
        step_b = b.step({kind: dirty})
        for x, y in zip(step_a.obs, step_b.obs, strict=True):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(step_a.group_reward, step_b.group_reward)
        np.testing.assert_array_equal(step_a.reward, step_b.reward)
    assert dirty_steps >= 10 and np.isfinite(step_b.obs[0]).all()


@pytest.mark.parametrize("field, value, fragment", [
    ("continuous", math.nan, "actions['continuous'] is NaN/inf for env 0, agent 1"),
    ("discrete", -1, "actions['discrete'] is out of range (branch sizes [3, 2]) for env 0, "
                     "agent 1"),
])
def test_alive_slot_garbage_still_raises(field, value, fragment):
    env = Recorder(np.ones((1, 2), bool))
    env.reset(seed=0)
    actions = {"continuous": np.zeros((1, 2, 2), np.float32), "discrete": np.zeros((1, 2, 2),
                                                                                   np.int64)}
    actions[field][0, 1, 0] = value
    with pytest.raises(ValueError) as info:
        env.step(actions)
    assert fragment in str(info.value)


# --- configs and CLI flags -----------------------------------------------------------------------

CONFIG_FILES = [  # (file name, bytes, fragment)
    ("list.yaml", b"- 1\n- 2\n", "a config must be a mapping"),
    ("scalar.yaml", b"hello\n", "a config must be a mapping"),
    ("syntax.yaml", b"behaviors:\n  Goal:\n    max_steps: [1,\n  oops: }\n", "line 4, column"),
    ("binary.yaml", bytes(range(256)) * 4, "is not a text (UTF-8 YAML) file"),
    ("null.yaml", b"behaviors:\n  Goal: null\n", "behaviors.Goal must be a mapping"),
    ("none.yaml", b"behaviors:\n", "expected exactly one behavior"),
    ("two.yaml", b"behaviors:\n  A: {}\n  B: {}\n", "expected exactly one behavior"),
    ("extra.yaml", b"behaviors:\n  Goal: {}\nmy_notes: 3\n", "remove the other top-level"),
    ("env.yaml", b"behaviors:\n  Goal: {}\nenv_settings: {num_envs: 2}\n",
     "env_settings (give the environment as poca train's first argument"),
    ("ckpt.yaml", b"behaviors:\n  Goal: {}\ncheckpoint_settings: {run_id: x}\n",
     "checkpoint_settings (use --run-dir, --resume and --force)"),
    ("torch.yaml", b"behaviors:\n  Goal: {}\ntorch_settings: {device: cpu}\n",
     "torch_settings (use --device and --threads)"),
    ("lr_inf.yaml", b"hyperparameters: {learning_rate: .inf}\n",
     "hyperparameters.learning_rate must be a finite number in (0, 1], got inf"),
    ("lr_nan.yaml", b"hyperparameters: {learning_rate: .nan}\n", "learning_rate must be > 0"),
    ("lr_big.yaml", b"hyperparameters: {learning_rate: 10}\n", "learning_rate must be a fin"),
    ("beta.yaml", b"hyperparameters: {beta: -1}\n", "hyperparameters.beta must be a finite"),
    ("beta_inf.yaml", b"hyperparameters: {beta: .inf}\n", "hyperparameters.beta must be a"),
    ("eps.yaml", b"hyperparameters: {epsilon: 5}\n", "hyperparameters.epsilon must be a"),
    ("strength.yaml", b"reward_signals: {extrinsic: {strength: 1.0e+300}}\n",
     "reward_signals.extrinsic.strength must be a finite number in (0, 1e+06]"),
    ("strength0.yaml", b"reward_signals: {extrinsic: {strength: 0}}\n",
     "reward_signals.extrinsic.strength must be > 0"),
    ("gamma.yaml", b"reward_signals: {extrinsic: {gamma: .nan}}\n", "gamma must be in"),
    ("gamma_big.yaml", b"reward_signals: {extrinsic: {gamma: 1.5}}\n",
     "reward_signals.extrinsic.gamma must be in [0, 1], got 1.5"),
    ("empty.yaml", b"", "is empty (or only comments)"),
    ("comments.yaml", b"# behaviors:\n#   Goal: {}\n", "is empty (or only comments)"),
    ("twice.yaml", b"hyperparameters:\n  batch_size: 64\n  batch_size: 128\n",
     "line 3, column 3: invalid YAML: duplicate key 'batch_size'"),
    ("listkey.yaml", b"? [a, b]\n: 1\n", "invalid YAML: found unhashable key"),
    ("seed.yaml", b"seed: -1\n", "seed must be in [0, 4294967295], got -1"),
    ("selfplay.yaml", b"behaviors:\n  S:\n    self_play: {save_steps: 5}\n",
     "self_play (ML-Agents' setting, not implemented: poca trains one cooperative team; remove"),
    ("defaults.yaml", b"default_settings: {max_steps: 10}\nbehaviors:\n  S: {}\n",
     "default_settings (write its settings into the one behavior)"),
]


def test_yaml_merge_keys_override_without_counting_as_duplicates(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("hyperparameters:\n  <<: {learning_rate: 0.0003, batch_size: 64}\n"
                    "  batch_size: 128\n  buffer_size: 1024\n")
    hp = POCAConfig.load(path).hyperparameters
    assert (hp.learning_rate, hp.batch_size, hp.buffer_size) == (0.0003, 128, 1024)


@pytest.mark.parametrize("name, content, fragment", CONFIG_FILES,
                         ids=[c[0] for c in CONFIG_FILES])
def test_bad_config_file_is_one_line_before_any_run_folder(tmp_path, capsys, name, content,
                                                           fragment):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValueError) as info:
        POCAConfig.load(path)
    assert fragment in str(info.value) and str(path) in str(info.value)
    run = tmp_path / "run"
    assert main(["train", "Goal-v0", "--config", str(path), "--run-dir", str(run),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err
    assert not run.exists()


def broken_module_env():  # a factory returning something that is not an env
    return 42


not_callable = 5

CLI_CASES = [  # (argv after "train", fragment)
    (["Goal-v0", "--config", "."], "is a directory, not a YAML config file"),
    (["Goal-v0", "--seed", "-3"], "seed must be in [0, 4294967295], got -3"),
    (["Goal-v0", "--seed", str(2**40)], "seed must be in [0, 4294967295]"),
    (["Goal-v0", "--set", "hyperparameters.learning_rate=nan"], "learning_rate must be > 0"),
    (["Goal-v0", "--set", "hyperparameters.epsilon=inf"], "epsilon must be a finite number"),
    (["Goal-v0", "--force"], "--force only applies with --resume"),
    (["Goal-v0", "--run-dir", "/proc/no/such/run"], "cannot use /proc/no/such/run as a run "
                                                    "folder: No such file or directory"),
    (["Goal-v0", "--resume"], "--resume needs the --run-dir"),
    (["no_such_module_xyz:make"], "importing 'no_such_module_xyz' failed: ModuleNotFound"),
    (["tests.test_hostile_inputs:nothing_here"], "has no attribute 'nothing_here'"),
    (["colorsys:make"], "module 'colorsys' ("),  # the file that won, where a user's may not
    (["tests.test_hostile_inputs:not_callable"], "'not_callable' in module "
                                                 "'tests.test_hostile_inputs' ("),
    (["tests.test_hostile_inputs:not_callable"], "is not callable (its type: int)"),
    (["tests.test_hostile_inputs:broken_module_env"], "returned int; expected a PettingZoo"),
    (["Goal-v0", "--max-agents", "4"], "max_agents (--max-agents) applies only to PettingZoo"),
    (["Goal-v0", "--set", "hyperparameters=3"], "hyperparameters must be a mapping, got 3"),
    (["Goal-v0", "--set", "keep_checkpoints=-1"], "keep_checkpoints must be >= 0 (0: keep all, "
                                                  "as in ML-Agents), got -1"),
    (["Goal-v0", "--num-envs", "0"], "num_envs must be > 0, got 0"),
    (["Goal-v0", "--env-kwargs", '{"bogus": 1}'], "unknown argument(s) ['bogus']"),
    (["os:getcwd"], "os:getcwd returned str; expected a PettingZoo ParallelEnv"),
    (["hostile_import_error_wt14:make"], "importing 'hostile_import_error_wt14' failed: "
                                         "ZeroDivisionError: division by zero ("),
]
CLI_CASES += [
    (["Goal-v0", "--device", "cuda:x"], "device must be 'cpu' or 'cuda[:N]', got 'cuda:x'"),
    (["Goal-v0", "--set", "max_steps.x=1"], "max_steps is a setting, not a section: "
                                            "'max_steps.x' names nothing"),
    (["Goal-v0", "--set", "hyperparameters.lambd.y.z=1"], "hyperparameters.lambd is a setting"),
    (["Goal-v0", "--run-dir", "a" * 300], "File name too long"),  # raised inside pathlib
]
if not torch.cuda.is_available():
    CLI_CASES.append((["Goal-v0", "--device", "cuda"], "device 'cuda' is not available here"))


@pytest.mark.parametrize("argv, fragment", CLI_CASES, ids=[" ".join(c[0]) for c in CLI_CASES])
def test_bad_cli_input_is_one_line_exit_2(tmp_path, capsys, monkeypatch, argv, fragment):
    (tmp_path / "hostile_import_error_wt14.py").write_text("x = 1 / 0\n")
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    extra = [] if "--resume" in argv or "--run-dir" in argv else ["--run-dir", str(run)]
    assert main(["train", *argv, *extra, "--no-progress"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err
    assert not run.exists()
    assert captured.out == ""  # not "training MA-POCA on ..." before the error


@pytest.mark.parametrize("argv, fragment", [
    (["eval", "--episodes", "0"], "--episodes must be >= 1, got 0"),
    (["eval", "--seed", "-1"], "--seed must be in [0, 4294967295], got -1"),
    (["eval", "--env-kwargs", '{"action_sizes": [1, 0]}'], "was trained on a different env"),
    (["play", "--episodes", "-1", "--record", "x.gif"], "--episodes must be >= 1, got -1"),
    (["play"], "give --render human and/or --record FILE.gif"),
])
def test_bad_eval_and_play_input_is_one_line_exit_2(tmp_path, capsys, monkeypatch,
                                                    good_checkpoint, argv, fragment):
    monkeypatch.chdir(tmp_path)
    assert main([argv[0], "Goal-v0", "--checkpoint", str(good_checkpoint), *argv[1:]]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err
    assert not (tmp_path / "x.gif").exists()


def test_play_says_when_a_factory_takes_no_render_mode(capsys, good_checkpoint):
    assert main(["play", "tests.test_adapters:Spawning", "--checkpoint", str(good_checkpoint),
                 "--record", "x.gif"]) == 2
    assert "tests.test_adapters:Spawning takes no render_mode; rendering makes the env with " \
           "render_mode='rgb_array'" in capsys.readouterr().err


def test_console_script_finds_modules_in_the_current_directory(tmp_path, monkeypatch, capsys):
    (tmp_path / "mymod_wt14.py").write_text(
        "from envs.pettingzoo import GroupParallelEnv\n"
        "def make():\n    return GroupParallelEnv('Goal-v0')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    assert main(["train", "mymod_wt14:make", "--run-dir", "run", *SMALL, "--max-steps",
                 "200"]) == 0
    assert (tmp_path / "run" / "checkpoints" / "latest.pt").exists()


# --- checkpoints ---------------------------------------------------------------------------------


class Payload:
    """Unpickling this would create the file `target`."""

    def __init__(self, target):
        self.target = str(target)

    def __reduce__(self):
        return (open, (self.target, "w"))


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory):
    run = tmp_path_factory.mktemp("good")
    Trainer(make_env("Goal-v0", 4), small_config(max_steps=200), run, "Goal-v0",
            progress=False).run()
    return run / "checkpoints" / "latest.pt"


def _without(state, *keys):
    state = dict(state)
    for key in keys:
        if "." in key:
            outer, inner = key.split(".")
            state[outer] = {k: v for k, v in state[outer].items() if k != inner}
        else:
            del state[key]
    return state


def _reshaped(state):
    actor = dict(state["actor"])
    name = next(n for n in actor if n.endswith("weight"))
    actor[name] = torch.zeros(*actor[name].shape[:-1], actor[name].shape[-1] + 3)
    return {**state, "actor": actor}


def _flipped(good_checkpoint) -> bytes:
    """The good checkpoint's bytes with 32 bytes flipped inside its largest tensor record: a
    file torch.load reads, as other weights (torch never checks the records' checksums)."""
    raw = bytearray(Path(good_checkpoint).read_bytes())
    with zipfile.ZipFile(good_checkpoint) as archive:
        record = max((i for i in archive.infolist() if "/data/" in i.filename),
                     key=lambda i: i.file_size)
    name_size, extra_size = struct.unpack("<HH", raw[record.header_offset + 26:
                                                     record.header_offset + 30])
    start = record.header_offset + 30 + name_size + extra_size
    raw[start:start + 32] = bytes(b ^ 0x55 for b in raw[start:start + 32])
    return bytes(raw)


def _nan_actor(state):
    return {**state, "actor": {k: v * math.nan if v.is_floating_point() else v
                               for k, v in state["actor"].items()}}


CHECKPOINT_CASES = [  # (name, how to make it from a good state, fragment)
    ("payload", lambda s, t: {**s, "extra": Payload(t)}, "refused without running them"),
    ("payload only", lambda s, t: Payload(t), "refused without running them"),
    ("text", b"not a checkpoint", "is not a readable checkpoint"),
    ("empty", b"", "is not a readable checkpoint"),
    # bytes torch's weights-only unpickler cannot parse are damage, not Python objects
    ("noise", bytes(range(256)) * 8, "(damaged, or not a file torch.save wrote)"),
    ("plain pickle", pickle.dumps({"actor": 1}), "(damaged, or not a file torch.save wrote)"),
    ("foreign dict", lambda s, t: {"weights": torch.zeros(3)}, "is not a groupenvs-poca/1"),
    ("wrong format", lambda s, t: {**s, "format": "other/2"}, "is not a groupenvs-poca/1"),
    ("no actor", lambda s, t: _without(s, "actor"), "'actor' is missing"),
    ("no env_kwargs", lambda s, t: _without(s, "env_kwargs"), "'env_kwargs' is missing"),
    ("no spec.obs", lambda s, t: _without(s, "spec.obs"), "'spec.obs' is missing"),
    ("spec not dict", lambda s, t: {**s, "spec": [1]}, "'spec' is a list"),
    ("actor not tensors", lambda s, t: {**s, "actor": {"w": 1.0}}, "'actor' must map"),
    ("steps str", lambda s, t: {**s, "agent_steps": "10"}, "'agent_steps' is a str"),
    ("wrong shapes", lambda s, t: _reshaped(s), "does not hold a policy for this environment"),
    ("flipped bytes", _flipped, "is damaged: its record 'archive/data/"),
    ("nan weights", lambda s, t: _nan_actor(s), "holds NaN/inf in 'actor."),
]


def _make_checkpoint(tmp_path, good_checkpoint, make):
    path, target = tmp_path / "ckpt.pt", tmp_path / "pwned"
    if isinstance(make, bytes):
        path.write_bytes(make)
    elif make is _flipped:
        path.write_bytes(make(good_checkpoint))
    else:
        torch.save(make(torch.load(good_checkpoint, weights_only=True), target), path)
    return path, target


@pytest.mark.parametrize("name, make, fragment", CHECKPOINT_CASES,
                         ids=[c[0] for c in CHECKPOINT_CASES])
def test_bad_checkpoint_is_one_clean_error_everywhere(tmp_path, capsys, good_checkpoint, name,
                                                      make, fragment):
    path, target = _make_checkpoint(tmp_path, good_checkpoint, make)
    env = make_env("Goal-v0", 2)
    with pytest.raises(checkpoint.CheckpointError) as info:
        load_actor(path, env)
    assert fragment in str(info.value) and str(path) in str(info.value)
    for argv in (["eval", "Goal-v0", "--checkpoint", str(path), "--episodes", "2"],
                 ["play", "Goal-v0", "--checkpoint", str(path), "--record",
                  str(tmp_path / "x.gif")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and fragment in err, err
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    path.rename(run / "checkpoints" / "latest.pt")
    assert main(["train", "Goal-v0", "--run-dir", str(run), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()  # wrong shapes: "does not fit this network ..."
    assert len(err.splitlines()) == 1 and "latest.pt" in err, err
    assert not target.exists()  # no payload ran, anywhere


def test_checkpoint_of_the_project_round_trips_with_weights_only(good_checkpoint):
    state = checkpoint.load(good_checkpoint)
    assert isinstance(state["torch_rng"], torch.Tensor) and state["agent_steps"] >= 200
    trainer = Trainer(make_env("Goal-v0", 4), small_config(), progress=False)
    trainer.load(good_checkpoint)
    assert trainer.agent_steps == state["agent_steps"]


def test_env_kwargs_that_a_checkpoint_cannot_hold_fail_before_training(tmp_path):
    with pytest.raises(TypeError, match=r"env_kwargs\['num_agents'\] is a int64"):
        train("Goal-v0", small_config(), {"num_agents": np.int64(2)}, tmp_path / "run")
    assert not (tmp_path / "run").exists()


# --- training guards and signals -----------------------------------------------------------------


def poisoned_goal(num_envs, what="reward", after=40, scale=math.nan):
    """Goal-v0 whose `what` ('reward' or 'obs') is multiplied by `scale` after `after` steps."""
    env = envs.make_group("Goal-v0", num_envs=num_envs)
    step, count = env.step, [0]

    def poisoned(actions):
        out = step(actions)
        count[0] += 1
        if count[0] > after:
            if what == "reward":
                out.group_reward[:] = out.group_reward * scale + scale
            else:
                out.obs[0][:] = out.obs[0] * scale + scale
        return out

    env.step = poisoned
    return env


GUARD_CASES = [  # (env kwargs, config overrides, exception, CLI exit status, fragment)
    ({"what": "reward"}, {}, ValueError, 2,
     "step(): env 0: group_reward is NaN/inf or beyond float32's range (episode step "),
    ({"what": "obs"}, {}, ValueError, 2,
     "step(): env 0, agent 0: observation 'vector' is NaN/inf or beyond float32's range "
     "(episode step "),
    ({"what": "obs", "scale": 1e30}, {"network_settings.normalize": True}, TrainingDiverged, 1,
     "the normaliser statistics actor.encoder.norms.vector.m2 became NaN/inf at agent-step"),
]


@pytest.fixture
def norm_overflow(request, monkeypatch):
    """For the "norm" case: statistics that overflow (float64 ones do not for any float32
    observation, so the guard that names them is tested with an update made to overflow)."""
    if request.node.callspec.id == "norm":
        update = RunningNorm.update

        def overflowing(self, x):
            update(self, x)
            if x.abs().max() > 1e29:
                self.m2.fill_(math.inf)

        monkeypatch.setattr(RunningNorm, "update", overflowing)


def test_observations_near_float32s_limit_train_with_normalization():
    """Squares of such values overflowed float32 statistics within a few updates."""
    result = train(functools.partial(poisoned_goal, what="obs", scale=1e36),
                   small_config(**{"network_settings.normalize": True}, max_steps=2000))
    assert result.agent_steps >= 2000


@pytest.mark.usefixtures("norm_overflow")
@pytest.mark.parametrize("kwargs, over, exc, status, fragment", GUARD_CASES,
                         ids=["reward", "obs", "norm"])
def test_non_finite_values_name_their_first_source(tmp_path, capsys, kwargs, over, exc,
                                                   status, fragment):
    with pytest.raises(exc) as info:
        train(functools.partial(poisoned_goal, **kwargs), small_config(**over, max_steps=2000),
              run_dir=tmp_path / "api")
    assert fragment in str(info.value)
    argv = ["train", "tests.test_hostile_inputs:poisoned_goal", "--env-kwargs",
            str(kwargs).replace("'", '"'), "--run-dir", str(tmp_path / "cli"), *SMALL,
            "--max-steps", "2000", "--set", "checkpoint_interval=100"]
    if over:
        argv += ["--set", "network_settings.normalize=true"]
    assert main(argv) == status
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and fragment in err, err
    if exc is TrainingDiverged:
        assert "Last good checkpoint: " in err and "step-0000" in err


def broken_goal(num_envs, how="no agents at reset", after=3):
    """Goal-v0 (2 agents) that breaks the GroupEnv contract in one way after `after` steps."""
    env = envs.make_group("Goal-v0", num_envs=num_envs)
    reset, step, count = env.reset, env.step, [0]

    def broken_reset(seed=None):
        out = reset(seed=seed)
        if how == "no agents at reset":
            out.alive[:] = False
        return out

    def broken_step(actions):
        out = step(actions)
        count[0] += 1
        if count[0] == after:
            if how == "huge reward":
                out.reward[:] = 0.0
                out.reward = out.reward.astype(np.float64)
                out.reward[1, 0] = 1e300
            elif how == "reward to a slot not alive":  # agent 1 of env 1 leaves...
                out.alive[1, 1] = False
                out.terminated[1, 1] = True
            elif how == "terminated but alive":
                out.terminated[1, 1] = True
            elif how == "all left, not done":
                out.alive[1] = False
            elif how == "NaN last view":  # agent 1 of env 1 is cut off, its last view NaN
                out.alive[1, 1] = False
                out.truncated[1, 1] = True
                out.final_obs[0][1, 1] = np.nan
        if count[0] == after + 1 and how == "reward to a slot not alive":
            out.alive[1, 1] = False  # ...stays gone (alive again would be joining)...
            out.reward[1, 1] = 0.5  # ...and is paid at the step after it left
        return out

    env.reset, env.step = broken_reset, broken_step
    return env


BROKEN_GROUP_ENVS = [
    ("no agents at reset", "reset(): env 0: no agent is alive, after its reset"),
    ("huge reward", "step(): env 1, agent 0: reward is NaN/inf or beyond float32's range "
                    "(episode step 3)"),
    ("terminated but alive", "step(): env 1, agent 1: reported terminated or truncated, yet "
                             "still alive while its group goes on"),
    ("all left, not done", "step(): env 1: no agent is alive, yet the group is not done"),
    ("NaN last view", "step(): env 1, agent 1: last observation 'vector' (final_obs, the step "
                      "it ended) is NaN/inf or beyond float32's range (episode step 3)"),
]


@pytest.mark.parametrize("how, fragment", BROKEN_GROUP_ENVS, ids=[c[0] for c in BROKEN_GROUP_ENVS])
def test_a_group_env_that_breaks_the_contract_is_named_not_hung(how, fragment):
    """A factory's GroupEnv with no agent alive used to hang training at 0 agent-steps; a
    reward of 1e300 became inf in float32 and read as a diverged loss; a NaN last view of a
    truncated agent, which its value is bootstrapped from, read as diverged statistics."""
    with pytest.raises(ValueError, match="GoalGroup") as info:
        train(functools.partial(broken_goal, how=how), small_config(max_steps=600))
    assert fragment in str(info.value), str(info.value)


def test_a_group_env_paying_an_agent_not_in_the_episode_is_refused():
    env = checked(broken_goal(4, how="reward to a slot not alive"))
    env.reset(seed=0)
    C, branches = env.spec.action_sizes
    noop = {"continuous": np.zeros((4, 2, C), np.float32)} if C else {}
    if branches:
        noop["discrete"] = np.zeros((4, 2, len(branches)), np.int64)
    with pytest.raises(ValueError, match=r"step\(\): env 1, agent 1: reward 0.5 paid to an agent "
                                         r"that was not in the episode"):
        for _ in range(5):
            env.step(noop)


class PaysTheGoneAtTheEnd(GroupEnv):
    """Agent 1 leaves on the first step; on the last (the time limit, step 3) a `step` of its
    own pays it 0.5, while the next episode, already started, has it alive again."""

    def __init__(self, num_envs=2):
        super().__init__(GroupSpec(2, (ObsSpec("v", "vector", (2,)),), 0, (2,), 3), num_envs)

    def _reset_envs(self, idx):
        self.alive[idx] = True

    def _step(self, cont, disc):
        leave = np.zeros_like(self.alive)
        leave[:, 1] = self.alive[:, 1] & (self.t == 0)
        self.alive &= ~leave
        return (np.zeros(self.alive.shape, np.float32), np.zeros(self.num_envs, np.float32),
                leave, np.zeros_like(leave))

    def _observe(self, rows=slice(None)):
        return (np.zeros((self.env_ids[rows].size, 2, 2), np.float32),)

    def step(self, actions):
        out = super().step(actions)
        out.reward[out.group_done, 1] = 0.5
        return out


def test_a_checked_group_env_paying_the_gone_on_the_last_step_is_refused():
    """The alive mask of a group that ended shows its next episode, not who was in the step."""
    env = checked(PaysTheGoneAtTheEnd())
    env.reset(seed=0)
    noop = {"discrete": np.zeros((2, 2, 1), np.int64)}
    env.step(noop)
    env.step(noop)
    with pytest.raises(ValueError, match=r"step\(\): env 0, agent 1: reward 0.5 paid to an "
                                         r"agent that was not in the episode"):
        env.step(noop)


def test_a_checked_group_env_may_pay_an_agent_on_the_step_it_joins():
    """As the core and both views do; only a slot with no agent in the step is refused."""
    from tests.test_views import PaidNewcomer

    env = checked(PaidNewcomer(num_envs=2))
    env.reset(seed=0)
    step = env.step({"discrete": np.zeros((2, 2, 1), np.int64)})
    assert step.reward.tolist() == [[0.0, 2.0], [0.0, 2.0]]


def test_trainer_on_an_unchecked_env_stops_at_a_non_finite_reward(tmp_path):
    trainer = Trainer(poisoned_goal(4), small_config(max_steps=2000), tmp_path, progress=False)
    with pytest.raises(TrainingDiverged, match=r"the env's team reward \(env 0, step \d+ of the "
                                               r"rollout\) became NaN/inf at agent-step \d+"):
        trainer.run()


def test_huge_rewards_warn_once_about_strength_and_value_normalization(tmp_path):
    with pytest.warns(RuntimeWarning, match="reward_signals.extrinsic.strength") as record:
        train(functools.partial(poisoned_goal, what="reward", after=0, scale=1e9),
              small_config(max_steps=600, **{"network_settings.normalize_value": False}))
    scale = [str(w.message) for w in record if "strength" in str(w.message)]
    assert len(scale) == 1 and "network_settings.normalize_value=true" in scale[0]


def test_value_normalization_keeps_the_value_loss_small_under_huge_rewards(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no reward-scale warning
        result = train(functools.partial(poisoned_goal, what="reward", after=0, scale=1e9),
                       small_config(max_steps=600, **{"network_settings.normalize_value": True}))
    assert result.agent_steps >= 600


def _send(signum):
    os.kill(os.getpid(), signum)


SIGNAL_CASES = [  # (what happens, where, expected updates in the saved checkpoint)
    (signal.SIGTERM, "collect", 2),
    (signal.SIGINT, "collect", 2),
    (signal.SIGTERM, "update", 2),  # mid-update: that update is dropped, not half-saved
    (signal.SIGINT, "update", 2),
    (signal.SIGTERM, "save", 3),  # while a checkpoint is written: it is finished first
]


@pytest.mark.parametrize("signum, where, updates", SIGNAL_CASES,
                         ids=[f"{s[0].name}-in-{s[1]}" for s in SIGNAL_CASES])
def test_signals_save_the_last_whole_update(tmp_path, monkeypatch, signum, where, updates):
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    trainer = Trainer(make_env("Goal-v0", 4), small_config(max_steps=5000, checkpoint_interval=1),
                      tmp_path, "Goal-v0", progress=False)
    originals = {"collect": trainer.collect, "update": trainer.update}
    step = trainer.optimizer.step

    def collect():
        if where == "collect" and trainer.updates == 2:
            _send(signum)
        return originals["collect"]()

    def optimizer_step(*a, **k):  # the signal lands between two minibatch steps of update 3
        out = step(*a, **k)
        if where == "update" and trainer.updates == 2:
            _send(signum)
        return out

    save = checkpoint.save

    def saving(path, state):
        if where == "save" and state["updates"] == 3 and path.name == "latest.pt":
            _send(signum)
            _send(signum)  # and a second one
        save(path, state)

    trainer.collect = collect
    trainer.optimizer.step = optimizer_step
    monkeypatch.setattr(checkpoint, "save", saving)
    result = trainer.run()
    assert result.interrupted
    state = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert state["updates"] == updates and result.agent_steps == state["agent_steps"]
    reference = Trainer(make_env("Goal-v0", 4), small_config(max_steps=5000), progress=False)
    reference.run(until=lambda t: t.updates == updates)
    assert reference.agent_steps == state["agent_steps"]
    for name, value in reference.actor.state_dict().items():
        assert torch.equal(value, state["actor"][name]), name
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


def test_set_with_a_value_that_is_not_yaml_is_a_usage_error(capsys):
    from poca.cli import main

    with pytest.raises(SystemExit) as stop:
        main(["train", "Goal-v0", "--set", "network_settings.hidden_units=[1"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "network_settings.hidden_units: the value '[1' is not valid YAML" in err
    assert "Traceback" not in err


def test_set_with_a_mapping_merges_into_the_section(tmp_path):
    """`--set hyperparameters={beta: 0.02}` changes beta alone: the rest of the section as the
    config file set it stays (it was silently reset to the defaults)."""
    from poca.cli import _assignment

    goal = POCAConfig.load("goal")
    changed = goal.override(dict([_assignment("hyperparameters={beta: 0.02}")]))
    assert changed.hyperparameters.beta == 0.02
    for key in ("learning_rate", "learning_rate_schedule", "lambd", "batch_size", "buffer_size"):
        assert getattr(changed.hyperparameters, key) == getattr(goal.hyperparameters, key), key
    memory = goal.override({"network_settings": {"memory": {"memory_size": 32}}})
    assert memory.network_settings.memory.memory_size == 32
    assert memory.network_settings.hidden_units == goal.network_settings.hidden_units
    assert memory.override({"network_settings.memory": None}).network_settings.memory is None
    with pytest.raises(ValueError, match="bta"):
        goal.override({"hyperparameters": {"bta": 0.02}})


def test_numbers_read_as_yaml_1_2_not_base_60_or_octal(tmp_path):
    """PyYAML's YAML 1.1 read `--set time_horizon=1:00` as 60 and `012` as 10, silently."""
    from poca.cli import _assignment

    with pytest.raises(ValueError, match="time_horizon must be int, got '1:00'"):
        POCAConfig().override(dict([_assignment("time_horizon=1:00")]))
    assert POCAConfig().override(dict([_assignment("time_horizon=012")])).time_horizon == 12
    assert POCAConfig().override(dict([_assignment("time_horizon=0x1F")])).time_horizon == 31
    path = tmp_path / "c.yaml"
    path.write_text("behaviors:\n  Goal:\n    time_horizon: 012\n    max_steps: 5e4\n"
                    "    hyperparameters:\n      learning_rate: 1e-3\n")
    config = POCAConfig.load(path)
    assert (config.time_horizon, config.max_steps) == (12, 50_000)
    assert config.hyperparameters.learning_rate == 1e-3


def test_a_folder_named_like_a_preset_does_not_hide_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pettingzoo").mkdir()  # e.g. a clone of PettingZoo beside the runs
    assert POCAConfig.load("pettingzoo").hyperparameters.num_epoch == 10
    (tmp_path / "goal").write_text("hyperparameters: {num_epoch: 7}\n")  # a file still wins
    assert POCAConfig.load("goal").hyperparameters.num_epoch == 7


def test_every_bundled_preset_loads_and_pettingzoo_is_the_third_party_recipe():
    from benchmarks.third_party import CASES, config_for
    from poca.config import PRESETS

    names = sorted(p.stem for p in PRESETS.glob("*.yaml"))
    assert {"goal", "grid", "mlagents_test", "pettingzoo"} <= set(names)
    for name in names:
        POCAConfig.load(name).validate()
    zoo = POCAConfig.load("pettingzoo")
    hp = zoo.hyperparameters
    assert (hp.num_epoch, hp.batch_size, hp.buffer_size, hp.learning_rate,
            hp.learning_rate_schedule, hp.beta) == (10, 512, 4096, 1e-3, "constant", 1e-2)
    assert zoo.reward_signals.extrinsic.gamma == 0.95 and zoo.network_settings.normalize_value
    case = config_for(CASES[0], "attention", 0).to_dict()
    assert case == zoo.override({"max_steps": CASES[0].budget, **CASES[0].overrides}).to_dict()
