"""Environments for the trainer: everything becomes an `envs.core.GroupEnv`.

An environment is one of ours (`groupenvs/Goal-v0` or `Goal-v0`), a `module:attr` path to a
callable that takes `num_envs` and returns a `GroupEnv`, or any PettingZoo `ParallelEnv`
factory: `ParallelEnvGroup` steps N copies of it as one batch of groups.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

import numpy as np
from gymnasium import spaces

from envs.core import GroupEnv, GroupSpec, ObsSpec, check_int

SUPPORTED = ("Box (any shape; HWC uint8 is an image, other shapes are flattened to a vector), "
             "Discrete (one-hot), or a Dict of those for observations (an 'action_mask' entry "
             "is the action mask); Box, Discrete or MultiDiscrete for actions")
NEVER = 2**31 - 1


def _components(space: spaces.Space, where: str) -> list[tuple[str, spaces.Space]]:
    if isinstance(space, spaces.Dict):
        return [(k, s) for k, s in space.spaces.items() if k != "action_mask"]
    if isinstance(space, (spaces.Box, spaces.Discrete)):
        return [("obs", space)]
    raise TypeError(f"{where}: unsupported observation space {space}; supported: {SUPPORTED}")


def _obs_spec(name: str, space: spaces.Space, where: str) -> ObsSpec:
    if isinstance(space, spaces.Discrete):
        return ObsSpec(name, "vector", (int(space.n),), 0.0, 1.0)
    if not isinstance(space, spaces.Box):
        raise TypeError(f"{where}: unsupported observation space {space} under {name!r}; "
                        f"supported: {SUPPORTED}")
    if space.dtype == np.uint8 and len(space.shape) == 3 and space.shape[2] in (1, 3, 4):
        return ObsSpec(name, "image", tuple(space.shape), 0.0, 255.0)
    low, high = np.min(space.low), np.max(space.high)
    return ObsSpec(name, "vector", (int(np.prod(space.shape)),), float(max(low, -1e9)),
                   float(min(high, 1e9)))


def _encode(space: spaces.Space, value) -> np.ndarray:
    if isinstance(space, spaces.Discrete):
        return np.eye(int(space.n), dtype=np.float32)[int(value) - int(space.start)]
    value = np.asarray(value)
    return value if value.dtype == np.uint8 and value.ndim == 3 else value.reshape(-1)


class ParallelEnvGroup(GroupEnv):
    """`num_envs` copies of a PettingZoo ParallelEnv as one `GroupEnv`.

    Agent slots follow `possible_agents`, or, with `max_agents`, are handed out in order of
    appearance to agents whose names show up during an episode (a slot is not reused within an
    episode). `alive` follows `agents`; each agent's reward is its individual reward (the trainer
    adds them up as the team reward); a copy's episode ends when `agents` is empty or every
    remaining agent is truncated, and it is reset with its own seed. All agents must share
    observation and action spaces (POCA trains one shared policy). Continuous actions in [-1, 1]
    are scaled to the Box's bounds. An env whose `infos[agent]` carry `group_reward` and
    `individual_reward` (as groupenvs' views do) has its reward split into those parts.
    """

    def __init__(self, env_fn: Callable, num_envs: int = 1, max_agents: int | None = None,
                 max_steps: int | None = None):
        self.copies = [env_fn() for _ in range(check_int("num_envs", num_envs, 1))]
        first = self.copies[0]
        self.fixed_slots = max_agents is None
        names = list(first.possible_agents)
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
        E = self.num_envs
        self.obs = [np.zeros((E, A, *o.shape), dtype=o.dtype) for o in obs_specs]
        self.mask = np.ones((E, A, sum(branches)), dtype=bool) if branches else None
        self.slots: list[dict[str, int]] = [{} for _ in range(E)]
        self._has_mask = (isinstance(self.obs_space, spaces.Dict)
                          and "action_mask" in self.obs_space.spaces)
        self.pays_group_reward = False  # until its infos show a group_reward (see _reset_envs)
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
                    "same observation and action spaces")

    def _action_sizes(self, where: str) -> tuple[int, tuple[int, ...]]:
        space = self.act_space
        if isinstance(space, spaces.Box):
            if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
                raise ValueError(f"{where}: continuous actions need finite Box bounds")
            return int(np.prod(space.shape)), ()
        if isinstance(space, spaces.Discrete):
            return 0, (int(space.n),)
        if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
            return 0, tuple(int(n) for n in space.nvec)
        raise TypeError(f"{where}: unsupported action space {space}; supported: {SUPPORTED}")

    def _to_env_action(self, cont, disc):
        space = self.act_space
        if isinstance(space, spaces.Box):
            scaled = space.low.reshape(-1) + (cont + 1) / 2 * (space.high - space.low).reshape(-1)
            return scaled.reshape(space.shape).astype(space.dtype)
        if isinstance(space, spaces.Discrete):
            return int(disc[0]) + int(space.start)
        return disc.astype(space.dtype)

    # -- per-agent bookkeeping --
    def _slot_of(self, e: int, name: str) -> int:
        slots = self.slots[e]
        if name not in slots:
            if self.fixed_slots:
                raise ValueError(f"agent {name!r} is not in possible_agents; pass max_agents "
                                 "for environments that add agents under new names")
            if len(slots) >= self.max_agents:
                raise ValueError(f"more than max_agents={self.max_agents} agents appeared in "
                                 f"one episode (new: {name!r})")
            space_ok = (self.copies[e].observation_space(name) == self.obs_space
                        and self.copies[e].action_space(name) == self.act_space)
            if not space_ok:
                self._check_spaces(self.copies[e], [name])
            slots[name] = len(slots)
        return slots[name]

    def _write(self, e: int, name: str, obs, info) -> None:
        i = self._slot_of(e, name)
        values = obs if isinstance(self.obs_space, spaces.Dict) else {"obs": obs}
        for store, (key, space) in zip(self.obs, self.components, strict=True):
            store[e, i] = _encode(space, values[key])
        if self.mask is not None:
            mask = values.get("action_mask") if self._has_mask else None
            if mask is None and isinstance(info, dict):
                mask = info.get("action_mask")
            self.mask[e, i] = True if mask is None else np.asarray(mask, dtype=bool).reshape(-1)

    # -- GroupEnv hooks --
    def _reset_envs(self, idx):
        seeds = self.random_bits(idx) >> np.uint64(1)  # each copy, each episode: its own seed
        for e, seed in zip(idx.tolist(), seeds.tolist(), strict=True):
            if self.record_final and self._started[e]:
                self._final_frames[e] = self._render_copy(e)
            obs, infos = self.copies[e].reset(seed=int(seed))
            self._started[e] = True
            self.slots[e] = {} if not self.fixed_slots else {
                n: i for i, n in enumerate(self.copies[e].possible_agents)}
            for store in self.obs:
                store[e] = 0
            self.alive[e] = False
            for name in self.copies[e].agents:
                info = infos.get(name, {})
                self.pays_group_reward |= "group_reward" in info and "individual_reward" in info
                self._write(e, name, obs[name], info)
                self.alive[e, self._slot_of(e, name)] = True

    def _step(self, cont, disc):
        E, A = self.num_envs, self.max_agents
        reward = np.zeros((E, A), np.float32)
        group_reward = np.zeros(E, np.float32)
        terminated = np.zeros((E, A), bool)
        truncated = np.zeros((E, A), bool)
        for e, env in enumerate(self.copies):
            acting = {n: self.slots[e][n] for n in env.agents}
            actions = {n: self._to_env_action(None if cont is None else cont[e, i],
                                              None if disc is None else disc[e, i])
                       for n, i in acting.items()}
            obs, rew, term, trunc, infos = env.step(actions)
            self.alive[e] = False
            for name, i in acting.items():
                info = infos.get(name, {})
                if "group_reward" in info and "individual_reward" in info:  # e.g. groupenvs
                    reward[e, i] = info["individual_reward"]
                    group_reward[e] = info["group_reward"]
                else:
                    reward[e, i] = rew.get(name, 0.0)
                truncated[e, i] = trunc.get(name, False)
                terminated[e, i] = term.get(name, False) or not truncated[e, i] and (
                    name not in env.agents)  # gone without a flag: ended
                if name in obs:
                    self._write(e, name, obs[name], infos.get(name, {}))
            for name in env.agents:  # still acting, or newly arrived
                if not (term.get(name) or trunc.get(name)):
                    i = self._slot_of(e, name)
                    if name not in acting:
                        self._write(e, name, obs[name], infos.get(name, {}))
                    self.alive[e, i] = True
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
        image = np.asarray(copy.render())
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(f"{type(copy).__name__}.render() returned {image.dtype} "
                             f"{image.shape}; expected an (H, W, 3) uint8 frame")
        return image

    def close(self) -> None:
        for env in self.copies:
            env.close()
        super().close()


def make_env(env_id, num_envs: int, env_kwargs: dict | None = None,
             max_agents: int | None = None, render_mode: str | None = None) -> GroupEnv:
    """A `GroupEnv` from an ID, a `module:attr` path, or a callable (GroupEnv or ParallelEnv).

    `render_mode` is passed to ParallelEnv factories (our own tasks draw through `frame`)."""
    env_kwargs = dict(env_kwargs or {})
    if callable(env_id):
        return _from_factory(env_id, num_envs, env_kwargs, max_agents, repr(env_id), render_mode)
    if ":" in env_id:
        module_name, _, attr = env_id.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"cannot load environment {env_id!r}: {err}") from err
        return _from_factory(factory, num_envs, env_kwargs, max_agents, env_id, render_mode)
    import envs

    try:
        return envs.make_group(env_id, num_envs=num_envs, **env_kwargs)
    except KeyError as err:
        raise ValueError(f"{err.args[0]}; or give a 'module:factory' path") from None


def _from_factory(factory, num_envs, env_kwargs, max_agents, name, render_mode=None) -> GroupEnv:
    from pettingzoo import ParallelEnv

    try:
        takes_num_envs = "num_envs" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes_num_envs = False
    if takes_num_envs:
        env = factory(num_envs=num_envs, **env_kwargs)
        if isinstance(env, GroupEnv):
            return env
        raise TypeError(f"{name} returned {type(env).__name__}, not an envs.core.GroupEnv")
    if render_mode is not None:
        env_kwargs = {**env_kwargs, "render_mode": render_mode}
    probe = factory(**env_kwargs)
    if not isinstance(probe, ParallelEnv):
        raise TypeError(f"{name} returned {type(probe).__name__}; expected a PettingZoo "
                        "ParallelEnv or a GroupEnv (a callable taking num_envs)")
    probe.close()
    return ParallelEnvGroup(lambda: factory(**env_kwargs), num_envs, max_agents)
