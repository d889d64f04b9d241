"""The batched contract between environments and learners.

Everything is a batch of groups: a `GroupEnv` steps `E` independent episodes at once, each with up
to `A` agent slots, and `alive[E, A]` says which slots act. Agents that end early simply stop being
alive; the group's episode goes on until every agent has ended or the time limit hits, and then the
env resets that group in the same step (`final_obs` keeps what the ended episode looked like).
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

OBS_KINDS = ("vector", "image", "entities")


@dataclass(frozen=True)
class ObsSpec:
    """One observation component: `vector (d,)`, `image (H, W, C)` uint8, `entities (n_max, d)`.

    `low`/`high` are the bounds the views' spaces declare; left out, 0 and 255 for an image,
    -1 and 1 otherwise. A learner divides an image's pixels by its `high` (255 for a photo, 1
    for a 0/1 grid)."""

    name: str
    kind: str
    shape: tuple[int, ...]
    low: float | None = None
    high: float | None = None

    def __post_init__(self):
        if not isinstance(self.shape, (tuple, list)):
            raise ValueError(f"observation {self.name!r}: shape must be a tuple of sizes, e.g. "
                             f"({self.shape!r},), got {self.shape!r}")
        if self.kind not in OBS_KINDS:
            raise ValueError(f"observation {self.name!r}: kind must be one of {OBS_KINDS}, got "
                             f"{self.kind!r}")
        rank = {"vector": 1, "image": 3, "entities": 2}[self.kind]
        if len(self.shape) != rank:
            raise ValueError(f"observation {self.name!r}: kind {self.kind!r} has {rank} dims, "
                             f"got shape {self.shape}")
        # kept as plain Python numbers (numpy's are accepted): a checkpoint holds the spec
        object.__setattr__(self, "shape", tuple(
            check_int(f"observation {self.name!r}: each size of its shape {self.shape}", size, 1)
            for size in self.shape))
        image = self.kind == "image"
        for field, default in (("low", 0.0 if image else -1.0), ("high", 255.0 if image else 1.0)):
            value = default if getattr(self, field) is None else getattr(self, field)
            if isinstance(value, (bool, np.bool_)) or not isinstance(
                    value, (int, float, np.integer, np.floating)) or math.isnan(value):
                raise ValueError(f"observation {self.name!r}: {field} must be a number (or None "
                                 f"for the default), got {value!r}")
            object.__setattr__(self, field, float(value))
        if image and not (0 <= self.low < self.high <= 255 and self.low.is_integer()
                          and self.high.is_integer()):
            raise ValueError(f"observation {self.name!r}: an image's bounds must be whole "
                             f"numbers within the uint8 range 0..255 with low below high, got "
                             f"{self.low}..{self.high}")
        if not self.low <= self.high:
            raise ValueError(f"observation {self.name!r}: low {self.low} is above high "
                             f"{self.high}")

    @property
    def blank(self) -> float:
        """What the views show for an agent slot that is not alive: 0, or the bound nearest to
        it when 0 is outside [low, high], so that every observation stays inside its space."""
        return min(max(0.0, self.low), self.high)

    @property
    def dtype(self) -> type:
        return np.uint8 if self.kind == "image" else np.float32


@dataclass(frozen=True)
class GroupSpec:
    """Everything a learner needs to know about a task, and nothing about its internals."""

    num_agents: int
    obs: tuple[ObsSpec, ...]
    continuous_size: int
    discrete_branches: tuple[int, ...]
    max_steps: int

    def __post_init__(self):  # sizes kept as plain ints (numpy's accepted): checkpoints hold it
        object.__setattr__(self, "num_agents", check_int("GroupSpec.num_agents",
                                                         self.num_agents, 1))
        if not self.obs or not all(isinstance(o, ObsSpec) for o in self.obs):
            raise ValueError(f"GroupSpec.obs must be a non-empty tuple of ObsSpec, got "
                             f"{self.obs!r:.100}")
        names = [o.name for o in self.obs]
        twice = next((name for name in names if names.count(name) > 1), None)
        if twice is not None:
            raise ValueError(f"GroupSpec.obs: the name {twice!r} is given twice; each component "
                             "needs a name of its own")
        object.__setattr__(self, "obs", tuple(self.obs))
        object.__setattr__(self, "continuous_size", check_int("GroupSpec.continuous_size",
                                                              self.continuous_size, 0))
        object.__setattr__(self, "discrete_branches", tuple(
            check_int("GroupSpec.discrete_branches: each branch size", size, 1)
            for size in self.discrete_branches))
        if not self.continuous_size and not self.discrete_branches:
            raise ValueError("GroupSpec: a task needs at least one action (continuous_size > 0 "
                             "or a discrete branch)")
        object.__setattr__(self, "max_steps", check_int("GroupSpec.max_steps", self.max_steps, 1))

    @property
    def action_sizes(self) -> tuple[int, tuple[int, ...]]:
        return self.continuous_size, self.discrete_branches


@dataclass
class GroupStep:
    """What one `reset`/`step` returns; every array is batched over envs `E` (and agents `A`).

    `final_obs` is the observation the step produced *before* auto-reset, for every env: it equals
    `obs` except in rows where `group_done` is set, which hold the ended episode's last view.
    """

    obs: tuple[np.ndarray, ...]  # each [E, A, *shape]
    alive: np.ndarray  # bool [E, A]: slots that act on the next step
    reward: np.ndarray  # float32 [E, A]: individual reward of the step just taken
    group_reward: np.ndarray  # float32 [E]
    terminated: np.ndarray  # bool [E, A]: the agent's episode ended on this step (terminal)
    # bool [E, A]: the agent's episode ended on this step by a time limit; never set together
    # with terminated (an agent reported both is terminal, as Gymnasium reads the pair)
    truncated: np.ndarray
    group_done: np.ndarray  # bool [E]: the group's episode ended and was reset
    final_obs: tuple[np.ndarray, ...]
    action_mask: np.ndarray | None = None  # bool [E, A, sum(branches)]: legal discrete actions

    @property
    def group_truncated(self) -> np.ndarray:
        """bool [E]: the group ended by its time limit (its agents were truncated, not done)."""
        return self.group_done & self.truncated.any(axis=1)


# --- counter-based randomness -------------------------------------------------------------------
# Each draw is a hash of (seed, env index, episode index, step, draw index). That makes env i's
# episodes independent of how many envs run beside it, and costs one vectorized hash per batch
# instead of one Python-level generator per env.

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def env_keys(seed: int, num_envs: int) -> np.ndarray:
    """uint64 [E]: one random stream key per (seed, env index) pair.

    The seed is hashed before the index is mixed in, so two seeds share streams only by
    construction, never by pattern (a plain `seed ^ index` makes seeds 0..E-1 permutations of
    the same E streams), while env i's key does not depend on E. Below 2**64 (splitmix64 is a
    bijection) env i of two seeds never shares its key, but a seed built so that its hash is
    another's XOR d plays that seed's streams with indices XOR d; larger seeds (Gymnasium's own
    draws are 128-bit) are folded into 64 bits, where any 64-bit hash collides.

    >>> bool((env_keys(7, 3) == env_keys(7, 5)[:3]).all())  # env i's key, whatever E is
    True
    >>> len(set(env_keys(0, 4)) | set(env_keys(1, 4)))  # seeds 0 and 1 share no stream
    8
    """
    seed = int(seed)
    seed_hash = _splitmix64(np.array([seed & _LOW64], dtype=np.uint64))
    rest = seed >> 64  # Gymnasium takes any non-negative int (its own np_random_seed is 128-bit):
    while rest:  # each further 64 bits mixed in; seeds below 2**64 hash as they are
        seed_hash = _splitmix64(seed_hash ^ np.uint64(rest & _LOW64))
        rest >>= 64
    return _splitmix64(seed_hash ^ np.arange(num_envs, dtype=np.uint64))


_LOW64 = 2**64 - 1


def hash_bits(keys: np.ndarray, episode: np.ndarray, step: np.ndarray | int) -> np.ndarray:
    """uint64 [len(keys)] of random bits, a pure function of (env key, episode, step)."""
    when = np.asarray(episode, dtype=np.uint64) << np.uint64(32)
    if not isinstance(step, int) or step:
        when = when + np.asarray(step, dtype=np.uint64)
    return _splitmix64(keys ^ when)


def agent_sum(x: np.ndarray) -> np.ndarray:
    """[E, A] -> [E] sum over agents; a matmul is ~8x faster than numpy's short-axis reduction."""
    return x @ np.ones(x.shape[1], x.dtype)


def agent_any(mask: np.ndarray) -> np.ndarray:
    """bool [E, A] -> bool [E]: any agent set."""
    A = mask.shape[1]
    if A in (1, 2, 4, 8):  # read each row's A bools as one unsigned int: no reduction at all
        return np.ascontiguousarray(mask).view(f"u{A}")[:, 0] != 0
    return agent_sum(mask.astype(np.float32)) > 0


# --- argument checking shared by every task ---------------------------------------------------


def check_kwargs(cls: type, kwargs: dict, view_args: tuple[str, ...] = (),
                 one_group: bool = False, hint: str = "") -> None:
    """Fail on constructor arguments `cls` does not take, listing the ones the caller can give:
    a view's own (`view_args`, already taken out of `kwargs`) and the task's (without
    `num_envs` for a view of `one_group`)."""
    task_args, open_ended = [], True
    for owner in cls.__mro__:  # a subclass's **kwargs go on to its base's __init__, and so on
        if "__init__" not in vars(owner) or owner in (GroupEnv, object):
            continue
        params = inspect.signature(owner.__init__).parameters.values()
        task_args += [p.name for p in params if p.name != "self" and p.name not in task_args
                      and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                      and not (one_group and p.name == "num_envs")]
        open_ended = any(p.kind == p.VAR_KEYWORD for p in params)
        if not open_ended:
            break
    unknown = sorted(set(kwargs) - set(task_args))
    if unknown and not open_ended:  # with **kwargs to the end, the task checks them itself
        # Python's own wording first: clients such as TorchRL's GymEnv retry without an
        # argument they pass to every env (frameskip) when the error says so
        raise TypeError(f"{cls.__name__} got an unexpected keyword argument {unknown[0]!r}: "
                        f"unknown argument(s) {unknown}; valid: {[*view_args, *task_args]}{hint}")


def check_int(name: str, value, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return int(value)


def check_number(name: str, value, low: float, high: float = math.inf,
                 low_open: bool = False) -> float:
    """A finite real number (Python or numpy; not a bool) in [low, high], or (low, high] with
    `low_open`; anything else is a ValueError naming the argument."""
    real = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))
    if not (real and math.isfinite(value) and (low < value if low_open else low <= value)
            and value <= high):
        bound = f"in {'(' if low_open else '['}{low}, {high}]" if high < math.inf else \
            f"{'>' if low_open else '>='} {low}"
        raise ValueError(f"{name} must be a number {bound}, got {value!r}")
    return float(value)


def check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")
    return bool(value)


def check_choice(name: str, value, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")


class GroupEnv(ABC):
    """Base of every batched task: episode bookkeeping, time limits, auto-reset, input checks.

    A task builds its `GroupSpec`, calls `super().__init__(spec, num_envs)`, keeps its own numpy
    state batched over envs `E` (and agents `A`), and implements the three abstract hooks below;
    the base class does the rest (seeding, the step counter `self.t`, truncation at
    `spec.max_steps`, same-step auto-reset, `final_obs`, action checks). Randomness must come
    from `self.random_bits` / `self.uniform`, so that env `i`'s episodes depend only on the seed.
    """

    spec: GroupSpec
    # Whether the task pays a group reward: then the group return is its headline score; else
    # (e.g. a PettingZoo env through poca.adapters) the team return, the sum of all rewards, is.
    # A task that pays only rewards to agents sets it False (its group return would stay 0).
    pays_group_reward: bool = True
    # The agent slots' names in error messages ("agent_0"), set by a view that names its agents;
    # None: "agent 0".
    slot_names: list[str] | None = None

    def __init__(self, spec: GroupSpec, num_envs: int):
        self.spec = spec
        self.num_envs = check_int("num_envs", num_envs, 1)
        self.max_agents = spec.num_agents
        E, A = self.num_envs, self.max_agents
        self.alive = np.zeros((E, A), dtype=bool)
        # What the hooks must return. Checked on reset, on the first step after it and on the
        # auto-resets until one of some envs only, so that a task's shape mistake is named there
        # rather than deep inside a learner; later steps are not checked again (a per-call cost
        # of the PettingZoo view).
        self._step_shapes = ((E, A), (E,), (E, A), (E, A))
        self._check_next, self._rows_checked = False, False
        # Time is one step counter for the batch and each env's start: checking the time limit
        # costs nothing until the earliest deadline comes.
        self._clock = 0
        self._start = np.zeros(E, dtype=np.int64)
        self._deadline = spec.max_steps
        self.episode = np.zeros(E, dtype=np.int64)  # episodes started per env (random-stream key)
        self.env_ids = np.arange(E)
        self._seed: int | tuple[int, ...] | None = None  # a tuple: one per env
        self._keys_seed: int | tuple[int, ...] | None = None  # what `self._keys` come from
        self._closed = False
        self.record_final = False  # set by rendering views: keep ended episodes' last state
        self._action_keys = {k for k, n in (("continuous", spec.continuous_size),
                                            ("discrete", len(spec.discrete_branches))) if n}
        self._min_branch = min(spec.discrete_branches, default=0)
        # the action_mask handed out with the last observation: what the next actions must obey
        self._legal: np.ndarray | None = None
        self._branch_starts = np.cumsum((0, *spec.discrete_branches[:-1]), dtype=np.int64)

    # -- randomness --
    def random_bits(self, idx: np.ndarray, step: np.ndarray | int = 0) -> np.ndarray:
        """uint64 [len(idx)]: 64 random bits for envs `idx` in their current episode (and step)."""
        return hash_bits(self._keys[idx], self.episode[idx], step)

    def uniform(self, idx: np.ndarray, n: int, step: np.ndarray | int = 0) -> np.ndarray:
        """[len(idx), n] uniforms in [0, 1) for envs `idx` in their current episode (and step)."""
        h = _splitmix64(self.random_bits(idx, step)[:, None] ^ np.arange(n, dtype=np.uint64))
        return (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))

    # -- public API --
    @property
    def seeded(self) -> bool:
        """Whether `reset` has picked the episodes' seed yet (given, or drawn from entropy)."""
        return self._seed is not None

    def reset(self, seed: int | list[int] | None = None) -> GroupStep:
        """Start a new episode in every env. The same seed gives the same episodes. A list of
        one seed per env gives env i the episodes that a lone env reset with seed i plays (as
        Gymnasium's vectorizers seed their envs one by one)."""
        self._check_open()
        if seed is not None:
            if isinstance(seed, (list, tuple)) or np.ndim(seed) > 0:
                if len(seed) != self.num_envs:
                    raise ValueError(f"seed: a list needs one seed per env ({self.num_envs}), "
                                     f"got {len(seed)}")
                self._seed = tuple(check_int(f"seed[{i}]", s, 0) for i, s in enumerate(seed))
            else:
                self._seed = check_int("seed", seed, 0)  # any size, as Gymnasium's
            self.episode[:] = 0
        elif self._seed is None:
            self._seed = int(np.random.SeedSequence().entropy % 2**63)
        else:
            self.episode += 1
        if self._keys_seed != self._seed:  # the same seed hashes to the same keys: do it once
            self._keys = (np.concatenate([env_keys(s, 1) for s in self._seed])
                          if isinstance(self._seed, tuple) else env_keys(self._seed, self.num_envs))
            self._keys_seed = self._seed
        self._start_episodes(self.env_ids)
        self._check_someone_acts(self.env_ids)
        E, A = self.num_envs, self.max_agents
        obs = self._observed()
        self._check_next = True  # and the first step after a reset
        no = np.zeros((E, A), dtype=bool)
        return GroupStep(obs=obs, alive=self.alive.copy(), reward=np.zeros((E, A), np.float32),
                         group_reward=np.zeros(E, np.float32), terminated=no, truncated=no.copy(),
                         group_done=np.zeros(E, dtype=bool), final_obs=obs,
                         action_mask=self._next_mask())

    def step(self, actions: dict) -> GroupStep:
        """Advance every env by one step; groups that end are reset in the same call."""
        self._check_open()
        if self._seed is None:
            raise RuntimeError("step() called before reset(): call reset() first")
        E = self.num_envs
        cont, disc = self._check_actions(actions)
        absent = None if np.count_nonzero(self.alive) == self.alive.size else ~self.alive
        out = self._step(cont, disc)
        checking, self._check_next = self._check_next, False
        reward, group_reward, terminated, truncated = self._checked(out) if checking else out
        if absent is not None and np.count_nonzero(reward) and np.count_nonzero(reward[absent]):
            self._check_paid_slots(reward, absent)
        if reward.dtype != np.float32 or group_reward.dtype != np.float32:  # as GroupStep says
            with np.errstate(over="ignore"):  # a value past float32's range: refused just below
                reward, group_reward = reward.astype(np.float32), group_reward.astype(np.float32)
        if reward.size <= 64:  # one group (a PettingZoo view's step): a Python sum, 6x faster
            # than numpy's isfinite here; NaN and inf carry through it, and float64 cannot
            # overflow on float32 values
            finite = math.isfinite(sum(reward.ravel().tolist()) + sum(group_reward.tolist()))
        else:
            finite = np.isfinite(reward).all() and np.isfinite(group_reward).all()
        if not finite:
            self._refuse_rewards_not_finite(reward, group_reward)
        # count_nonzero: a plain C loop, a third of a ufunc reduction's cost on small batches
        ended = np.count_nonzero(terminated) or np.count_nonzero(truncated)
        # agents that left in the step: the slots neither empty before it nor alive after it
        covered = self.alive if absent is None else absent | self.alive
        some_left = np.count_nonzero(covered) < covered.size
        if ended or some_left:
            flagged = terminated | truncated
            stays = flagged & self.alive
            # a stray terminated flag on an empty slot (a whole row flagged as the group ends)
            # changes nothing; a stray truncated one would make the end a time-limit one
            stray = None if absent is None else truncated & absent
            unflagged = ~covered & ~flagged
            if np.count_nonzero(stays) or np.count_nonzero(unflagged) or (
                    stray is not None and np.count_nonzero(stray)):
                self._refuse_end_flags(stays, stray, unflagged, terminated)
        self._clock += 1
        timed_out = self._clock >= self._deadline
        if timed_out:
            time_up = self.t >= self.spec.max_steps
            truncated = truncated | (self.alive & time_up[:, None])
            group_done = ~agent_any(self.alive) | time_up
        else:
            group_done = ~agent_any(self.alive) if ended else np.zeros(E, dtype=bool)
        if timed_out or ended:  # an agent flagged both is terminal, as Gymnasium reads the pair
            truncated = truncated & ~terminated
        obs = final_obs = self._observed() if checking else self._observe()
        # no agent ended and no time limit: no group can be done (the common step)
        if (timed_out or ended) and np.count_nonzero(group_done):
            idx = np.flatnonzero(group_done)
            self.episode[idx] += 1
            self._start_episodes(idx)  # self.t[idx] still counts the ended episodes' steps
            obs = tuple(o.copy() for o in final_obs)
            if self._rows_checked:
                fresh = self._observe(idx)
            else:  # until a reset of some envs only has shown that _observe heeds `rows`
                self._check_someone_acts(idx)
                fresh = self._observed(idx)
                self._rows_checked = len(idx) < E
            for o, rows in zip(obs, fresh, strict=True):
                o[idx] = rows
        return GroupStep(obs=obs, alive=self.alive.copy(), reward=reward, group_reward=group_reward,
                         terminated=terminated, truncated=truncated, group_done=group_done,
                         final_obs=final_obs, action_mask=self._next_mask())

    @property
    def t(self) -> np.ndarray:
        """int [E]: steps taken in each env's current episode."""
        return self._clock - self._start

    def _start_episodes(self, idx: np.ndarray) -> None:
        """Start envs `idx`'s episodes (numbered by `self.episode[idx]`) from empty slots: the
        task's `_reset_envs` sets the ones that act first. Every reset goes through here, so
        that none keeps an ended episode's agents."""
        self.alive[idx] = False
        self._reset_envs(idx)
        self._restart_clock(idx)

    def _restart_clock(self, idx: np.ndarray) -> None:
        self._start[idx] = self._clock
        self._deadline = int(self._start.min()) + self.spec.max_steps

    def close(self) -> None:
        self._closed = True

    # -- checks --
    def _observed(self, rows=slice(None)) -> tuple[np.ndarray, ...]:
        """`_observe(rows)` checked against `spec.obs`: the shapes and dtypes."""
        obs = self._observe(rows)
        n = self.env_ids[rows].size  # rows: a slice, an index or a boolean mask
        task = type(self).__name__
        if len(obs) != len(self.spec.obs):
            raise ValueError(f"{task}._observe returned {len(obs)} arrays for "
                             f"{len(self.spec.obs)} observation components")
        for o, spec in zip(obs, self.spec.obs, strict=True):
            want = (n, self.max_agents, *spec.shape)
            if getattr(o, "shape", None) != want:
                raise ValueError(f"{task}._observe: component {spec.name!r} has shape "
                                 f"{getattr(o, 'shape', type(o).__name__)}, expected {want} "
                                 f"(envs, agents, then the component's shape {spec.shape})")
            if o.dtype != spec.dtype:  # what the views' spaces declare
                kind = "an image, uint8 (0-255)" if spec.kind == "image" else "float32"
                raise ValueError(f"{task}._observe: component {spec.name!r} must be {kind}, "
                                 f"got {o.dtype}")
        # views of the task's own arrays would change under whoever holds them, and a group's
        # last view (final_obs) would turn into its next start when it is reset
        for again, o, spec in zip(self._observe(rows), obs, self.spec.obs, strict=True):
            if np.may_share_memory(again, o):
                raise ValueError(f"{task}._observe: component {spec.name!r} is a view of the "
                                 "task's own arrays (two calls share memory); return fresh "
                                 "arrays (.copy()): the caller keeps and modifies them")
        return obs

    def _check_alive_kept(self, hook: str) -> None:
        """`self.alive` stays the bool [E, A] array the base made: a hook sets its entries."""
        alive, want = self.alive, (self.num_envs, self.max_agents)
        if not isinstance(alive, np.ndarray) or alive.dtype != np.bool_ or alive.shape != want:
            got = (f"{alive.dtype} {list(alive.shape)}" if isinstance(alive, np.ndarray)
                   else type(alive).__name__)
            raise ValueError(f"{type(self).__name__}.{hook} made self.alive {got}: it must stay "
                             f"bool {list(want)}; set its entries (self.alive[idx] = True) "
                             "rather than assigning a new array")

    def _check_someone_acts(self, idx: np.ndarray) -> None:
        """A group must start with an agent alive: with none, a view plays empty episodes."""
        self._check_alive_kept("_reset_envs")
        empty = idx[~agent_any(self.alive[idx])]
        if len(empty):
            raise ValueError(f"{type(self).__name__}._reset_envs left no agent alive in env "
                             f"{int(empty[0])}: set self.alive[idx] to the slots that act on "
                             "the first step")

    def _checked(self, out) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`_step`'s (reward, group_reward, terminated, truncated), shapes checked."""
        self._check_alive_kept("_step")
        names = ("reward", "group_reward", "terminated", "truncated")
        if len(out) != 4:
            raise ValueError(f"{type(self).__name__}._step must return {names}, got {len(out)} "
                             f"values")
        for name, value, want in zip(names, out, self._step_shapes, strict=True):
            if getattr(value, "shape", None) != want:
                raise ValueError(f"{type(self).__name__}._step: {name} has shape "
                                 f"{getattr(value, 'shape', type(value).__name__)}, expected "
                                 f"{want}")
            flags = name in ("terminated", "truncated")
            if (value.dtype == np.bool_) != flags or value.dtype.kind not in "biuf":
                raise ValueError(f"{type(self).__name__}._step: {name} has dtype {value.dtype}, "
                                 f"expected {'bool' if flags else 'a real number dtype'}")
        return out

    def _check_paid_slots(self, reward: np.ndarray, absent: np.ndarray) -> None:
        """A slot with no agent in the step (not alive before it, and none alive in it after:
        an agent that joins and leaves within one `_step` is never seen) earns nothing: the
        views and learners would disagree on it (the PettingZoo view has no agent to pay, the
        team return would count it), so `_step` paying one is a bug in the task."""
        stray = absent & ~self.alive & (reward != 0)
        if not stray.any():
            return
        e, a = np.argwhere(stray)[0]
        raise ValueError(f"{type(self).__name__}._step paid an individual reward of "
                         f"{reward[e, a]:g} to slot {a} of env {e}, where no agent was alive "
                         f"after {self.t[e]} steps of its episode, nor joined; only the agents "
                         f"in a step earn in it (multiply by self.alive before updating it, or "
                         f"pay the group through group_reward)")

    def _refuse_end_flags(self, stays: np.ndarray, stray: np.ndarray | None,
                          unflagged: np.ndarray, terminated: np.ndarray) -> None:
        """An agent flagged terminated or truncated left in the step (`stays`: still alive
        after it), one flagged truncated was not in it (`stray`: no agent before it), and one
        left it without a flag (`unflagged`: alive before the step, not after, neither flag).
        Otherwise the views disagree: the PettingZoo view would list an agent that ended, or
        drop one with no end (PettingZoo's contract: every agent leaves with a flag), a group
        emptied without a flag would play on to its time limit, and a stray truncated flag on
        an empty slot would turn a group's terminal end into a time-limit one, which learners
        bootstrap."""
        task = type(self).__name__
        for bad, why in ((stays, "yet left it alive: an agent that ends leaves self.alive in "
                                 "the same step (a newcomer may take its slot on a later step)"),
                         (stray, "where no agent was alive before the step: only an agent in "
                                 "the step can end in it")):
            if bad is not None and bad.any():
                e, a = np.argwhere(bad)[0]
                kind = "terminated" if bad is stays and terminated[e, a] else "truncated"
                raise ValueError(f"{task}._step flagged {self._who(a)} of env {e} {kind} on step "
                                 f"{int(self.t[e]) + 1} of its episode, {why}")
        e, a = np.argwhere(unflagged)[0]
        raise ValueError(f"{task}._step cleared self.alive for {self._who(a)} of env {e} on step "
                         f"{int(self.t[e]) + 1} of its episode without an end flag: an agent "
                         f"that leaves is flagged terminated (or truncated, for a time limit) "
                         f"on the step it leaves")

    def _who(self, slot: int, unnamed: str = "slot") -> str:
        return f"{unnamed} {slot}" if self.slot_names is None else self.slot_names[slot]

    def _refuse_rewards_not_finite(self, reward: np.ndarray, group_reward: np.ndarray) -> None:
        """Rewards are finite float32 numbers: a NaN, or a value past float32's range (a cost
        setting of 1e39, say), would reach every view and learner as NaN or inf."""
        for name, values in (("an individual reward", reward), ("a group reward", group_reward)):
            bad = np.argwhere(~np.isfinite(values))
            if len(bad):
                where = bad[0]
                e = where[0]
                slot = f", slot {where[1]}" if len(where) > 1 else ""
                raise ValueError(f"{type(self).__name__}._step gave {name} of "
                                 f"{values[tuple(where)]} in env {e}{slot} on step "
                                 f"{int(self.t[e]) + 1} of its episode; rewards must be finite "
                                 f"as float32 (at most {np.finfo(np.float32).max:.3g} in size): "
                                 f"a reward or cost setting too large?")

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed; make a new one")

    def _check_actions(self, actions) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Validate an action dict; returns (continuous clipped to [-1, 1], discrete).

        Entries of slots that are not alive are never checked or passed on: the task sees 0
        there, whatever was sent (NaN, out of range, negative)."""
        E, A = self.num_envs, self.max_agents
        alive = self.alive
        dead = None if np.count_nonzero(alive) == alive.size else ~alive
        C, branches = self.spec.continuous_size, self.spec.discrete_branches
        if not isinstance(actions, dict):
            raise TypeError("actions must be a dict with keys 'continuous' and/or 'discrete', "
                            f"got {type(actions).__name__}")
        expected = self._action_keys
        if actions.keys() != expected:  # the exact keys: nothing to look for
            unknown = actions.keys() - {"continuous", "discrete"}
            missing = expected - actions.keys()
        else:
            unknown = missing = None
        if unknown or missing:
            raise ValueError(f"actions must have keys {sorted(expected)}; missing {sorted(missing)}"
                             f", unknown {sorted(unknown)}")
        cont = disc = None
        if C:
            cont = np.asarray(actions["continuous"])
            if cont.shape != (E, A, C) or cont.dtype.kind != "f":
                raise ValueError(f"actions['continuous'] must be float [{E}, {A}, {C}], "
                                 f"got {cont.dtype} {list(cont.shape)}")
            with np.errstate(invalid="ignore", over="ignore"):  # inf - inf in dead slots
                finite = np.isfinite(cont.sum())
            if not finite:  # fast path; dead slots may hold anything
                self._raise_for(~np.isfinite(cont).all(axis=2), "continuous", "is NaN/inf")
            cont = np.clip(cont, -1.0, 1.0).astype(np.float32, copy=False)  # a new array
            if dead is not None:
                cont[dead] = 0.0
        elif "continuous" in actions and np.size(actions["continuous"]):
            raise ValueError("actions['continuous'] given but this task has no continuous actions")
        if branches:
            disc = np.asarray(actions["discrete"])
            if disc.shape != (E, A, len(branches)) or disc.dtype.kind not in "iu":
                raise ValueError(f"actions['discrete'] must be int [{E}, {A}, {len(branches)}], "
                                 f"got {disc.dtype} {list(disc.shape)}")
            as_unsigned = disc.view(_UNSIGNED[disc.itemsize])  # -1 reads as huge
            if np.maximum.reduce(as_unsigned, axis=None) >= self._min_branch:
                # slow path only when some value is out of range somewhere (-1 reads as huge)
                bad = ((disc < 0) | (disc >= np.asarray(branches))).any(axis=2)
                self._raise_for(bad, "discrete", f"is out of range (branch sizes {list(branches)})")
            if dead is not None:
                disc = disc.copy()
                disc[dead] = 0
            if self._legal is not None:
                self._check_legal(disc)
        elif "discrete" in actions and np.size(actions["discrete"]):
            raise ValueError("actions['discrete'] given but this task has no discrete actions")
        return cont, disc

    def _next_mask(self) -> np.ndarray | None:
        """The task's action mask for the next step, checked, kept to check those actions."""
        mask = self._action_mask()
        if mask is not None:
            mask = np.asarray(mask)
            shape = (self.num_envs, self.max_agents, sum(self.spec.discrete_branches))
            if mask.shape != shape or mask.dtype.kind not in "biu":
                raise ValueError(f"{type(self).__name__}._action_mask must return bools "
                                 f"{list(shape)}, got {mask.dtype} {list(mask.shape)}")
            # a copy: a task may well fill one buffer each step, and every step's mask is kept
            # (a rollout stores them) after the next is made
            mask = np.array(mask, dtype=bool)
        self._legal = mask
        return mask

    def _check_legal(self, disc: np.ndarray) -> None:
        """A discrete action that the last `action_mask` forbids is an error, not played: a
        task would otherwise act on a move it ruled out. A branch with no legal action at all
        (a turn-based env's waiting player) takes any action, which the task ignores."""
        flat = np.add(disc, self._branch_starts, dtype=np.intp)  # uint64 + int64 is float64
        legal = np.take_along_axis(self._legal, flat, axis=2)  # [E, A, B]
        if legal.all():
            return
        open_branch = np.logical_or.reduceat(self._legal, self._branch_starts, axis=2)
        bad = (open_branch & ~legal) & self.alive[:, :, None]
        if bad.any():
            e, a, b = np.argwhere(bad)[0]
            start = self._branch_starts[b]
            end = start + self.spec.discrete_branches[b]
            allowed = np.flatnonzero(self._legal[e, a, start:end])
            self._raise_for(bad.any(axis=2), "discrete",
                            f"(branch {b}: {disc[e, a, b]}) is not allowed by the action_mask "
                            f"(allowed there: {allowed.tolist()})")

    def _raise_for(self, bad: np.ndarray, field: str, what: str) -> None:
        """Raise for the first alive slot flagged in `bad`; flags on dead slots are ignored."""
        bad = bad & self.alive
        if bad.any():
            e, a = np.argwhere(bad)[0]
            raise ValueError(f"actions['{field}'] {what} for env {e}, {self._who(a, 'agent')} "
                             f"(episode step "
                             f"{int(self.t[e]) + 1})")

    # -- task hooks --
    @abstractmethod
    def _reset_envs(self, idx: np.ndarray) -> None:
        """Start a new episode in envs `idx` (int [n], sorted, distinct).

        Must write the start state of those envs and set `self.alive[idx]` (bool [n, A]) to the
        slots that act on the first step (every slot of those envs is clear on entry; the others
        may join later by becoming alive in `_step`).
        Draw randomness with `self.random_bits(idx)` / `self.uniform(idx, k, step=j)` (a different
        `j` per independent draw): `self.episode[idx]` already numbers the new episode, so every
        episode draws fresh values. On auto-reset `self.t[idx]` still counts the ended episode's
        steps; with `self.record_final` set (by a rendering view) keep what `frame(..., final=True)`
        needs before overwriting it.
        """

    @abstractmethod
    def _step(self, cont: np.ndarray | None, disc: np.ndarray | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Advance every env by one step and return `(reward, group_reward, terminated, truncated)`.

        `cont` is float32 [E, A, C] in [-1, 1] (None without continuous actions), `disc` ints [E, A,
        B] within the branch sizes (None without discrete actions); entries of slots that are not
        alive hold anything and must be ignored. `self.t` [E] counts each env's steps before this
        one. Returns fresh arrays: float32 `reward` [E, A] (each agent's individual reward, an agent
        joining on this step included; 0 for a slot with no agent in this step: refused otherwise),
        float32 `group_reward` [E], and bool `terminated` / `truncated` [E, A] for agents whose
        episode ends on this step, only those (an agent alive before the step and not after it:
        refused otherwise; the task's own time limits go in `truncated`; the base adds
        truncation at `spec.max_steps` itself). Must also update `self.alive` [E, A]: clear the
        agents that ended, set the agents that join (in free slots: a slot whose agent ended on this
        step stays empty until the next, so that learners never chain two agents' returns); the
        group's episode ends (and is reset) when no slot is alive, so a task that ends a whole group
        ends every one of its agents.
        """

    @abstractmethod
    def _observe(self, rows=slice(None)) -> tuple[np.ndarray, ...]:
        """The observation of the current state of envs `rows` (a slice or int [n] array).

        One fresh array per `spec.obs` component, in order, each [n, A, *shape] of the
        component's dtype (float32; uint8 for images); the caller may modify them. Rows of slots
        that are not alive may hold anything (learners mask them, the views show them blank),
        except on the step an agent ends: its row is then its last view, which the views report
        and from which a learner bootstraps an agent cut off by a time limit.
        """

    def _action_mask(self) -> np.ndarray | None:
        """Bool [E, A, sum(branches)]: the discrete actions allowed on the next step (None:
        all; the core keeps a copy, so one buffer refilled each step will do). `step` refuses a
        forbidden one; learners sample only allowed ones."""
        return None

    def frame(self, env: int, group_return: float, final: bool = False):
        """(size, draw) to render env `env` (its last ended episode with `final`); see render.py."""
        raise NotImplementedError(f"{type(self).__name__} has no rendering")
