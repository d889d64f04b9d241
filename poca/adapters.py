"""Environments for the trainer: everything becomes an `envs.core.GroupEnv`.

An environment is one of ours (`groupenvs/Goal-v0` or `Goal-v0`), a `module:attr` path to a
callable that takes `num_envs` and returns a `GroupEnv`, or any PettingZoo `ParallelEnv`
factory: `ParallelEnvGroup` steps N copies of it as one batch of groups.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import logging
import math
import re
import sys
import traceback
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from gymnasium import spaces

from envs.core import GroupEnv, GroupSpec, ObsSpec, check_int, env_keys, hash_bits
from envs.spaces import one_line
from poca import runfolder

SUPPORTED = ("Box (any shape; uint8 (H, W, C) is an image, other shapes are flattened to a "
             "vector), Discrete (one-hot), or a Dict of those (an 'action_mask' entry is the "
             "action mask); for Tuple, MultiBinary or MultiDiscrete observations, flatten them "
             "into a Box in a wrapper (gymnasium.spaces.flatten)")
SUPPORTED_ACTIONS = ("Box with finite bounds (any shape), Discrete, or MultiDiscrete with a 1-D "
                     "nvec; for Dict, Tuple or MultiBinary actions, flatten them in a wrapper")
NEVER = 2**31 - 1
FLOAT32_MAX = float(np.finfo(np.float32).max)


def _components(space: spaces.Space, where: str) -> list[tuple[str, spaces.Space]]:
    if isinstance(space, spaces.Dict):
        parts = [(k, s) for k, s in space.spaces.items() if k != "action_mask"]
        if not parts:
            raise ValueError(f"{where}: the observation space {space} holds no observation "
                             "besides its action_mask; the policy needs something to see")
        return parts
    if isinstance(space, (spaces.Box, spaces.Discrete)):
        return [("obs", space)]
    raise TypeError(f"{where}: unsupported observation space {one_line(space)}; supported: "
                    f"{SUPPORTED}")


def _float64_range(dtype: np.dtype) -> tuple[float, float]:
    """The lowest and highest float64 values that an integer dtype holds (int64's highest is
    2**63 - 1024: float64 has no 2**63 - 1)."""
    info = np.iinfo(dtype)
    top = float(info.max)
    return float(info.min), top if int(top) <= info.max else float(np.nextafter(top, 0))


def _is_image(space: spaces.Space) -> bool:
    """uint8 (H, W, C), any channel count (stacked frames too): read as an image, as ML-Agents
    reads every rank-3 observation."""
    return space.dtype == np.uint8 and len(space.shape) == 3


def _obs_spec(name: str, space: spaces.Space, where: str) -> ObsSpec:
    if isinstance(space, spaces.Discrete):
        return ObsSpec(name, "vector", (int(space.n),), 0.0, 1.0)
    if not isinstance(space, spaces.Box):
        raise TypeError(f"{where}: unsupported observation space {one_line(space)} under "
                        f"{name!r}; supported: {SUPPORTED}")
    if not np.prod(space.shape):
        raise ValueError(f"{where}: the observation {name!r} is empty ({space}); give it at "
                         "least one number, or leave it out")
    if _is_image(space):  # pixels are divided by the largest value the space allows
        return ObsSpec(name, "image", tuple(space.shape), 0.0,
                       float(max(1, int(np.max(space.high)))))
    low = float(np.clip(np.min(space.low), -1e9, 1e9))  # bounds for the views, not the networks
    high = float(np.clip(np.max(space.high), low, 1e9))
    return ObsSpec(name, "vector", (int(np.prod(space.shape)),), low, high)


STEP_FIELDS = ("observations", "rewards", "terminations", "truncations", "infos")


def _encode(space: spaces.Space, value, where: str) -> np.ndarray:
    """One observation component as stored; `where` names it in errors."""
    if isinstance(space, spaces.Discrete):
        start, n = int(space.start), int(space.n)
        if isinstance(value, np.ndarray) and value.shape == ():
            value = value.item()
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{where} must be an int of {space}, got {value!r}")
        if not start <= value < start + n:
            raise ValueError(f"{where} is {value}, outside {space}")
        one_hot = np.zeros(n, np.float32)
        one_hot[int(value) - start] = 1
        return one_hot
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where} is not an array ({err})") from None
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{where} must hold numbers, got {array.dtype} {value!r:.80}")
    if array.shape != space.shape:
        raise ValueError(f"{where} has shape {array.shape}; the observation space's is "
                         f"{space.shape}")
    if array.dtype.kind == "f" and not (np.isfinite(array).all() and (
            array.dtype.itemsize <= 4 or (np.abs(array) <= FLOAT32_MAX).all())):
        raise ValueError(f"{where} holds NaN/inf, or values beyond float32's range (what the "
                         "networks read)")
    if not _is_image(space):
        return array.reshape(-1)
    if array.dtype != np.uint8 and array.size and not (
            array.min() >= 0 and array.max() <= 255 and (array == np.round(array)).all()):
        # stored as uint8: 300 would wrap to 44, a float frame in [0, 1] would turn black
        raise ValueError(f"{where} must hold the uint8 values 0..255 of its {space}, got "
                         f"{array.dtype} values in [{array.min()}, {array.max()}]"
                         + ("" if array.dtype.kind != "f" or (array == np.round(array)).all()
                            else " that are not whole numbers"))
    high = int(np.max(space.high))
    if high < 255 and array.size and array.max() > high:  # pixels are divided by it
        raise ValueError(f"{where} holds {array.max()}, above its space's high {high} (the "
                         f"networks divide its pixels by {high})")
    return array


def _number(value, where: str) -> float:
    """A finite real number (a reward), or a clear error."""
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                    np.floating)):
        raise ValueError(f"{where} must be a number, got {type(value).__name__} {value!r:.80}")
    number = float(value)  # a Python float: comparing a float16 with 3.4e38 would overflow
    if not math.isfinite(number):
        raise ValueError(f"{where} is {value}")
    if abs(number) > FLOAT32_MAX:
        raise ValueError(f"{where} is {value}, beyond float32's range (what the trainer adds up)")
    return number


def slot_order(names) -> list:
    """Agent names in the order their slots take: natural order (piston_2 before piston_10, so
    the usual `name_<i>` lists keep their own order), not the env's list order, which for a
    list built from a set follows string hashing and differs between processes (env workers,
    a resume): the same seed must give the same run."""
    return sorted(names, key=lambda name: ([int(part) if i % 2 else part for i, part in
                                            enumerate(re.split(r"(\d+)", str(name)))],
                                           str(name), type(name).__name__))  # ties: a01, a1


def _same_sum(reward, own: float, paid: float) -> bool:
    """`reward` is `own + paid` up to the rounding of the reward's own dtype (float32 for plain
    numbers, as groupenvs' views add them), relative to the parts' sizes: parts that nearly
    cancel leave a sum whose rounding is large next to itself."""
    dtype = getattr(reward, "dtype", np.float32)
    eps = float(np.finfo(dtype if np.issubdtype(dtype, np.floating) else np.float32).eps)
    return abs(float(reward) - (own + paid)) <= 4 * eps * (abs(own) + abs(paid)) + 1e-6


def _flag(value, where: str) -> bool:
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if isinstance(value, np.ndarray) or (not isinstance(value, (bool, np.bool_))
                                         and value not in (0, 1)):
        raise ValueError(f"{where} must be a bool, got {value!r:.80}")
    return bool(value)


class ParallelEnvGroup(GroupEnv):
    """`num_envs` copies of a PettingZoo ParallelEnv as one `GroupEnv`.

    Agent slots are `possible_agents` in `slot_order`, or, with `max_agents`, are handed out in
    order of appearance (in `slot_order` within a step) to agents whose names show up during an
    episode (a slot is not reused within an
    episode). `alive` follows `agents`; each agent's reward is its individual reward, on the step
    it joins too (the trainer adds them up as the team reward); a copy's episode ends when
    `agents` is empty or every remaining agent is truncated, and it is reset with its own seed.
    All agents must share observation and action spaces (POCA trains one shared policy).
    Continuous actions in [-1, 1] are scaled to the Box's bounds. An env whose `infos[agent]`
    carry `group_reward` and `individual_reward` (as groupenvs' views do) has its reward split
    into those parts (see `_read_reward`).
    """

    def __init__(self, env_fn: Callable, num_envs: int = 1, max_agents: int | None = None,
                 max_steps: int | None = None, first_copy: int = 0):
        # first_copy: these are copies first_copy.. of a larger set (one env worker's share,
        # see poca.workers): they draw that copy's seeds and errors name it
        self.first_copy = check_int("first_copy", first_copy, 0)
        self.copies = [env_fn() for _ in range(check_int("num_envs", num_envs, 1))]
        if len({id(env) for env in self.copies}) < len(self.copies):
            for env in {id(env): env for env in self.copies}.values():
                env.close()
            raise ValueError(f"the env factory returned the same env object for several of the "
                             f"{len(self.copies)} copies: it must build a new env on each call "
                             "(`lambda: make_my_env()`, not `lambda: env`), or every copy steps "
                             "one env and the episodes are garbage")
        first = self.copies[0]
        self.fixed_slots = max_agents is None
        # slot i is names[i] in every copy (without max_agents), see slot_order
        names = slot_order(first.possible_agents)
        self._possible = names
        if not names:
            raise ValueError("the ParallelEnv has no possible_agents")
        A = len(names) if max_agents is None else check_int("max_agents", max_agents, 1)
        self.obs_space = first.observation_space(names[0])
        self.act_space = first.action_space(names[0])
        self._check_spaces(first, names)
        self.components = _components(self.obs_space, names[0])
        obs_specs = tuple(_obs_spec(n, s, names[0]) for n, s in self.components)
        C, branches = self._action_sizes(names[0])
        spec = GroupSpec(num_agents=A, obs=obs_specs, continuous_size=C,
                         discrete_branches=branches,
                         max_steps=NEVER if max_steps is None else check_int("max_steps",
                                                                              max_steps, 1))
        super().__init__(spec, num_envs)
        # the core's errors name agents; checkpoints keep the names (a resume checks them)
        self.slot_names = names if self.fixed_slots else None
        E = self.num_envs
        self.obs = [np.zeros((E, A, *o.shape), dtype=o.dtype) for o in obs_specs]
        self.mask = np.ones((E, A, sum(branches)), dtype=bool) if branches else None
        self.slots: list[dict[str, int]] = [{} for _ in range(E)]
        self._has_mask = (isinstance(self.obs_space, spaces.Dict)
                          and "action_mask" in self.obs_space.spaces)
        if self._has_mask and not branches:
            warnings.warn(f"agent {names[0]!r}: the observation's 'action_mask' is ignored: the "
                          f"action space {one_line(self.act_space)} has no discrete actions to "
                          "mask", RuntimeWarning, stacklevel=2)
        self.pays_group_reward = False  # until its infos (at reset or a step) show a group_reward
        # ... unless the env says it pays none (groupenvs' PettingZoo view of such a task, whose
        # infos still carry a group_reward of 0)
        self._may_pay_group = bool(getattr(first, "pays_group_reward", True))
        self._final_frames: dict[int, np.ndarray] = {}  # for rendering: ended episodes' last
        self._started = np.zeros(E, dtype=bool)

    # -- spaces --
    def _check_spaces(self, env, names) -> None:
        for name in names:
            if env.observation_space(name) != self.obs_space or \
                    env.action_space(name) != self.act_space:
                raise ValueError(
                    f"agents {names[0]!r} and {name!r} have different spaces "
                    f"({self.obs_space}, {self.act_space} vs {env.observation_space(name)}, "
                    f"{env.action_space(name)}); POCA shares one policy, so all agents need the "
                    "same observation and action spaces; agents of different kinds with Box or "
                    "Discrete spaces that work for one goal can be padded to one in your factory "
                    "with SuperSuit (pip install supersuit): return "
                    "ss.agent_indicator_v0(ss.pad_action_space_v0(ss.pad_observations_v0(env))); "
                    "not opposing teams (e.g. mpe2 simple_tag's adversaries and prey): every "
                    "agent learns from the sum of all rewards, so each side would learn the "
                    "other's goal too")

    def _action_sizes(self, where: str) -> tuple[int, tuple[int, ...]]:
        space = self.act_space
        if isinstance(space, spaces.Box):
            # is_bounded too: an integer Box keeps -inf/inf as its dtype's extremes
            if not (space.is_bounded() and np.isfinite(space.low).all()
                    and np.isfinite(space.high).all()):
                integer = space.dtype.kind in "iu"
                raise ValueError(f"{where}: continuous actions need finite Box bounds"
                                 + (" (an integer Box made with -inf/inf holds its dtype's "
                                    "extremes and is not bounded)" if integer else "") + ", got "
                                 f"{one_line(space)}: the policy's actions in [-1, 1] are "
                                 "scaled to them; give the action space the range the env "
                                 "accepts (in a wrapper if need be)")
            if not np.prod(space.shape):
                raise ValueError(f"{where}: the action space {one_line(space)} is empty; an "
                                 "agent needs at least one action")
            return int(np.prod(space.shape)), ()
        if isinstance(space, spaces.Discrete):
            return 0, (int(space.n),)
        if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
            return 0, tuple(int(n) for n in space.nvec)
        raise TypeError(f"{where}: unsupported action space {one_line(space)}; supported: "
                        f"{SUPPORTED_ACTIONS}")

    def _to_env_action(self, cont, disc):
        space = self.act_space
        if isinstance(space, spaces.Box):
            # (1 - u) low + u high in float64 cannot overflow for any finite bounds (high - low
            # can); the clip after the cast keeps rounding from stepping past a bound
            u = (cont.astype(np.float64) + 1) / 2
            low, high = space.low.reshape(-1), space.high.reshape(-1)
            scaled = (1 - u) * low + u * high
            if space.dtype.kind in "iu":  # the nearest whole number (a cast would truncate),
                # and within what the dtype holds: float64(2**63 - 1) is 2**63, which the cast
                # would wrap to the lowest int64
                scaled = np.clip(np.rint(scaled), *_float64_range(space.dtype))
            elif space.dtype.kind == "b":  # the nearest of False and True (a cast is True
                # for everything but exactly the lowest output)
                scaled = np.rint(scaled)
            scaled = scaled.astype(space.dtype)
            return np.clip(scaled, low, high).reshape(space.shape)
        if isinstance(space, spaces.Discrete):
            return int(disc[0]) + int(space.start)
        return (disc + space.start).astype(space.dtype)  # MultiDiscrete, with its offsets

    # -- per-agent bookkeeping --
    def _slot_of(self, e: int, name: str, where: str) -> int:
        slots = self.slots[e]
        if name not in slots:
            if self.fixed_slots:
                raise ValueError(f"{where}: agent {name!r} is not in possible_agents; for "
                                 "environments that add agents under new names give the most "
                                 "agents one episode can hold (--max-agents N, or max_agents)")
            if len(slots) >= self.max_agents:
                raise ValueError(f"{where}: agent {name!r} is agent {len(slots) + 1} of this "
                                 f"episode, more than max_agents={self.max_agents} (raise "
                                 "--max-agents)")
            space_ok = (self.copies[e].observation_space(name) == self.obs_space
                        and self.copies[e].action_space(name) == self.act_space)
            if not space_ok:
                self._check_spaces(self.copies[e], [name])
            slots[name] = len(slots)
        return slots[name]

    def _give_slots(self, e: int, names, where: str) -> None:
        """Slots for agents new to the episode (with max_agents), in `slot_order`: the order of
        the env's `agents` may differ between processes (names kept in a set iterate in hash
        order), and the run must not."""
        if not self.fixed_slots:
            for name in slot_order(n for n in names if n not in self.slots[e]):
                self._slot_of(e, name, where)

    def _write(self, e: int, name: str, obs, info, where: str) -> None:
        i = self._slot_of(e, name, where)
        where = f"{where}: agent {name!r}: observation"
        if isinstance(self.obs_space, spaces.Dict):
            if not isinstance(obs, dict):
                raise ValueError(f"{where} must be a dict with keys {list(self.obs_space)}, "
                                 f"got {type(obs).__name__}")
            missing = [k for k in self.obs_space.spaces if k not in obs]
            if missing:
                raise ValueError(f"{where} lacks the key(s) {missing}")
            if len(obs) != len(self.obs_space.spaces):  # keys the space does not declare
                extra = sorted(map(str, obs.keys() - self.obs_space.spaces.keys()))
                hint = (": declare it in the Dict space so that the policy's actions are "
                        "masked (poca reads it there, or in infos[agent]['action_mask'])"
                        if "action_mask" in extra else "")
                raise ValueError(f"{where} holds key(s) {extra} that its Dict space does not "
                                 f"declare{hint}")
            values = obs
        else:
            values = {"obs": obs}
        for store, (key, space) in zip(self.obs, self.components, strict=True):
            store[e, i] = _encode(space, values[key],
                                  where if key == "obs" else f"{where}[{key!r}]")
        if self.mask is not None:
            mask = values.get("action_mask") if self._has_mask else None
            field = f"{where}: its action_mask"
            if mask is None:
                mask = info.get("action_mask")
                field = f"{where.rpartition(': observation')[0]}: infos['action_mask']"
            if mask is None:
                self.mask[e, i] = True
                return
            self.mask[e, i] = self._flat_mask(mask, field)

    def _flat_mask(self, mask, where: str) -> np.ndarray:
        """An agent's action mask as `sum(branches)` bools: one flat array, or Gymnasium's
        per-branch form for MultiDiscrete (a tuple of arrays, as `MultiDiscrete.sample(mask=)`
        takes)."""
        branches = self.spec.discrete_branches
        n = self.mask.shape[2]
        if isinstance(mask, tuple) and len(mask) == len(branches) and all(
                np.ndim(part) == 1 for part in mask):
            if [np.size(part) for part in mask] != list(branches):
                raise ValueError(f"{where}: per branch, its parts must hold {list(branches)} "
                                 f"bools, got {[np.size(part) for part in mask]}")
            mask = np.concatenate([np.asarray(part) for part in mask])
        try:
            mask = np.asarray(mask)
        except ValueError:  # ragged
            mask = np.asarray(None)
        if mask.size != n or mask.dtype.kind not in "biu":
            hint = (f", or a tuple of {len(branches)} arrays of {list(branches)} bools (one per "
                    "branch)" if len(branches) > 1 else "")
            raise ValueError(f"{where} must hold {n} bools{hint}; got {mask.dtype} "
                             f"{list(mask.shape)}")
        return mask.astype(bool).reshape(-1)

    def random_bits(self, idx, step=0):
        if not self.first_copy:
            return super().random_bits(idx, step)
        if getattr(self, "_keys_for", None) != self._seed:  # copy i's stream, as in one group
            self._shifted_keys = env_keys(self._seed, self.first_copy + self.num_envs)[
                self.first_copy:]
            self._keys_for = self._seed
        return hash_bits(self._shifted_keys[idx], self.episode[idx], step)

    # -- GroupEnv hooks --
    # Every value from the env is checked where it enters; errors name the copy, the episode
    # step, the agent and the field.
    def _reset_envs(self, idx):
        # each copy, each episode: its own seed, below 2**32 as the legacy np.random.seed and
        # RandomState that many envs still seed with require (Gymnasium takes any)
        seeds = self.random_bits(idx) >> np.uint64(32)
        for e, seed in zip(idx.tolist(), seeds.tolist(), strict=True):
            env, where = self.copies[e], f"env copy {self.first_copy + e}, reset"
            if self.record_final and self._started[e]:
                self._final_frames[e] = self._render_copy(e)
            with _naming(where):
                out = env.reset(seed=int(seed))
            if not (isinstance(out, tuple) and len(out) == 2):
                raise ValueError(f"{where}: reset() must return (observations, infos) (the "
                                 f"PettingZoo ParallelEnv API), got {_describe(out)}")
            obs, infos = _dicts(out, ("observations", "infos"), where, "reset()")
            self._started[e] = True
            if self.fixed_slots and (possible := slot_order(env.possible_agents)) != \
                    self._possible:
                raise ValueError(f"{where}: possible_agents is {possible}, not "
                                 f"{self._possible} as when the run started (PettingZoo keeps "
                                 "it fixed); for environments whose agents change, give the "
                                 "most agents one episode can hold (--max-agents N, or "
                                 "max_agents)")
            self.slots[e] = {} if not self.fixed_slots else {
                n: i for i, n in enumerate(self._possible)}
            for store in self.obs:
                store[e] = 0
            self.alive[e] = False
            if not env.agents:
                raise ValueError(f"{where}: no agents after reset(); an episode needs at least "
                                 "one")
            self._give_slots(e, env.agents, where)
            for name in env.agents:
                if name not in obs:
                    raise ValueError(f"{where}: agent {name!r} is in agents but has no "
                                     "observation")
                info = _info(infos, name, where)
                self.pays_group_reward |= (self._may_pay_group and "group_reward" in info
                                           and "individual_reward" in info)
                self._write(e, name, obs[name], info, where)
                self.alive[e, self._slot_of(e, name, where)] = True

    def _read_reward(self, e, i, name, rew, info, field, reward, group_reward) -> bool:
        """Agent `name`'s reward into reward[e, i], checked; False if it reports none.

        With `group_reward` and `individual_reward` in its info (groupenvs' views), the group
        part is the group's, not the agent's: every agent that shares in it reports the same
        value, and one that does not (an agent absorbed or just joined, e.g. groupenvs'
        `death_mode="absorb"`) reports 0, so a 0 never overwrites another agent's report, and two
        different non-zero reports are an error."""
        if "group_reward" in info and "individual_reward" in info:
            self.pays_group_reward |= self._may_pay_group  # also if its reset infos did not say
            own = _number(info["individual_reward"], f"{field} infos['individual_reward']")
            paid = _number(info["group_reward"], f"{field} infos['group_reward']")
            # the split must add up to what the env pays: a wrapper that changed the rewards
            # (scaled, negated, clipped) and not the infos would otherwise be silently undone
            got = _number(rew[name], f"{field} reward") if name in rew else None
            if got is not None and not _same_sum(rew[name], own, paid):
                raise ValueError(
                    f"{field} reward {got:g} is not infos['individual_reward'] + "
                    f"infos['group_reward'] ({own:g} + {paid:g}), the split poca learns from "
                    "(groupenvs' views report it): a wrapper that changes the rewards (scales, "
                    "negates, clips them) must change those two infos alike, or drop them "
                    "(then poca learns from the rewards, with no group reward)")
            reward[e, i] = own
            group = np.float32(paid)
            if group and group_reward[e] and group != group_reward[e]:
                raise ValueError(f"{field} infos['group_reward'] is {group}, another agent of "
                                 f"this group reported {float(group_reward[e])}: a group reward "
                                 "is one value per group and step")
            if group:
                group_reward[e] = group
            return True
        if name in rew:
            reward[e, i] = _number(rew[name], f"{field} reward")
            return True
        return False

    def _check_paid_slots(self, reward, absent) -> None:
        """Rewards reach slots only for agents the env listed in the step, each checked as it
        arrives; one that joins and leaves on the same step is paid with no flag to show it."""

    def _step(self, cont, disc):
        E, A = self.num_envs, self.max_agents
        reward = np.zeros((E, A), np.float32)
        group_reward = np.zeros(E, np.float32)
        terminated = np.zeros((E, A), bool)
        truncated = np.zeros((E, A), bool)
        for e, env in enumerate(self.copies):
            where = f"env copy {self.first_copy + e}, episode step {int(self.t[e]) + 1}"
            acting = {n: self.slots[e][n] for n in env.agents}
            actions = {n: self._to_env_action(None if cont is None else cont[e, i],
                                              None if disc is None else disc[e, i])
                       for n, i in acting.items()}
            with _naming(where):
                out = env.step(actions)
            if not (isinstance(out, tuple) and len(out) == 5):
                raise ValueError(f"{where}: step() must return ({', '.join(STEP_FIELDS)}) (the "
                                 f"PettingZoo ParallelEnv API since 1.22), got {_describe(out)}")
            obs, rew, term, trunc, infos = _dicts(out, STEP_FIELDS, where, "step()")
            self.alive[e] = False
            listed, flagged = list(env.agents), {}
            for name, i in acting.items():
                info = _info(infos, name, where)
                field = f"{where}: agent {name!r}:"
                for flags, key in ((term, "terminations"), (trunc, "truncations")):
                    if name not in flags:
                        raise ValueError(f"{field} missing from {key}")
                if not self._read_reward(e, i, name, rew, info, field, reward, group_reward):
                    raise ValueError(f"{field} acted but has no reward")
                truncated[e, i] = _flag(trunc[name], f"{field} truncations")
                terminated[e, i] = _flag(term[name], f"{field} terminations")
                ended = flagged[name] = bool(terminated[e, i] or truncated[e, i])
                if not ended and name not in listed:  # read as an end, it would be a guess:
                    # terminal (value 0) or a time limit (bootstrapped) are different returns
                    raise ValueError(f"{field} left agents with neither terminations nor "
                                     "truncations set: flag an agent on the step it leaves "
                                     "(truncations for a time limit, terminations otherwise), "
                                     "as PettingZoo's API asks")
                if name in obs:  # an agent that ended may send its final observation
                    self._write(e, name, obs[name], info, where)
                elif name in listed and not ended:
                    raise ValueError(f"{where}: agent {name!r} is still in agents but has no "
                                     "observation")
            for name in listed:
                if name not in flagged:  # joined on this step
                    flagged[name] = any(_flag(d.get(name, False), f"{where}: agent {name!r}: "
                                              f"{key}") for d, key in
                                        ((term, "terminations"), (trunc, "truncations")))
            going = [n for n in listed if not flagged[n]]
            stuck = [n for n in listed if flagged[n]]
            if going and stuck:  # agents flagged as ended must leave agents, unless all end
                raise ValueError(f"{where}: agent {stuck[0]!r} was reported terminated or "
                                 f"truncated but is still in agents while {going[0]!r} goes on")
            self._give_slots(e, listed, where)
            for name in going:  # still acting, or newly arrived
                i = self._slot_of(e, name, where)
                if name not in acting:
                    if name not in obs:
                        raise ValueError(f"{where}: agent {name!r} joined agents without an "
                                         "observation")
                    info = _info(infos, name, where)
                    self._write(e, name, obs[name], info, where)
                    # a reward on the step it joins counts (none is fine: it has not acted)
                    self._read_reward(e, i, name, rew, info, f"{where}: agent {name!r}:",
                                      reward, group_reward)
                self.alive[e, i] = True
            for name in stuck:  # joined on the step every listed agent ends: its reward counts
                if name not in acting:
                    self._read_reward(e, self._slot_of(e, name, where), name, rew,
                                      _info(infos, name, where), f"{where}: agent {name!r}:",
                                      reward, group_reward)
            for name in rew.keys() - acting.keys() - set(listed):  # left earlier, or never in
                if _number(rew[name], f"{where}: agent {name!r}: reward"):
                    raise ValueError(f"{where}: agent {name!r} is not in the episode (it did not "
                                     f"act and is not in agents) but has reward {rew[name]}: it "
                                     "would be lost; pay it to an agent that is in the episode")
            with np.errstate(over="ignore", invalid="ignore"):  # in float32, in the order
                team = group_reward[e] + reward[e].sum()  # of poca.rollout.team_reward
            if not np.isfinite(team):  # each reward is in range, their sum is not
                raise ValueError(f"{where}: the step's rewards add up beyond float32's range "
                                 f"(the team reward POCA learns from): {reward[e].tolist()} "
                                 f"and group reward {float(group_reward[e])}; scale them down")
        return reward, group_reward, terminated, truncated

    def _observe(self, rows=slice(None)):
        return tuple(store[rows].copy() for store in self.obs)

    def _action_mask(self):
        return None if self.mask is None else self.mask.copy()

    def frame(self, env: int, group_return: float, final: bool = False):
        """(size, draw) showing copy `env`'s own `render()` frame (its last one with `final`);
        the factory must take `render_mode` and be made with render_mode="rgb_array"."""
        image = self._final_frames.get(env) if final else None
        image = self._render_copy(env) if image is None else image

        def draw(pygame, surface):
            surface.blit(pygame.surfarray.make_surface(image.transpose(1, 0, 2)), (0, 0))

        return (image.shape[1], image.shape[0]), draw

    def _render_copy(self, e: int) -> np.ndarray:
        copy = self.copies[e]
        if getattr(copy, "render_mode", None) != "rgb_array":
            raise NotImplementedError(
                f"{type(copy).__name__} was made with render_mode="
                f"{getattr(copy, 'render_mode', None)!r}; rendering it needs its factory to take "
                "render_mode and be made with render_mode='rgb_array'")
        from pettingzoo import ParallelEnv

        if getattr(copy.render, "__func__", None) is ParallelEnv.render:
            raise NotImplementedError(f"{type(copy).__name__} has no render() of its own (it "
                                      "inherits PettingZoo's, which draws nothing): there is "
                                      "nothing to show or record")
        image = copy.render()
        if image is None:
            raise ValueError(f"{type(copy).__name__}.render() returned None; expected an "
                             "(H, W, 3) uint8 frame")
        image = np.asarray(image)
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(f"{type(copy).__name__}.render() returned {image.dtype} "
                             f"{image.shape}; expected an (H, W, 3) uint8 frame")
        return image

    def close(self) -> None:
        """Close every copy, also after one's close() raised: that is logged (with its
        traceback) rather than raised, since it comes once training is over (or after the
        error that stopped it, which matters more) and would only hide the result."""
        for i, env in enumerate(self.copies):
            try:
                env.close()
            except Exception as err:
                logging.getLogger(__name__).warning(
                    "env copy %d's close() raised: %s", self.first_copy + i,
                    "".join(traceback.format_exception(err)).rstrip())
        super().close()


@contextlib.contextmanager
def _naming(where: str):
    """An exception from the env's own code keeps its traceback, with a note naming the copy
    and episode step it came from (in a worker too, which holds several copies)."""
    try:
        yield
    except Exception as err:
        if hasattr(err, "add_note"):  # Python 3.11+
            err.add_note(f"(raised by {where})")
        raise


def _describe(value) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return type(value).__name__


def _dicts(out: tuple, fields: tuple[str, ...], where: str, call: str) -> tuple[dict, ...]:
    for field, value in zip(fields, out, strict=True):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: {call} returned {field} = {value!r:.80}, not a dict "
                             "keyed by agent")
    return out


def _info(infos: dict, name: str, where: str) -> dict:
    info = infos.get(name, {})
    if not isinstance(info, dict):
        raise ValueError(f"{where}: agent {name!r}: infos[{name!r}] must be a dict, got "
                         f"{info!r:.80}")
    return info


def env_name(env_id) -> str:
    """What a run records as its environment: an ID as given; a callable as `module:qualname`
    (the `module:factory` ID that makes the same env, where the factory is top-level), a
    `functools.partial` with its arguments. The same in every process (a repr holds a memory
    address), so a run trained through the Python API can be resumed from another process.

    A callable whose qualname cannot be imported (a lambda, or a function made inside another,
    as PettingZoo's `parallel_env`, which every PettingZoo env module holds as a closure made
    by `parallel_wrapper_fn`) is named by a module attribute that holds it, where one does:
    `mpe2.simple_spread_v3:parallel_env`, not the closure's qualname shared by every
    PettingZoo env. Where none does, a fingerprint of what it computes follows its qualname
    (`mytrain:<lambda>#3f2a9c01`), so that a resume tells two lambdas apart."""
    if isinstance(env_id, str):
        return env_id
    try:
        return _callable_name(env_id)
    except Exception:  # noqa: BLE001 - an odd callable (a __getattr__ that answers anything):
        # named by its type, as plainly as can be; a name must never stop a run
        return f"{getattr(type(env_id), '__module__', '?')}:{type(env_id).__name__}"


def _callable_name(env_id) -> str:
    if isinstance(env_id, partial):  # arguments as the fingerprint writes values: no memory
        # addresses, sets sorted, arrays by their bytes; callables by their own names
        arguments = [_argument(a) for a in env_id.args] + [
            f"{k}={_argument(v)}" for k, v in env_id.keywords.items()]
        return f"partial({', '.join([env_name(env_id.func), *arguments])})"
    named = env_id if hasattr(env_id, "__qualname__") else type(env_id)  # or an instance
    module = str(getattr(named, "__module__", None) or "?")
    qualname = str(named.__qualname__)
    if "<" in qualname and named is env_id:  # <lambda>, <locals>: not importable by that name
        held = _module_attribute(env_id)
        if held is not None:
            module, qualname = held
        elif hasattr(env_id, "__code__"):
            qualname += f"#{_fingerprint(env_id)}"
    if module == "__main__":  # a script's own factory: the module that importing it gives
        module = _main_name() or module
    return f"{module}:{qualname}"


def _main_name() -> str | None:
    """The module name the running script has when imported (`mytrain` for `python
    mytrain.py`), or None (python -c, a notebook)."""
    main = sys.modules.get("__main__")
    spec, path = getattr(main, "__spec__", None), getattr(main, "__file__", None)
    return spec.name if spec is not None else Path(path).stem if path else None


def _argument(value) -> str:
    return env_name(value) if callable(value) and not isinstance(value, type) else \
        _stable_text(value)


def _module_attribute(obj) -> tuple[str, str] | None:
    """(module, name) of a public attribute that is `obj` in an imported module: one of its
    own package first (a re-export elsewhere needs that other package imported to resolve),
    then the shortest name (`mpe2.simple_spread_v3` over the `simple_spread_v3.simple_spread`
    it imports from), or None. Not the script's own `__main__`: a loop variable there can
    hold one lambda after another. Scans `sys.modules` (10-80 ms with torch imported), only
    for callables whose qualname cannot be imported."""
    found, main = [], sys.modules.get("__main__")
    package = (getattr(obj, "__module__", None) or "").partition(".")[0]
    for module_name, module in list(sys.modules.items()):
        if module is None or module is main:  # main also as multiprocessing's `__mp_main__`
            continue
        try:  # the module's own dict: a lazy module's attribute access would load it
            attrs = object.__getattribute__(module, "__dict__")
            hits = [attr for attr, value in list(attrs.items())
                    if value is obj and not attr.startswith("_")]
        except Exception:  # noqa: BLE001 - an odd object in sys.modules holds no factory
            continue
        found += [(module_name.partition(".")[0] != package, len(module_name), module_name,
                   attr) for attr in hits]
    return min(found)[2:] if found else None


def resolved(name: str):
    """The object a recorded `module:attr` name holds, from the modules already imported (an
    attribute path, no call, no private part); None if it holds none. Compares a run's
    recorded env with another name for the same factory: PettingZoo's `from pettingzoo.sisl
    import pursuit_v5` leaves that module out of `sys.modules`, so the same `parallel_env` is
    recorded under `pettingzoo.sisl.pursuit.pursuit` by one import and
    `pettingzoo.sisl.pursuit_v5` by another."""
    module_name, _, path = name.partition(":")
    if not path or _private(name) or "<" in path or "(" in name:
        return None
    # the running script by its own name (a run the CLI started on `mytrain:factory`,
    # resumed by `python mytrain.py`), before any copy of it imported under that name
    value = sys.modules.get("__main__" if module_name == _main_name() else module_name)
    for part in path.split("."):
        try:
            value = getattr(value, part, None)
        except Exception:  # noqa: BLE001 - a property or module __getattr__ that raises
            return None
    return value


def _private(name: str) -> bool:
    """Whether a `module:attr` name has a part starting with `_` (`unittest.__main__`)."""
    return any(part.startswith("_") for part in re.split(r"[.:]", name) if part)


def recorded_as(env_id, name: str, saved: str) -> str:
    """The name a resumed run goes on recording: `saved` (the run's) where it names the very
    factory `env_id` is, under another import path or (a fingerprinted closure) as the
    attribute of a script the CLI imported, else `name` (`env_name(env_id)`).

    Imports only what the resume imports anyway (a `module:factory` ID's module) and, from a
    checkpoint's name, a public submodule of the package the factory comes from: a name in
    a checkpoint must not run other code (`unittest.__main__` would)."""
    if name == saved:
        return name
    try:
        return saved if _names_same_factory(env_id, name, saved) else name
    except Exception:  # noqa: BLE001 - odd objects compare as different: the resume says so
        return name


def _names_same_factory(env_id, name: str, saved: str) -> bool:
    target = env_id
    if isinstance(env_id, str):
        if ":" not in env_id or _private(env_id):
            return False
        with contextlib.suppress(Exception):  # make_env imports it next, and says what failed
            importlib.import_module(env_id.partition(":")[0])
        target = resolved(env_id)
    if target is None:
        return False
    package = name.partition(":")[0].partition(".")[0]  # where the factory is held (mpe2's
    module = saved.partition(":")[0]  # parallel_env says pettingzoo.utils.conversions)
    if package and module.partition(".")[0] == package and not _private(saved) \
            and "(" not in saved and module != _main_name():  # not the script again
        with contextlib.suppress(Exception):
            importlib.import_module(module)
    if resolved(saved) is target:
        return True
    if runfolder.FINGERPRINT.search(saved) and hasattr(target, "__code__"):
        return f"{target.__module__}:{target.__qualname__}#{_fingerprint(target)}" == saved
    return False


ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
PLAIN = (int, float, complex, str, bytes, bool, type(None), tuple, list, dict, set, frozenset,
         np.ndarray, np.generic)


def _fingerprint(function) -> str:
    """8 hex digits of what a function computes: its bytecode, constants (nested code alike),
    names, defaults, the values it closes over (functions among them alike) and the plain
    globals it reads (numbers, strings, containers, arrays), written by `_stable_text`."""
    return hashlib.sha256(_stable_text(function).encode()).hexdigest()[:8]


def _stable_text(value) -> str:
    """A text of `value` that is the same in every process: sets and dict items sorted (their
    order can follow string hashing, which differs per process), arrays and tensors by a
    hash of their bytes (a repr elides the middle), modules by name (a repr holds the install
    path), functions by their code, defaults, closure and plain globals, reprs without memory
    addresses; line numbers left out (an edit above a function moves them). Each object is
    written once, and a long text by its hash (a part shared at every level of a nest costs
    no more than once), cycles are cut, and a value whose repr or conversion raises is named
    by its class. Objects of one class without a repr of their own look alike."""
    memo: dict[int, str] = {}
    keep = []  # the objects met, alive until the end (an id is only unique while alive)

    def text(value) -> str:
        key = id(value)
        if key in memo:
            return memo[key]
        memo[key] = "<cycle>"
        keep.append(value)
        try:
            described = describe(value)
        except Exception:  # noqa: BLE001 - a repr or conversion that raises (a sparse
            # tensor's .numpy()): the class names it; a name must never stop a run
            described = f"<{type(value).__qualname__}>"
        if len(described) > 64:  # a long text by its hash: a part shared at every level of
            # a nest would otherwise double the text per level
            described = f"sha256:{hashlib.sha256(described.encode()).hexdigest()[:32]}"
        memo[key] = described
        return described

    def describe(value) -> str:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(value, torch.Tensor):
            value = value.detach().cpu().numpy()
            keep.append(value)
        if hasattr(value, "co_code"):  # nested code: a lambda inside the lambda
            return text((value.co_code, value.co_consts, value.co_names))
        if inspect.isfunction(value):
            cells = []
            for cell in value.__closure__ or ():
                try:
                    cells.append(cell.cell_contents)
                except ValueError:  # a cell not filled yet
                    cells.append("<empty>")
            plain = {n: value.__globals__[n] for n in value.__code__.co_names
                     if n in value.__globals__ and isinstance(value.__globals__[n], PLAIN)}
            return text((value.__code__, value.__defaults__, value.__kwdefaults__, cells,
                         plain))
        if inspect.ismodule(value):
            return f"module({value.__name__})"
        if isinstance(value, (set, frozenset)):
            return f"{type(value).__name__}({sorted(map(text, value))})"
        if isinstance(value, (tuple, list)):
            return f"{type(value).__name__}({', '.join(map(text, value))})"
        if isinstance(value, dict):
            return f"dict({sorted(f'{text(k)}: {text(v)}' for k, v in value.items())})"
        if isinstance(value, np.ndarray) and value.dtype.hasobject:  # its bytes are pointers
            return f"ndarray({value.shape}, {text(value.tolist())})"
        if isinstance(value, np.ndarray):
            return f"ndarray({value.dtype}, {value.shape}, " \
                   f"{hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()})"
        return ADDRESS.sub("", repr(value))

    return text(value)


def make_env(env_id, num_envs: int, env_kwargs: dict | None = None,
             max_agents: int | None = None, render_mode: str | None = None,
             workers: int = 0, max_episode_steps: int | None = None) -> GroupEnv:
    """A `GroupEnv` from an ID, a `module:attr` path, or a callable (GroupEnv or ParallelEnv).

    `render_mode` is passed to ParallelEnv factories (our own tasks draw through `frame`).
    `workers` > 0 steps a ParallelEnv's copies in that many processes (`poca.workers`).
    `max_episode_steps` truncates a ParallelEnv's episodes after that many steps (for envs with
    no time limit of their own: evaluating on them would never end); a GroupEnv has its own."""
    env_kwargs = dict(env_kwargs or {})
    workers = check_int("num_env_workers", workers, 0)
    parallel_options = (workers, None if max_episode_steps is None else check_int(
        "max_episode_steps", max_episode_steps, 1))
    if callable(env_id):
        return _from_factory(env_id, num_envs, env_kwargs, max_agents, env_name(env_id),
                             render_mode, *parallel_options)
    if not isinstance(env_id, str):
        raise TypeError(f"the environment must be a registered task ID, a 'module:factory' path "
                        f"or a callable that makes it, got a {type(env_id).__name__} object (an "
                        "env already made trains with poca.trainer.Trainer(env, config))")
    if ":" in env_id:
        module_name, _, attr = env_id.partition(":")
        try:  # imports the module: it runs its code (documented in the CLI's help and README)
            module = importlib.import_module(module_name)
        except Exception as err:
            frames = [f for f in traceback.extract_tb(err.__traceback__)[1:]  # past this one
                      if not f.filename.startswith("<") and "importlib" not in f.filename]
            at = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
            raise ValueError(f"cannot load environment {env_id!r}: importing {module_name!r} "
                             f"failed: {type(err).__name__}: {err}{at}") from None
        factory = getattr(module, attr, None)
        if not callable(factory):
            source = getattr(module, "__file__", None)  # another module of that name may win
            where = f"module {module_name!r}{f' ({source})' if source else ''}"
            what = (f"{where} has no attribute {attr!r}" if factory is None else
                    f"{attr!r} in {where} is not callable (its type: {type(factory).__name__})")
            raise ValueError(f"cannot load environment {env_id!r}: {what}; give "
                             "module:factory, a function or class that returns a PettingZoo "
                             "ParallelEnv or a GroupEnv")
        return _from_factory(factory, num_envs, env_kwargs, max_agents, env_id, render_mode,
                             *parallel_options)
    import envs

    _only_for_parallel_envs(env_id, max_agents, *parallel_options)
    try:
        return envs.make_group(env_id, num_envs=num_envs, **env_kwargs)
    except KeyError as err:
        raise ValueError(f"{err.args[0]}; or give a 'module:factory' path") from None


def _only_for_parallel_envs(name, max_agents, workers, max_episode_steps) -> None:
    if max_agents is not None:
        raise ValueError(f"max_agents (--max-agents) applies only to PettingZoo ParallelEnvs; "
                         f"{name} is a GroupEnv with its own agent slots")
    if workers:
        raise ValueError(f"num_env_workers (--env-workers) applies only to PettingZoo "
                         f"ParallelEnvs; {name} is a GroupEnv stepping all its envs in one batch "
                         "(its PettingZoo view, e.g. envs.pettingzoo:GroupParallelEnv, can use "
                         "workers)")
    if max_episode_steps is not None:
        raise ValueError(f"max_episode_steps (--max-episode-steps) applies only to PettingZoo "
                         f"ParallelEnvs; {name} is a GroupEnv, whose spec.max_steps already ends "
                         "every episode (groupenvs tasks: the env argument max_steps)")


def _from_factory(factory, num_envs, env_kwargs, max_agents, name, render_mode=None,
                  workers=0, max_episode_steps=None) -> GroupEnv:
    from pettingzoo import AECEnv, ParallelEnv

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # not inspectable (some builtins): trusted to take both
        params = None
    if params is not None and "num_envs" in params:
        _only_for_parallel_envs(name, max_agents, workers, max_episode_steps)
        env = factory(num_envs=num_envs, **env_kwargs)
        if not isinstance(env, GroupEnv):
            raise TypeError(f"{name} returned {type(env).__name__}, not an envs.core.GroupEnv")
        if env.num_envs != num_envs:  # the run's batch, rollout sizes and seeds assume it
            raise ValueError(f"{name}(num_envs={num_envs}) returned a {type(env).__name__} of "
                             f"{env.num_envs} envs: pass num_envs on to the task")
        _warn_unless_seeded(checked(env), name)
        return env
    if render_mode is not None:
        if params is not None and "render_mode" not in params and not any(
                p.kind == p.VAR_KEYWORD for p in params.values()):
            raise ValueError(f"{name} takes no render_mode; rendering makes the env with "
                             f"render_mode={render_mode!r} (PettingZoo's convention): give the "
                             "factory a render_mode parameter")
        env_kwargs = {**env_kwargs, "render_mode": render_mode}
    probe = factory(**env_kwargs)
    if isinstance(probe, GroupEnv):  # e.g. def make(**kwargs): it cannot be asked for a batch
        raise TypeError(f"{name} returned a GroupEnv ({type(probe).__name__}) but has no "
                        "parameter named num_envs: a GroupEnv factory takes the batch size by "
                        "that name (def make(num_envs, **kwargs)), so the trainer can ask for "
                        "its batch")
    if not isinstance(probe, ParallelEnv):
        metadata = getattr(probe, "metadata", None)
        hint = "" if not isinstance(probe, AECEnv) else (
            ": it is an AEC env, convert it with pettingzoo.utils.conversions.aec_to_parallel "
            "(or use its package's parallel_env())"
            if isinstance(metadata, dict) and metadata.get("is_parallelizable") else
            ": it is an AEC env not marked is_parallelizable (turn-based), convert it with "
            "pettingzoo.utils.conversions.turn_based_aec_to_parallel (which plays the action of "
            "the agent whose turn it is: give the others an all-zero action_mask); a game "
            "between opponents (tictactoe, say) sums to a team reward of 0, nothing to learn")
        raise TypeError(f"{name} returned {type(probe).__name__}; expected a PettingZoo "
                        f"ParallelEnv or a GroupEnv (a callable taking num_envs){hint}")
    seen_through_adapter = ParallelEnvGroup(lambda: probe, 1, max_agents)
    _warn_unless_seeded(seen_through_adapter, name)
    seen_through_adapter.close()  # closes the probe
    if workers:
        from poca.workers import WorkerEnvGroup

        return WorkerEnvGroup(partial(factory, **env_kwargs), num_envs, workers, max_agents,
                              max_episode_steps)
    return ParallelEnvGroup(lambda: factory(**env_kwargs), num_envs, max_agents,
                            max_episode_steps)


def _warn_unless_seeded(env: GroupEnv, name: str) -> None:
    """Warn when two resets with one seed start different episodes: runs with such an env
    cannot be reproduced from their seed (the README's promise), and nothing else would say.
    `env` checks its resets (the adapter, or `checked`), so a reset that breaks the API fails
    with its usual clear error first."""
    first, again = (env.reset(seed=12345) for _ in range(2))
    if not all(a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
               for a, b in zip((*first.obs, first.alive), (*again.obs, again.alive),
                               strict=True)):
        how = ("seed the env's random generators in reset() (e.g. self.np_random from "
               "gymnasium.utils.seeding.np_random(seed))" if isinstance(env, ParallelEnvGroup)
               else "draw a GroupEnv's randomness from its seeded streams (self.random_bits, "
               "self.uniform)")
        warnings.warn(f"{name}: reset(seed=12345) twice gave different observations, so its "
                      f"episodes do not follow the seed and a run cannot be repeated; {how}",
                      RuntimeWarning, stacklevel=3)


def checked(env: GroupEnv) -> GroupEnv:
    """`env` (from someone else's code) with every reset and step checked where its values enter,
    each failure a ValueError naming the env, the agent, the field and the step: a reward, group
    reward, alive agent's observation or ending agent's last view that is NaN/inf or beyond
    float32's range (what the trainer computes in); a reward paid to an agent that was not in the
    episode (it would be lost); an agent reported terminated or truncated that stays alive while its
    group goes on; and a group left with no agent alive that is not done (a trainer waiting for its
    agents to act would wait forever)."""
    reset, step = env.reset, env.step
    E, A = env.num_envs, env.max_agents
    steps = np.zeros(E, np.int64)
    acting = np.zeros((E, A), bool)  # who was alive for the step being checked
    name = type(env).__name__

    def fail(call, e, a, what):
        who = "" if a is None else f", agent {a}"
        raise ValueError(f"{name}.{call}: env {e}{who}: {what} (episode step {steps[e]})")

    def check(out, call: str):
        ended = (np.asarray(out.terminated, bool) | np.asarray(out.truncated, bool))
        fields = [("group_reward", np.asarray(out.group_reward).reshape(E, 1), None),
                  ("reward", np.asarray(out.reward), None)]
        fields += [(f"observation {o.name!r}", np.asarray(x).reshape(E, A, -1), out.alive)
                   for o, x in zip(env.spec.obs, out.obs, strict=True)]
        # an agent's last view, on the step it ends: a truncated one is bootstrapped from it
        fields += [(f"last observation {o.name!r} (final_obs, the step it ended)",
                    np.asarray(x).reshape(E, A, -1), ended & acting)
                   for o, x in zip(env.spec.obs, out.final_obs, strict=True)]
        for field, x, alive in fields:
            if x.dtype.kind != "f":
                continue
            bad = ~(np.abs(x) <= FLOAT32_MAX)  # NaN, inf, or inf once made float32: [E, A]
            bad = bad if alive is None else bad.any(-1) & alive  # obs [E, A, ...]: alive rows
            if bad.any():
                e, a = np.argwhere(bad)[0]
                fail(call, e, None if field == "group_reward" else a,
                     f"{field} is NaN/inf or beyond float32's range")
        alive, done = np.asarray(out.alive, bool), np.asarray(out.group_done, bool)
        # in the step: alive after it, or (a group that ended, now reset) ended by it
        in_step = np.where(done[:, None], ended, alive)
        paid = (np.asarray(out.reward) != 0) & ~acting & ~in_step
        if paid.any():  # neither before the step, nor joining in it
            e, a = np.argwhere(paid)[0]
            fail(call, e, a, f"reward {out.reward[e, a]} paid to an agent that was not in the "
                             "episode (it would be lost); pay it while the agent is alive")
        stays = ended & alive & ~done[:, None]
        if stays.any():
            e, a = np.argwhere(stays)[0]
            fail(call, e, a, "reported terminated or truncated, yet still alive while its group "
                             "goes on; an agent that ends must leave self.alive")
        empty = ~alive.any(-1)
        if empty.any():
            e = int(np.flatnonzero(empty)[0])
            when = ("after its reset" if call == "reset()" or done[e]
                    else "yet the group is not done")
            fail(call, e, None, f"no agent is alive, {when}: every episode needs an agent alive "
                                "until it ends (set self.alive in _reset_envs; an agent that "
                                "leaves must be reported terminated or truncated)")
        acting[:] = alive
        return out

    def checked_reset(seed=None):
        steps[:] = 0
        acting[:] = False
        return check(reset(seed=seed), "reset()")

    def checked_step(actions):
        steps[:] += 1
        out = check(step(actions), "step()")
        steps[out.group_done] = 0
        return out

    env.reset, env.step = checked_reset, checked_step
    return env
