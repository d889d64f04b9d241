"""Hyperparameters with ML-Agents' POCA names, loadable from ML-Agents-style YAML.

The defaults are ML-Agents' except four, measured on tasks nobody here tuned for (README,
"Defaults"; docs/defaults.md): the rollout sizes follow the env and the run
(`rollout_sizes`), the learning rate is 1e-3 constant (ML-Agents' 3e-4 decaying linearly is
made for multi-million-step Unity runs; on runs of a few hundred thousand steps it let a
coordination task collapse to one move), vector observations are normalized (a user's Box may
hold values of any scale), and so are the returns the critic learns (`normalize_value`: a
user's rewards may be of any scale too).

A file may hold one behavior's settings directly or ML-Agents' full layout
(`behaviors: {Name: {...}}` with exactly one behavior). Unknown or invalid keys fail with the list
of valid ones. Step counts (`max_steps`, `buffer_size`, `batch_size`, `summary_freq`, ...) count
agent-steps, as in ML-Agents: one step of a group with three agents acting is three agent-steps.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

SCHEDULES = ("linear", "constant")
# ML-Agents' top-level sections beside `behaviors:`, and what does their job here.
MLAGENTS_SECTIONS = {
    "env_settings": "give the environment as poca train's first argument, with --env-kwargs, "
                    "--num-envs and --seed",
    "checkpoint_settings": "use --run-dir, --resume and --force",
    "torch_settings": "use --device and --threads",
    "engine_settings": "not used: environments here run in Python",
    "environment_parameters": "use --env-kwargs",
    "default_settings": "write its settings into the one behavior",
    "debug": "not used: errors here say what went wrong",
}
# ML-Agents' settings that poca does not implement, by dotted name: refused when set, and
# accepted when off (null or false), as ML-Agents' own configuration.yaml dumps write them.
MLAGENTS_KEYS = {
    "self_play": "not implemented: poca trains one cooperative team",
    "behavioral_cloning": "not implemented",
    "init_path": "continue a run with --resume --run-dir instead",
    "even_checkpoints": "checkpoints come every checkpoint_interval",
    "reward_signals.gail": "intrinsic and imitation rewards are not implemented",
    "reward_signals.curiosity": "intrinsic and imitation rewards are not implemented",
    "reward_signals.rnd": "intrinsic and imitation rewards are not implemented",
    "network_settings.goal_conditioning_type": "goal observations are not implemented",
    "network_settings.deterministic": "poca eval and play take --deterministic",
    "hyperparameters.shared_critic": "a PPO option (one network for policy and value); POCA's "
                                     "actor and critic are separate networks",
}
# ML-Agents' settings that change nothing here, whatever their value (None: any): the extrinsic
# reward has no network in ML-Agents either, and goal conditioning acts only on goal
# observations, which poca's tasks do not have. Accepted, so that ML-Agents' dumps load.
INERT = {"reward_signals.extrinsic.network_settings": None,
         "network_settings.goal_conditioning_type": ("hyper", "none")}
SEED_RANGE = (0, 2**32 - 1)
# The `critic` key: MA-POCA and the two ablations of its paper (Cohen et al., arXiv 2111.05992,
# §6), each an option of one trainer; the sentence says what it removes from MA-POCA.
CRITICS = {
    "attention": "MA-POCA: attention over the agents still present, counterfactual baselines "
                 "b_i, posthumous bootstrap (removes nothing).",
    "absorbing": "COMA-style: removes the attention, the critic reads all slots in a fixed order "
                 "and an agent that left stays there as an absorbing input (zeros plus an absent "
                 "flag) until the group ends.",
    "independent": "the paper's PPO: removes the centralized critic, baseline and posthumous "
                   "credit, each agent is valued on its own observation, advantage = return - "
                   "own value, and an agent that left bootstraps from 0 (also one truncated on its "
                   "own while its group goes on: only a whole group's final view is kept).",
}
PRESETS = Path(__file__).parent / "configs"


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader (plain data, no tags that build objects) that refuses a key given
    twice in one mapping: YAML would keep the last one silently, dropping a setting."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: later keys override
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # PyYAML's own error names it below
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


# Numbers as YAML 1.2's core schema reads them: PyYAML follows YAML 1.1, where `1:00` is 60
# (base 60) and `012` is 10 (octal), so `--set time_horizon=1:00` trained with 60; here `1:00`
# stays text (then refused as not a number), 012 is 12, 0o17 and 0x1F are 15 and 31, and 1e-3 is
# a float, as ML-Agents' files write it.
_INT, _FLOAT = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_UniqueKeyLoader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789"))
_UniqueKeyLoader.add_implicit_resolver(
    _FLOAT, re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$"
                       r"|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"), list("-+0123456789."))


def _yaml_int(loader, node) -> int:
    text = loader.construct_scalar(node)
    try:  # base 0 reads 0x and 0o, and refuses 012; decimal reads 012 as 12
        return int(text, 0 if re.match(r"[-+]?0[xXoObB]", text) else 10)
    except ValueError:  # `!!int abc`: named where it is, as PyYAML names its own errors
        raise yaml.constructor.ConstructorError(None, None, f"{text!r} is not an integer",
                                                node.start_mark) from None


_UniqueKeyLoader.add_constructor(_INT, _yaml_int)


@dataclass
class Hyperparameters:
    """How the policy and critic learn (ML-Agents' names). `buffer_size` and `batch_size` left
    unset (None) follow the env and the run: see `POCAConfig.rollout_sizes`."""

    batch_size: int | None = None  # agent-steps per minibatch; None: buffer_size // 4
    buffer_size: int | None = None  # agent-steps collected between updates; None: derived
    learning_rate: float = 1e-3  # ML-Agents: 3e-4 (see the module docstring)
    learning_rate_schedule: str = "constant"  # ML-Agents: linear
    beta: float = 5e-3  # entropy bonus
    beta_schedule: str | None = None  # None: as learning_rate_schedule (ML-Agents' default)
    epsilon: float = 0.2  # trust region for the policy, value and baseline
    epsilon_schedule: str | None = None  # None: as learning_rate_schedule
    lambd: float = 0.95
    num_epoch: int = 3

    def schedules(self) -> dict[str, str]:
        """Each schedule as it runs: beta's and epsilon's, where unset, are the learning
        rate's (ML-Agents' rule)."""
        lr = self.learning_rate_schedule
        return {"learning_rate_schedule": lr, "beta_schedule": self.beta_schedule or lr,
                "epsilon_schedule": self.epsilon_schedule or lr}


@dataclass
class MemorySettings:
    memory_size: int = 128
    sequence_length: int = 64


@dataclass
class NetworkSettings:
    hidden_units: int = 128
    num_layers: int = 2
    normalize: bool = True  # vector observations, by running mean and variance (ML-Agents: off)
    # The critic learns V and the baselines in units of the returns' running mean and std (value
    # normalization as in MAPPO, Yu et al. 2022, arXiv 2103.01955): the fit and the value
    # clipping hardly depend on the reward scale. Not in ML-Agents, whose tasks keep returns
    # near 1: in raw units, value clipping bounds each update's move of V by epsilon (0.2), a
    # sliver of returns in the hundreds (docs/defaults.md: a task where that failed 2 of 3 seeds).
    normalize_value: bool = True  # ML-Agents: no such setting (raw returns, as false)
    vis_encode_type: str = "simple"
    memory: MemorySettings | None = None


@dataclass
class ExtrinsicSettings:
    gamma: float = 0.99
    strength: float = 1.0


@dataclass
class RewardSignals:
    extrinsic: ExtrinsicSettings = field(default_factory=ExtrinsicSettings)


def _merged(old, new):
    """`new` laid over `old`: mappings key by key (recursively), anything else replaced."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **{key: _merged(old.get(key), value) for key, value in new.items()}}
    return new


def _leaves(key: str, value):
    """(dotted name, value) of each setting that `{key: value}` sets: a mapping by its keys
    (an empty one as itself: it merges nothing, but a dotted key beside it is given twice)."""
    if isinstance(value, dict) and value:
        for sub, inner in value.items():
            yield from _leaves(f"{key}.{sub}", inner)
    else:
        yield key, value


@dataclass
class POCAConfig:
    """Everything a run is made of, in ML-Agents' layout (one behavior's settings), plus the
    settings of ours below (`num_envs`, `seed`, `device`, `threads`). YAML files written for
    ML-Agents' POCA load unchanged."""

    trainer_type: str = "poca"
    critic: str = "attention"  # one of CRITICS
    hyperparameters: Hyperparameters = field(default_factory=Hyperparameters)
    network_settings: NetworkSettings = field(default_factory=NetworkSettings)
    reward_signals: RewardSignals = field(default_factory=RewardSignals)
    max_steps: int = 500_000
    time_horizon: int = 64  # env steps after which a return is cut and bootstrapped
    summary_freq: int = 50_000
    checkpoint_interval: int = 50_000  # agent-steps; also saved at least every 5 minutes
    keep_checkpoints: int = 5
    threaded: bool = False  # accepted for ML-Agents files; collection and updates alternate
    # Ours, not ML-Agents':
    num_envs: int = 16  # groups stepped at once
    seed: int = 0
    device: str = "cpu"
    threads: int = 1  # torch CPU threads; more were measured 15-240x slower on small machines
    # PettingZoo envs: processes stepping the copies in parallel (0: in the trainer's process);
    # the same seed gives the same run for any number
    num_env_workers: int = 0

    @classmethod
    def from_dict(cls, data: dict) -> POCAConfig:
        if not isinstance(data, dict):
            raise ValueError(f"config must be a mapping of settings, got {type(data).__name__}")
        if data.get("trainer_type", "poca") != "poca":  # before its other keys are read
            raise ValueError(f"trainer_type must be 'poca', got {data['trainer_type']!r}: this "
                             "trainer is MA-POCA (`critic: independent` is its paper's PPO "
                             "ablation); the other settings of a ppo or sac file may not apply")
        problems = _unknown_keys(cls, data, "")  # every level at once
        if problems:
            raise ValueError("; ".join(problems))
        config = _build(cls, data, "")
        config.validate()
        return config

    @classmethod
    def of(cls, config: POCAConfig | dict | str | Path | None) -> POCAConfig:
        """What the Python API takes as a config: a POCAConfig, a mapping of one behavior's
        settings (as `from_dict`, or dotted keys as `override`), a YAML file or bundled preset
        name (as `load`), or None for the defaults."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        if isinstance(config, dict):  # nested sections or dotted keys, as `override` takes
            return cls().override(config)
        if isinstance(config, (str, Path)):
            return cls.load(config)
        raise TypeError(f"config must be a POCAConfig, a dict of settings, a YAML file or preset "
                        f"name, or None, got {type(config).__name__}")

    @classmethod
    def load(cls, source: str | Path) -> POCAConfig:
        """A YAML file path, or the name of a bundled preset (poca/configs/NAME.yaml). A file of
        that name in the working directory wins over the preset; a folder does not (a clone of
        PettingZoo named `pettingzoo` beside a run must not hide the preset)."""
        path = Path(source)
        if not path.is_file() and (PRESETS / f"{source}.yaml").exists():
            path = PRESETS / f"{source}.yaml"
        if not path.exists():
            presets = sorted(p.stem for p in PRESETS.glob("*.yaml"))
            raise FileNotFoundError(f"no config file {str(source)!r}; bundled presets: {presets}")
        if path.is_dir():
            raise ValueError(f"{path} is a directory, not a YAML config file")
        try:
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
        except UnicodeDecodeError:
            raise ValueError(f"{path} is not a text (UTF-8 YAML) file") from None
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            what = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise ValueError(f"{path}{where}: invalid YAML: {what}") from None
        except OSError as err:
            raise ValueError(f"cannot read config {path}: {err.strerror or err}") from None
        if data is None:
            raise ValueError(f"{path} is empty (or only comments): a config must be a mapping "
                             "of settings; to train with the defaults, leave out --config")
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a config must be a mapping (ML-Agents' `behaviors:` "
                             f"layout or one behavior's settings), got {type(data).__name__}")
        if "behaviors" in data:
            # ML-Agents' other run options load when off (null/false), as its dumps write them
            others = [k for k in data if k != "behaviors" and not (
                k in MLAGENTS_SECTIONS and _off(data[k], section=True))]
            if others:
                hints = [f"{k} ({MLAGENTS_SECTIONS[k]})" if k in MLAGENTS_SECTIONS else str(k)
                         for k in others]
                raise ValueError(f"{path}: only `behaviors:` is read; remove the other top-level "
                                 f"key(s) {', '.join(hints)}")
            behaviors = data["behaviors"]
            if not isinstance(behaviors, dict) or len(behaviors) != 1:
                got = list(behaviors) if isinstance(behaviors, dict) else repr(behaviors)
                raise ValueError(f"{path}: expected exactly one behavior under `behaviors:`, "
                                 f"got {got}")
            (name, data), = behaviors.items()
            if not isinstance(data, dict):
                raise ValueError(f"{path}: behaviors.{name} must be a mapping of settings, got "
                                 f"{data!r}")
        try:
            return cls.from_dict(data)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def override(self, dotted: dict) -> POCAConfig:
        """A copy with `{"hyperparameters.learning_rate": 1e-3, "num_envs": 8}` applied. A
        mapping given for a section is merged into it, key by key (`{"hyperparameters":
        {"beta": 0.02}}` changes beta alone), as the same keys given one by one would be."""
        data = self.to_dict()
        given: dict[str, object] = {}
        for key, value in dotted.items():
            for name, leaf_value in _leaves(str(key), value):
                if name in given:
                    raise ValueError(f"{name} is given twice ({given[name]!r} and "
                                     f"{leaf_value!r}), as a section's mapping and a dotted key: "
                                     f"give it once")
                given[name] = leaf_value
        for inner in given:  # a setting given whole (not a mapping to merge) and one inside it
            parts = inner.split(".")
            for outer in (".".join(parts[:k]) for k in range(1, len(parts))):
                if outer in given and not isinstance(given[outer], dict):
                        raise ValueError(f"{outer} is given as {given[outer]!r} and {inner} as "
                                     f"{given[inner]!r}: which applies would depend on their "
                                     f"order; give {outer} as a mapping, or its settings one by "
                                     f"one")
        for key, value in dotted.items():
            *parents, leaf = key.split(".")
            node = data
            for depth, p in enumerate(parents):
                if node.get(p) is None:
                    node[p] = {}
                if not isinstance(node[p], dict):
                    raise ValueError(f"{'.'.join(parents[:depth + 1])} is a setting, not a "
                                     f"section: {key!r} names nothing")
                node = node[p]
            node[leaf] = _merged(node.get(leaf), value)
        return POCAConfig.from_dict(data)

    def rollout_sizes(self, num_agents: int) -> tuple[int, int]:
        """(buffer_size, batch_size) in agent-steps, for a task with `num_agents` slots.

        Given values are used as they are. An unset buffer holds one `time_horizon` of every
        slot of every env, but no more than `max_steps / 32`, so that even a short run makes at
        least ~32 updates (ML-Agents' fixed 10,240 is made for long runs of one big Unity scene;
        on a 20k-step task it makes two updates), and no less than one step of every slot. An
        unset batch is a quarter of the buffer: 4 minibatches per epoch.
        """
        hp, slots = self.hyperparameters, self.num_envs * num_agents
        batch = hp.batch_size
        buffer = hp.buffer_size or max(slots, min(slots * self.time_horizon,
                                                  self.max_steps // 32), batch or 1)
        return buffer, batch or max(1, buffer // 4)

    def validate(self) -> None:
        hp, net = self.hyperparameters, self.network_settings
        positive = {"hyperparameters.batch_size": 1 if hp.batch_size is None else hp.batch_size,
                    "hyperparameters.buffer_size": 1 if hp.buffer_size is None
                    else hp.buffer_size,
                    "hyperparameters.num_epoch": hp.num_epoch,
                    "hyperparameters.learning_rate": hp.learning_rate,
                    "hyperparameters.epsilon": hp.epsilon,
                    "network_settings.hidden_units": net.hidden_units,
                    "network_settings.num_layers": net.num_layers,
                    "max_steps": self.max_steps, "time_horizon": self.time_horizon,
                    "summary_freq": self.summary_freq,
                    "checkpoint_interval": self.checkpoint_interval,
                    "num_envs": self.num_envs, "threads": self.threads,
                    "reward_signals.extrinsic.strength": self.reward_signals.extrinsic.strength}
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        strength = self.reward_signals.extrinsic.strength  # rewards are scaled by it
        bounded = {"hyperparameters.learning_rate": (hp.learning_rate, 0, 1),
                   "hyperparameters.beta": (hp.beta, 0, 1),
                   "hyperparameters.epsilon": (hp.epsilon, 0, 1),
                   "reward_signals.extrinsic.strength": (strength, 0, 1e6)}
        for name, (value, low, high) in bounded.items():
            if not (math.isfinite(value) and low <= value <= high):
                opening = "(" if name in positive else "["  # those are > 0 (checked above)
                raise ValueError(f"{name} must be a finite number in {opening}{low}, {high:g}], "
                                 f"got {value!r}")
        if not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]:
            raise ValueError(f"seed must be in [{SEED_RANGE[0]}, {SEED_RANGE[1]}], got "
                             f"{self.seed}")
        if None not in (hp.batch_size, hp.buffer_size) and hp.batch_size > hp.buffer_size:
            raise ValueError(f"hyperparameters.batch_size ({hp.batch_size}) must not exceed "
                             f"buffer_size ({hp.buffer_size})")
        gamma = self.reward_signals.extrinsic.gamma
        for name, value in (("hyperparameters.lambd", hp.lambd),
                            ("reward_signals.extrinsic.gamma", gamma)):
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if self.num_env_workers < 0 or self.num_env_workers > self.num_envs:
            raise ValueError(f"num_env_workers must be in [0, num_envs={self.num_envs}] (each "
                             f"worker steps at least one copy), got {self.num_env_workers}")
        if self.keep_checkpoints < 0:
            raise ValueError(f"keep_checkpoints must be >= 0 (0: keep all, as in ML-Agents), "
                             f"got {self.keep_checkpoints}")
        for name in ("learning_rate_schedule", "beta_schedule", "epsilon_schedule"):
            if getattr(hp, name) not in SCHEDULES and not (
                    name != "learning_rate_schedule" and getattr(hp, name) is None):
                raise ValueError(f"hyperparameters.{name} must be one of {list(SCHEDULES)}, "
                                 f"got {getattr(hp, name)!r}")
        if self.critic not in CRITICS:
            raise ValueError(f"critic must be one of {list(CRITICS)}, got {self.critic!r}")
        if self.critic == "independent" and net.memory is not None:
            raise ValueError("critic: independent does not support network_settings.memory")
        if self.trainer_type != "poca":
            raise ValueError(f"trainer_type must be 'poca', got {self.trainer_type!r}")
        if net.memory is not None and (net.memory.memory_size <= 0 or net.memory.memory_size % 2
                                       or net.memory.sequence_length <= 0):
            raise ValueError("network_settings.memory: memory_size must be even and > 0, "
                             "sequence_length > 0")
        from poca.attention import HEADS
        from poca.encoders import MIN_IMAGE_SIZE

        if net.hidden_units % HEADS and self.critic == "attention":
            raise ValueError(f"network_settings.hidden_units must be a multiple of {HEADS} with "
                             f"critic 'attention' (the heads of its attention over agents), got "
                             f"{net.hidden_units}")

        if net.vis_encode_type not in MIN_IMAGE_SIZE:
            raise ValueError(f"network_settings.vis_encode_type must be one of "
                             f"{list(MIN_IMAGE_SIZE)}, got {net.vis_encode_type!r}")
        if self.device not in ("cpu", "cuda") and not (
                self.device.startswith("cuda:") and self.device[5:].isdigit()):
            raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got {self.device!r}")


def _build(cls, data, where: str):
    """Build dataclass `cls` from a dict (its unknown keys already refused by
    `_unknown_keys`), failing on wrong types."""
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'config'} must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    hints = {name: _resolve(cls, f) for name, f in fields.items()}
    for key, value in data.items():
        if key not in fields:  # an ML-Agents setting written as off or inert (_unknown_keys)
            continue
        typ, name = hints[key], f"{where}.{key}" if where else key
        nested = _section(typ)
        if isinstance(typ, tuple):  # Optional[...]
            if value is None:
                kwargs[key] = None
                continue
            typ = typ[0]
        if nested is not None:
            kwargs[key] = _build(nested, value, name)
        else:
            kwargs[key] = _coerce(value, typ, name)
    return cls(**kwargs)


def _off(value, section: bool = False) -> bool:
    """How ML-Agents writes a setting that is not used: null or false (not 0); with `section`
    (a top-level section of its run options), also a mapping of nothing but those (a setting
    such as self_play: {} is on, with its defaults)."""
    if section and isinstance(value, dict):
        return all(_off(v, section) for v in value.values())
    return value is None or value is False


def _unknown_keys(cls, data, where: str) -> list[str]:
    """What in `data` (for dataclass `cls`) is not a setting, at every level at once (so that a
    file needs one round of edits), with a hint for ML-Agents' settings. Not unknown: ML-Agents'
    settings written as off (null or false) and those that change nothing here (`INERT`)."""
    if not isinstance(data, dict):
        return []
    fields = {f.name: f for f in dataclasses.fields(cls)}
    dotted = {key: f"{where}.{key}" if where else str(key) for key in data}

    def accepted(key) -> bool:
        name, value = dotted[key], data[key]
        if name in INERT:
            return INERT[name] is None or value in INERT[name] or value is None
        return name in MLAGENTS_KEYS and _off(value)

    unknown = sorted((key for key in data if key not in fields and not accepted(key)), key=str)
    problems = []
    if unknown:
        hints = [f"{key} (ML-Agents' setting, {MLAGENTS_KEYS[dotted[key]]}; remove it)"
                 for key in unknown if dotted[key] in MLAGENTS_KEYS]
        problems.append(f"unknown key(s) {unknown} in {where or 'config'}; valid: {list(fields)}"
                        + (f"; {'; '.join(hints)}" if hints else ""))
    for key, value in data.items():
        nested = _section(_resolve(cls, fields[key])) if key in fields else None
        if nested is not None:
            problems += _unknown_keys(nested, value, dotted[key])
    return problems


def _section(typ):
    """The dataclass a setting of type `typ` holds (also an optional one), or None."""
    if isinstance(typ, tuple):  # Optional[...]
        return next((t for t in typ if dataclasses.is_dataclass(t)), None)
    return typ if dataclasses.is_dataclass(typ) else None


def _resolve(cls, f):
    ann = f.type if not isinstance(f.type, str) else f.type
    types = {"int": int, "float": float, "bool": bool, "str": str}
    if ann in types:
        return types[ann]
    if ann.endswith(" | None"):
        base = ann.removesuffix(" | None")
        return (types.get(base) or globals()[base], type(None))
    return globals()[ann]


def _coerce(value, typ, name):
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:  # np.int64(3)
        # a plain number: configs go into checkpoints and JSON. A float32's shortest decimal
        # (np.float32(1e-3) -> 0.001), not its exact binary value (0.0010000000474974513),
        # which a resume given the plain 1e-3 would refuse as a change
        narrow = value.dtype.kind == "f" and value.dtype.itemsize < 8
        value = float(str(value)) if narrow else value.item()
    if typ is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if typ is int and isinstance(value, float) and value.is_integer():
        return int(value)  # YAML "5e4" style numbers
    if typ in (int, float) and isinstance(value, str):
        try:  # "3e-4" and "5e4" as text (PyYAML's own loaders, a dict given in Python)
            number = float(value)
        except ValueError:
            pass
        else:
            if typ is float or number.is_integer():
                return typ(number)
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise ValueError(f"{name} must be {typ.__name__}, got {value!r}")
    return value
