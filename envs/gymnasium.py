"""Gymnasium views: joint control of one group (`Env`) and a native batch of groups (`VectorEnv`).

The joint view treats the whole group as one agent: observations are every component stacked over
agent slots plus an `alive` mask, the action holds one entry per slot (entries of slots that are
not alive are ignored), and the reward is the team reward MA-POCA learns from: the group reward
plus the sum of the step's individual rewards. `flat=True` gives the same data in the 1-D spaces
single-agent libraries expect (see `envs.spaces`).
"""

from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

import envs
from envs.core import check_bool, check_int
from envs.render import RENDER_MODES, EpisodeRenderer, check_render_mode
from envs.spaces import (
    first_allowed,
    joint_action_space,
    joint_observation_space,
    joint_to_core,
    one_line,
)

AUTORESET_MODES = (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP)


def _joint_obs(spec, view, alive, rows, flat=False, shown=None):
    """The joint observations of envs `rows` (a slice or index array) as fresh arrays, with the
    `alive` mask. Only the `shown` slots (default: the alive ones) show their rows; the others
    show their component's blank value, since a task may leave anything in the rows of slots
    that are not alive (1e30, NaN) and the observation must stay inside the view's space."""
    alive = alive[rows]
    hidden = ~(alive if shown is None else shown[rows])
    blanking = bool(hidden.any())
    # fresh arrays (a flat view's concatenate copies anyway), blanked in place
    parts = [part[rows].copy() if blanking or not flat else part[rows] for part in view]
    if blanking:
        for o, part in zip(spec.obs, parts, strict=True):
            part[hidden] = o.blank
    if flat:
        return np.concatenate([part.reshape(len(alive), -1) for part in parts] + [alive], axis=1,
                              dtype=np.float32)
    out = {o.name: part for o, part in zip(spec.obs, parts, strict=True)}
    out["alive"] = alive.astype(np.int8)
    return dict(sorted(out.items()))  # the order of the space's keys (gymnasium's Dict sorts)


def _shown(step, final: bool):
    """The slots whose rows a step's joint view shows: those alive and those that ended on this
    step (their last view); in an ended group's final view (`final`), the ones that ended, and
    in its next episode's first view, the alive ones."""
    ended = step.terminated | step.truncated
    return np.where(step.group_done[:, None], ended if final else step.alive, step.alive | ended)


def _reported_seed(view, seed):
    """The seed for the core: the caller's; at an unseeded first reset, the one Gymnasium
    reports in `np_random_seed` (drawn from entropy), so that `reset(seed=env.np_random_seed)`
    plays those episodes again. Later unseeded resets go on with the core's episodes."""
    if seed is None and not view.core.seeded and view.np_random_seed >= 0:
        return view.np_random_seed
    return seed


def _first(obs):
    return {k: v[0] for k, v in obs.items()} if isinstance(obs, dict) else obs[0]


class GroupGymEnv(gymnasium.Env):
    """Joint control of one group of a registered task (see the task's own docstring).

    `reset()` after an episode ends starts the next one, so `gymnasium.make(id).reset(seed=s)`
    plays the same episodes as env 0 of `gymnasium.make_vec(id, seed=s)`.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 10}

    def __init__(self, task: str | type = "Goal-v0", render_mode=None, flat: bool = False,
                 **kwargs):
        check_render_mode(render_mode)
        if "num_envs" in kwargs:
            raise TypeError(f"num_envs: gymnasium.make gives one group; for {kwargs['num_envs']} "
                            + (f"groups stepped at once use gymnasium.make_vec("
                               f"'groupenvs/{task.removeprefix('groupenvs/')}', num_envs=...)"
                               if isinstance(task, str) else "groups stepped at once use "
                               f"GroupVectorEnv({task.__name__}, num_envs=...)"))
        self.core = envs._make_core(
            task, 1, kwargs, ("render_mode", "flat"), one_group=True,
            hint="" if "autoreset_mode" not in kwargs else (
                "; autoreset_mode is an argument of make_vec's native VectorEnv: for "
                "vectorization_mode='sync' or 'async' give it in vector_kwargs"))
        self.render_mode = render_mode
        self.flat = check_bool("flat", flat)
        self._render = EpisodeRenderer(self.core, render_mode, self.metadata["render_fps"])
        self.observation_space = joint_observation_space(self.core.spec, self.flat)
        self.action_space = joint_action_space(self.core.spec, self.flat)
        self._over = True
        self._next = None  # the core's first step of the next episode, once one has ended

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.core._check_open()  # also when the next episode's start is already at hand
        if seed is None and self._next is not None:
            step = self._next  # the core already started the next episode when the last ended
        else:
            step = self.core.reset(seed=_reported_seed(self, seed))
        self._over, self._next = False, None
        self._render.start()
        A = self.core.spec.num_agents
        info = {"group_reward": 0.0, "individual_reward": np.zeros(A, np.float32),
                **_mask_info(step.action_mask, 0)}
        return _first(self._obs(step.obs, step.alive)), info

    def step(self, action):
        if self._over:
            raise RuntimeError("step() needs a running episode: call reset() first")
        _check_action(self.action_space, action)  # before the core's batched shape is added
        step = self.core.step(joint_to_core(self.core.spec, _add_env_axis(action), self.flat))
        ended = bool(step.group_done[0])
        truncated = bool(step.group_truncated[0])
        self._over = ended
        self._next = step if ended else None
        alive = self.core.alive if not ended else step.truncated
        obs = _first(self._obs(step.final_obs, alive, _shown(step, final=True)))
        reward = float(step.group_reward[0] + step.reward[0].sum())
        self._render.step(step)
        return obs, reward, ended and not truncated, truncated, self._info(step)

    def _obs(self, view, alive, shown=None):
        return _joint_obs(self.core.spec, view, alive, slice(0, 1), self.flat, shown)

    def render(self):
        return self._render.render()

    def close(self):
        self._render.close()
        self.core.close()

    @staticmethod
    def _info(step):
        return {"group_reward": float(step.group_reward[0]),
                "individual_reward": step.reward[0].copy(), **_mask_info(step.action_mask, 0)}


def _mask_info(mask, rows) -> dict:
    """`{"action_mask": bool [..., A, sum(branches)]}` for tasks with masks (in infos, as
    Gymnasium's Taxi gives its mask), else nothing."""
    return {} if mask is None else {"action_mask": mask[rows].copy()}


def _check_action(space, action) -> None:
    """A joint action (or each part of a hybrid one) must have its space's shape and kind of
    number (ints for discrete parts, floats for continuous ones), checked here so that the
    error speaks of the space the caller sees, not of the core's batched arrays."""
    if isinstance(space, gymnasium.spaces.Dict):
        if not isinstance(action, dict):
            raise ValueError(f"action must be a dict with keys {list(space.spaces)} (the action "
                             f"space is {one_line(space)}), got {type(action).__name__}")
        parts = [(f"action[{key!r}]", space[key], action[key]) for key in space.spaces
                 if key in action]
    else:
        parts = [("action", space, action)]
    for name, part_space, value in parts:
        try:
            value = np.asarray(value)
        except ValueError:  # ragged
            raise ValueError(f"{name} must have the action space's shape {part_space.shape}, "
                             "got a ragged sequence") from None
        if value.shape != part_space.shape:
            raise ValueError(f"{name} must have the action space's shape {part_space.shape}, "
                             f"got {value.shape}")
        discrete = np.dtype(part_space.dtype).kind in "iu"  # batched: an int Box
        if value.dtype.kind not in ("iu" if discrete else "f"):
            raise ValueError(f"{name} must hold {'ints' if discrete else 'floats'}, as its space "
                             f"{one_line(part_space)} does, got {value.dtype}")


def _add_env_axis(action):
    if isinstance(action, dict):
        return {k: np.asarray(v)[None] for k, v in action.items()}
    return np.asarray(action)[None]


def _autoreset_mode(mode) -> AutoresetMode:
    try:
        mode = mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)
    except ValueError:
        mode = None
    if mode not in AUTORESET_MODES:
        raise ValueError(f"autoreset_mode must be one of {[m.value for m in AUTORESET_MODES]} "
                         "(an AutoresetMode or its value)")
    return mode


class GroupVectorEnv(VectorEnv):
    """`num_envs` groups stepped by the batched core.

    `autoreset_mode` (a keyword of `gymnasium.make_vec`, as native vector envs take no
    `vector_kwargs`):
    - `AutoresetMode.NEXT_STEP` (default, as in Gymnasium, and what its vector wrappers such as
      `FlattenObservation` or `NormalizeObservation` require): a group that ends returns its last
      observation; the next `step` ignores that env's action and returns the first observation
      of its next episode with reward 0 and both flags False.
    - `AutoresetMode.SAME_STEP`: the returned observation already shows the next episode; the
      infos are those of Gymnasium's own vectorizers in that mode: `infos["final_obs"]` is an
      object array holding each ended env's last observation (None elsewhere, rows flagged by
      `infos["_final_obs"]`), `infos["final_info"]` the ended step's infos, and the top-level
      infos of those envs are their new episode's (reset) infos. No step is spent on resets.

    `max_episode_steps` (what `gymnasium.make_vec` passes from a registration's or the caller's
    limit) ends episodes after that many steps if the task's own `max_steps` does not end them
    sooner, as `gymnasium.make`'s `TimeLimit` wrapper does for one group.
    """

    metadata = {"render_modes": [], "render_fps": 10, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, task: str | type = "Goal-v0", num_envs: int = 1, render_mode=None,
                 flat: bool = False, autoreset_mode=AutoresetMode.NEXT_STEP,
                 max_episode_steps: int | None = None, **kwargs):
        if render_mode is not None:
            raise ValueError("the batched VectorEnv does not render; render one group with "
                             "gymnasium.make(..., render_mode=...)")
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        self.core = envs._make_core(task, num_envs, kwargs, ("render_mode", "flat",
                                                             "autoreset_mode", "max_episode_steps"))
        if max_episode_steps is not None:  # the core enforces its spec's limit (from reset on)
            limit = min(check_int("max_episode_steps", max_episode_steps, 1),
                        self.core.spec.max_steps)
            self.core.spec = dataclasses.replace(self.core.spec, max_steps=limit)
        # steps into each episode: a group that terminates on the limit's step is reported
        # truncated too, as TimeLimit does (the core's own limit gives way to termination)
        self._limit = max_episode_steps
        self._elapsed = np.zeros(self.core.num_envs, dtype=np.int64)
        self.num_envs = self.core.num_envs
        self.render_mode = render_mode
        self.flat = check_bool("flat", flat)
        self.single_observation_space = joint_observation_space(self.core.spec, self.flat)
        self.single_action_space = joint_action_space(self.core.spec, self.flat)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._restart = np.zeros(self.num_envs, dtype=bool)  # NEXT_STEP: ended on the last step

    def reset(self, *, seed=None, options=None):
        if options:  # Gymnasium's one vector option asks for what this env does not do
            raise ValueError(
                f"options {sorted(map(str, options))}: this vector env takes none; it resets "
                f"every group (groups that end restart themselves, as autoreset_mode says), so "
                f"a partial reset (reset_mask) needs Gymnasium's own vectorizers "
                f"(gymnasium.make_vec(..., vectorization_mode='sync'))")
        if isinstance(seed, (list, tuple)) or np.ndim(seed) > 0:  # one per group: group i
            super().reset()  # plays what gymnasium.make(id).reset(seed=seed[i]) does
            step = self.core.reset(seed=list(seed))
        else:  # group i draws its episodes from (seed, i), whatever num_envs is
            super().reset(seed=seed)
            if seed is None:  # a group that ended on the last step (NEXT_STEP) plays the episode
                # the core already started for it, as gymnasium.make(id).reset() does after an
                # end (and so the sync vectorizer); the others their next
                self.core.episode[self._restart] -= 1
            step = self.core.reset(seed=_reported_seed(self, seed))
        self._restart[:] = False
        self._elapsed[:] = 0
        return self._obs(step.obs, step.alive), self._with_mask(self._infos(
            np.zeros(self.num_envs), np.zeros((self.num_envs,
                                                           self.core.spec.num_agents),
                                              np.float32)))

    def _infos(self, group_reward, individual_reward) -> dict:
        """The per-env infos, each key with its `_key` mask, as Gymnasium's vectorizers give
        them (every env has every key)."""
        every = np.ones(self.num_envs, dtype=bool)
        return {"group_reward": group_reward, "_group_reward": every,
                "individual_reward": individual_reward, "_individual_reward": every.copy()}

    def _obs(self, view, alive, shown=None):
        return _joint_obs(self.core.spec, view, alive, slice(None), self.flat, shown)

    def step(self, actions):
        core, spec = self.core, self.core.spec
        _check_action(self.action_space, actions)
        actions = joint_to_core(spec, actions, self.flat)
        restart = np.flatnonzero(self._restart)
        if len(restart):  # these envs' actions are ignored: any valid value will do
            actions = {k: v.copy() for k, v in actions.items()}
            for v in actions.values():
                v[restart] = 0
            if core._legal is not None:  # 0 may be masked at the new start: the first allowed
                actions["discrete"][restart] = first_allowed(core._legal[restart],
                                                             spec.discrete_branches)
        step = core.step(actions)
        # float64 as Gymnasium's vectorizers give rewards (the values are float32's)
        group_reward = step.group_reward.astype(np.float64)
        reward = (step.group_reward + step.reward.sum(axis=1)).astype(np.float64)
        truncated = step.group_truncated
        terminated = step.group_done & ~truncated
        self._elapsed += 1
        if self._limit:
            truncated |= step.group_done & (self._elapsed >= self._limit)
        self._elapsed[step.group_done | self._restart] = 0
        infos = self._infos(group_reward, step.reward)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            obs = self._obs(step.obs, step.alive, _shown(step, final=False))
            done = step.group_done
            if done.any():
                infos = self._with_mask(infos)
                final_alive = np.where(done[:, None], step.truncated, step.alive)
                final = self._obs(step.final_obs, final_alive, _shown(step, final=True))
                infos["final_obs"] = np.full(self.num_envs, None, dtype=object)
                for e in np.flatnonzero(done):  # one object per ended env, as Gymnasium's
                    infos["final_obs"][e] = ({k: v[e] for k, v in final.items()}
                                             if isinstance(final, dict) else final[e])
                # the ended step's infos under final_info; the top level: the new episode's
                infos["final_info"] = {k: np.where(done.reshape((-1,) + (1,) * (v.ndim - 1)),
                                                   v, np.zeros((), v.dtype))
                                       if not k.startswith("_") else done.copy()
                                       for k, v in infos.items() if k != "final_obs"}
                infos["_final_obs"] = infos["_final_info"] = done.copy()
                infos["group_reward"] = np.where(done, 0, group_reward)
                infos["individual_reward"] = np.where(done[:, None], 0, step.reward)
                return obs, reward, terminated, truncated, infos
            return obs, reward, terminated, truncated, self._with_mask(infos)
        # NEXT_STEP: show the ended episodes' last view now, their next start on the next step
        final_alive = np.where(step.group_done[:, None], step.truncated, step.alive)
        obs = self._obs(step.final_obs, final_alive, _shown(step, final=True))
        if len(restart):
            first = _restart_episodes(core, restart, step.group_done[restart])
            fresh = _joint_obs(spec, first, core.alive[restart], slice(None), self.flat)
            if isinstance(obs, dict):
                for k in obs:
                    obs[k][restart] = fresh[k]
            else:
                obs[restart] = fresh
            for arr in (reward, terminated, truncated, group_reward, step.reward):
                arr[restart] = 0
        self._restart = step.group_done.copy()
        self._restart[restart] = False
        return obs, reward, terminated, truncated, self._with_mask(infos)

    def _with_mask(self, infos: dict) -> dict:
        """`infos` with the legal actions of the next step (restarted rows: their replayed
        start's), for tasks with masks."""
        legal = self.core._legal
        if legal is not None:
            infos.update(action_mask=legal.copy(), _action_mask=np.ones(self.num_envs, bool))
        return infos

    def close_extras(self, **kwargs):
        self.core.close()


def _restart_episodes(core, idx, ended_again):
    """Start envs `idx`'s current episodes again from their first step (NEXT_STEP's reset step:
    the core already reset them when they ended, and has just stepped them with an ignored
    action). The episode index is kept, so the replayed start is the one the core drew."""
    core.episode[idx[ended_again]] -= 1  # the ignored step ended it again and moved on
    core._start_episodes(idx)
    core._next_mask()  # the replayed start's legal actions, for the next step's check
    return core._observe(idx)
