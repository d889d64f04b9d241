"""Gymnasium views: joint control of one group (`Env`) and a native batch of groups (`VectorEnv`).

The joint view treats the whole group as one agent: observations are every component stacked over
agent slots plus an `alive` mask, the action holds one entry per slot (entries of slots that are
not alive are ignored), and the reward is the team reward MA-POCA learns from: the group reward
plus the sum of the step's individual rewards.
"""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

import envs
from envs.render import RENDER_MODES, EpisodeRenderer, check_render_mode
from envs.spaces import joint_action_space, joint_observation_space, joint_to_core


def _joint_obs(spec, view, alive, row):
    """The joint observation of env `row` (or all envs with row=slice(None)) as fresh arrays."""
    out = {o.name: part[row].copy() for o, part in zip(spec.obs, view)}
    out["alive"] = alive[row].astype(np.int8)
    return out


class GroupGymEnv(gymnasium.Env):
    """Joint control of one group of a registered task (see the task's own docstring)."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 10}

    def __init__(self, task: str = "Goal-v0", render_mode=None, **kwargs):
        check_render_mode(render_mode)
        self.core = envs.make_group(task, num_envs=1, **kwargs)
        self.render_mode = render_mode
        self._render = EpisodeRenderer(self.core, render_mode, self.metadata["render_fps"])
        self.observation_space = joint_observation_space(self.core.spec)
        self.action_space = joint_action_space(self.core.spec)
        self._over = True

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        step = self.core.reset(seed=seed)
        self._over = False
        self._render.start()
        return _joint_obs(self.core.spec, step.obs, step.alive, 0), self._info(step)

    def step(self, action):
        if self._over:
            raise RuntimeError("step() needs a running episode: call reset() first")
        step = self.core.step(joint_to_core(self.core.spec, _add_env_axis(action)))
        ended = bool(step.group_done[0])
        truncated = bool(step.group_truncated[0])
        self._over = ended
        alive = self.core.alive if not ended else step.truncated
        obs = _joint_obs(self.core.spec, step.final_obs, alive, 0)
        reward = float(step.group_reward[0] + step.reward[0].sum())
        self._render.step(step)
        return obs, reward, ended and not truncated, truncated, self._info(step)

    def render(self):
        return self._render.render()

    def close(self):
        self._render.close()
        self.core.close()

    @staticmethod
    def _info(step):
        return {"group_reward": float(step.group_reward[0]),
                "individual_reward": step.reward[0].copy()}


def _add_env_axis(action):
    if isinstance(action, dict):
        return {k: np.asarray(v)[None] for k, v in action.items()}
    return np.asarray(action)[None]


class GroupVectorEnv(VectorEnv):
    """`num_envs` groups stepped by the batched core, with same-step auto-reset.

    When a group ends, the returned observation already shows its next episode and
    `infos["final_obs"]` (rows flagged by `infos["_final_obs"]`) holds the ended episode's last one.
    """

    metadata = {"render_modes": [], "render_fps": 10, "autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, task: str = "Goal-v0", num_envs: int = 1, render_mode=None, **kwargs):
        if render_mode is not None:
            raise ValueError("the batched VectorEnv does not render; render one group with "
                             "gymnasium.make(..., render_mode=...)")
        self.core = envs.make_group(task, num_envs=num_envs, **kwargs)
        self.num_envs = self.core.num_envs
        self.render_mode = render_mode
        self.single_observation_space = joint_observation_space(self.core.spec)
        self.single_action_space = joint_action_space(self.core.spec)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        step = self.core.reset(seed=seed)
        return _joint_obs(self.core.spec, step.obs, step.alive, slice(None)), {}

    def step(self, actions):
        step = self.core.step(joint_to_core(self.core.spec, actions))
        spec = self.core.spec
        obs = _joint_obs(spec, step.obs, step.alive, slice(None))
        reward = step.group_reward + step.reward.sum(axis=1)
        truncated = step.group_truncated
        infos = {"group_reward": step.group_reward, "individual_reward": step.reward}
        if step.group_done.any():
            final_alive = np.where(step.group_done[:, None], step.truncated, step.alive)
            infos["final_obs"] = _joint_obs(spec, step.final_obs, final_alive, slice(None))
            infos["_final_obs"] = step.group_done
        return obs, reward, step.group_done & ~truncated, truncated, infos

    def close_extras(self, **kwargs):
        self.core.close()
