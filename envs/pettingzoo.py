"""PettingZoo `ParallelEnv` view of one group (a `GroupEnv` with `num_envs=1`).

Agents are `agent_0 .. agent_{A-1}`. An agent that ends is reported once, in the step it ends
(its final observation, its reward, `terminated` or `truncated`), and then leaves `agents` for good;
actions later sent for it are ignored, and `step({})` once every agent has left returns empty dicts.
An agent that joins mid-episode (Baton Pass) enters `agents` in the step it appears, with its first
observation and the individual reward the task paid it on joining (0 in this package's tasks);
one that appears on the episode's last step is not reported (PettingZoo's tools cannot take an
agent that appears already ended).
Each agent's reward is its individual reward plus the group reward; `infos[agent]` holds both parts.
`death_mode="absorb"` instead keeps ended agents in `agents` with blank observations (0, or the
bound nearest to 0) and zero rewards until the whole group ends, for libraries that need a fixed
agent set.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

import envs
from envs.core import check_int
from envs.render import RENDER_MODES, EpisodeRenderer, check_render_mode
from envs.spaces import (
    agent_action_space,
    agent_mask,
    agent_observation_space,
    agent_to_core,
    first_allowed,
)

DEATH_MODES = ("remove", "absorb")


class GroupParallelEnv(ParallelEnv):
    """One group of a registered task as a PettingZoo ParallelEnv.

    >>> import pettingzoo, envs
    >>> env = pettingzoo.make("parallel", "groupenvs/goal-v0", num_agents=3)
    """

    metadata = {"name": "groupenvs", "render_modes": list(RENDER_MODES), "render_fps": 10,
                "is_parallelizable": True}

    def __init__(self, task: str | type = "Goal-v0", death_mode: str = "remove", render_mode=None,
                 **kwargs):
        if death_mode not in DEATH_MODES:
            raise ValueError(f"death_mode must be one of {list(DEATH_MODES)}, got {death_mode!r}")
        check_render_mode(render_mode)
        if "num_envs" in kwargs:
            name = task.removeprefix("groupenvs/") if isinstance(task, str) else task.__name__
            raise TypeError(f"num_envs: a PettingZoo env is one group; for {kwargs['num_envs']} "
                            f"groups stepped at once use envs.make_group({name!r}, num_envs=...) "
                            "or gymnasium.make_vec (poca's num_envs setting makes its copies)")
        if "max_cycles" in kwargs:  # PettingZoo's name for the episode's step limit
            if "max_steps" in kwargs:
                raise TypeError("give max_steps or max_cycles (PettingZoo's name for it), not "
                                "both")
            kwargs["max_steps"] = check_int("max_cycles", kwargs.pop("max_cycles"), 1)
        self.core = envs._make_core(task, 1, kwargs, ("death_mode", "render_mode", "max_cycles"),
                                    one_group=True)
        self._render = EpisodeRenderer(self.core, render_mode, self.metadata["render_fps"])
        self.spec = self.core.spec
        # False for a task that pays only individual rewards: learners (poca's adapter) then
        # lead with the team return, though every info carries a group_reward (of 0)
        self.pays_group_reward = self.core.pays_group_reward
        self.death_mode = death_mode
        self.render_mode = render_mode
        self.metadata = {**self.metadata,
                         "name": envs.pettingzoo_id(task).split("/")[1].replace("-", "_")
                         if isinstance(task, str) else task.__name__}
        self.possible_agents = [f"agent_{i}" for i in range(self.spec.num_agents)]
        # (index, spec) of the observation components in the space's key order (Dict sorts)
        self._components = sorted(enumerate(self.spec.obs), key=lambda item: item[1].name)
        self.core.slot_names = self.possible_agents  # errors name agents as this view does
        self._slot = {name: i for i, name in enumerate(self.possible_agents)}
        self.agents: list[str] = []
        self._obs_space = agent_observation_space(self.spec)
        self._act_space = agent_action_space(self.spec)
        width = sum(int(np.prod(o.shape)) for o in self.spec.obs)
        high = max(max(o.high for o in self.spec.obs), 255.0 if any(
            o.kind == "image" for o in self.spec.obs) else 1.0)
        self.state_space = spaces.Box(min(min(o.low for o in self.spec.obs), 0.0), high,
                                      (self.spec.num_agents * (width + 1),), dtype=np.float32)
        self._last = None
        self._next = None  # the core's first step of the next episode, once one has ended
        self._left: set[int] = set()  # slots whose agent ended in this episode

    def observation_space(self, agent):  # one object for every agent: `is` holds
        if agent not in self._slot:
            self._unknown(agent)
        return self._obs_space

    def action_space(self, agent):
        if agent not in self._slot:
            self._unknown(agent)
        return self._act_space

    def check_action(self, agent, action) -> None:
        """Raise, as `step` would, if `agent` may not take `action` now (the others' actions
        aside). The AEC form calls it on each agent's turn, so that a bad action is refused
        when it is given, not when the last agent's turn completes the step."""
        if agent not in self._slot:
            self._unknown(agent)
        if self._last is None:
            raise RuntimeError("step() called before reset(): call reset() first")
        slot, core = self._slot[agent], self.core
        if not core.alive[0, slot]:
            return  # ignored by `step`, as for an agent that has left
        actions = agent_to_core(self.spec, [slot], [action])
        if core._legal is not None:  # the other slots: an allowed action, so that only this
            others = np.arange(self.spec.num_agents) != slot  # agent's can be at fault
            actions["discrete"][0, others] = first_allowed(core._legal[0, others],
                                                           self.spec.discrete_branches)
        core._check_actions(actions)

    def _unknown(self, agent):
        raise ValueError(f"unknown agent {agent!r}; agents are {self.possible_agents}")

    def reset(self, seed=None, options=None):
        self.core._check_open()  # also when the next episode's start is already at hand
        if seed is None and self._next is not None:
            step = self._next  # the core already started the next episode when the last ended
        else:
            step = self.core.reset(seed=seed)
        self._next, self._left = None, set()
        self._last = (step.obs, step.alive[0])
        self.agents = [a for a in self.possible_agents if step.alive[0, self._slot[a]]]
        obs = {a: self._agent_obs(step.obs, self._slot[a]) for a in self.agents}
        infos = {a: self._reset_info(step, self._slot[a]) for a in self.agents}
        self._render.start()
        return obs, infos

    def step(self, actions):
        """Step the agents in `agents` that still act.

        Actions for agents that have already left are accepted and ignored (clients such as
        TorchRL send one for every agent); with no agents left, `step({})` returns empty dicts,
        as PettingZoo's reference environments do (SuperSuit's `black_death_v3` makes that call).
        Names outside `possible_agents`, a missing action for an acting agent, and stepping
        before `reset()` raise.
        """
        if self._last is None:
            raise RuntimeError("step() called before reset(): call reset() first")
        slot = self._slot
        if not isinstance(actions, dict):
            raise TypeError("actions must be a dict {agent name: action}, got "
                            f"{type(actions).__name__}")
        if not actions.keys() <= slot.keys():
            unknown = sorted(k for k in actions if k not in slot)
            raise ValueError(f"actions for unknown agents {unknown}; agents are "
                             f"{self.possible_agents}")
        agents = self.agents
        if not agents:
            return {}, {}, {}, {}, {}
        before = self.core.alive[0].tolist()  # slots acting on this step
        absorb = self.death_mode == "absorb"
        # "remove": `agents` are exactly the slots alive (acting) now
        acting = [a for a in agents if before[slot[a]]] if absorb else agents
        try:
            values = [actions[a] for a in acting]
        except KeyError:
            missing = [a for a in acting if a not in actions]
            raise ValueError(f"actions must cover every acting agent {acting}; missing "
                             f"{missing}") from None
        step = self.core.step(agent_to_core(self.spec, [slot[a] for a in acting], values))
        ended = bool(step.group_done[0])
        self._next = step if ended else None
        view = step.final_obs if ended else step.obs
        individual, group = step.reward[0].tolist(), float(step.group_reward[0])
        after = step.alive[0].tolist()
        if after != before and not ended:
            self._check_no_return(before, after)
        if absorb:
            truncated = bool(step.group_truncated[0])
            terms = dict.fromkeys(agents, ended and not truncated)
            truncs = dict.fromkeys(agents, truncated)
        else:
            term, trunc = step.terminated[0].tolist(), step.truncated[0].tolist()
            terms, truncs = {}, {}  # filled in the loop below, in the order of `agents`
        mask = step.action_mask
        if len(view) == 1:  # one component: each agent gets a row of one fresh array
            rows = view[0][0].copy()
        else:  # fresh arrays: agents get views of them
            names = [o.name for _, o in self._components]
            parts = [view[k][0].copy() for k, _ in self._components]
        obs, rewards, infos = {}, {}, {}
        for a in agents:
            i = slot[a]
            if not absorb:
                terms[a], truncs[a] = term[i], trunc[i]
            if before[i]:
                obs[a] = rows[i] if len(view) == 1 else {
                    name: part[i] for name, part in zip(names, parts, strict=True)}
                own = individual[i]
                rewards[a] = own + group
                infos[a] = {"individual_reward": own, "group_reward": group}
                if mask is not None:
                    infos[a]["action_mask"] = agent_mask(self.spec, mask[0, i])
            else:  # absorbed: ended earlier, kept in `agents` until the group ends
                obs[a] = self._zero_obs()
                rewards[a] = 0.0
                infos[a] = {"individual_reward": 0.0, "group_reward": 0.0}
                if mask is not None:  # its action is ignored: any will do
                    infos[a]["action_mask"] = agent_mask(self.spec, np.ones(mask.shape[-1],
                                                                            bool))
        # agents that joined on this step (tasks that spawn agents): reported from now on. One
        # joining on the episode's last step is not: PettingZoo's tools cannot take an agent
        # that appears already ended (its AEC conversion fails on it).
        joined = [] if ended or after == before else [
            a for a, on, was in zip(self.possible_agents, after, before, strict=True)
            if on and not was and a not in obs]
        for a in joined:  # its individual reward on joining; the group's goes to those who acted
            i = slot[a]
            obs[a] = self._agent_obs(view, i)
            rewards[a], terms[a], truncs[a] = individual[i], False, False
            infos[a] = {"individual_reward": individual[i], "group_reward": 0.0}
            if mask is not None:
                infos[a]["action_mask"] = agent_mask(self.spec, mask[0, slot[a]])
        if ended:
            self.agents = []
        elif not absorb:  # a new list each step, as before
            self.agents = list(agents) if after == before else [
                a for a, on in zip(self.possible_agents, after, strict=True) if on]
        elif joined:
            self.agents = [a for a in self.possible_agents if a in obs]
        self._last = (view, step.alive[0] if not ended else
                      np.array(before) & ~(step.terminated[0]))
        self._render.advance(group, ended)
        return obs, rewards, terms, truncs, infos

    def _check_no_return(self, before: list[bool], after: list[bool]) -> None:
        """A PettingZoo agent that has ended never comes back (its name is its slot's), so a
        task that puts a newcomer in a slot used earlier in the episode cannot be shown here."""
        back = [i for i, (on, was) in enumerate(zip(after, before, strict=True))
                if on and not was and i in self._left]
        if back:
            i = back[0]
            raise ValueError(
                f"{type(self.core).__name__} put a new agent in slot {i} after {self.core.t[0]} "
                f"steps, where agent_{i} ended earlier in the episode: a PettingZoo agent that "
                f"has ended cannot return. Give each newcomer a slot not yet used in the "
                f"episode (max_agents slots), or use the Gymnasium view or the core, which take "
                f"reused slots")
        self._left.update(i for i, (on, was) in enumerate(zip(after, before, strict=True))
                          if was and not on)

    def render(self):
        """An (H, W, 3) uint8 frame with render_mode="rgb_array"; draws the window with "human"."""
        return self._render.render()

    def _slots(self):
        return [self._slot[a] for a in self.agents]

    def state(self) -> np.ndarray:
        """All slots' observations (zeros for slots not acting) and the alive mask, flattened."""
        if self._last is None:
            raise RuntimeError("state() called before reset()")
        view, alive = self._last
        parts = [np.where(alive.reshape((-1,) + (1,) * (o.ndim - 2)), o[0], 0)
                 .reshape(len(alive), -1).astype(np.float32) for o in view]
        return np.concatenate(parts + [alive[:, None].astype(np.float32)], axis=1).reshape(-1)

    def close(self):
        self._render.close()
        self.core.close()

    def _agent_obs(self, view, i):
        if len(view) == 1:
            return view[0][0, i].copy()
        return {o.name: view[k][0, i].copy() for k, o in self._components}

    def _zero_obs(self):
        if len(self.spec.obs) == 1:
            return np.full(self.spec.obs[0].shape, self.spec.obs[0].blank, self.spec.obs[0].dtype)
        return {o.name: np.full(o.shape, o.blank, o.dtype) for _, o in self._components}

    def _reset_info(self, step, i):
        """No reward yet (`step` may be the last step of the episode before, whose core call
        started this one), and the first step's legal moves."""
        info = {"individual_reward": 0.0, "group_reward": 0.0}
        if step.action_mask is not None:
            info["action_mask"] = agent_mask(self.spec, step.action_mask[0, i])
        return info


class _CheckedAEC(parallel_to_aec_wrapper):
    """PettingZoo's parallel-to-AEC conversion, with each action checked on its agent's turn:
    unchecked, a bad action is stored, raises on the last agent's turn, and again on every
    retry (it stays stored) until `reset`."""

    def step(self, action):
        agent = self.agent_selection
        if not (self.terminations[agent] or self.truncations[agent]):
            self.env.check_action(agent, action)
        super().step(action)


def aec_env(task: str | type = "Goal-v0", **kwargs):
    """The AEC (turn-based) form of the same group, for tools that need one (what PettingZoo's
    `parallel_to_aec` makes, with each action checked on its agent's turn)."""
    return OrderEnforcingWrapper(_CheckedAEC(GroupParallelEnv(task, **kwargs)))


# PettingZoo's module convention (`pettingzoo.butterfly.pistonball_v6.parallel_env()`, `.env()`),
# which its tests (`max_cycles_test(module)`) and wrappers expect: Goal by default, `task=` others
parallel_env = GroupParallelEnv
env = aec_env
