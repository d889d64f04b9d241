"""Goal: ML-Agents' multi-agent test environment, batched, with a group scoreboard.

Rebuilt from the rules of ML-Agents' `MultiAgentEnvironment` (mlagents/trainers/tests/
simple_test_envs.py). Defaults (`num_agents=2`, `action_sizes=(0, 1)`, `reward_mode="group"`):

| | |
|---|---|
| Import | `import envs; pettingzoo.make("parallel", "groupenvs/goal-v0")` |
| Actions | discrete, continuous or both (`action_sizes=(C, B)`) |
| Parallel API | yes (the AEC form is registered too) |
| Manual control | agent_0: `python -m envs.play Goal-v0 --render human --keyboard` |
| Agents | `agents = ['agent_0', 'agent_1']` (`num_agents`: 1..64) |
| Action shape | `Discrete(2)` (see 1.) |
| Action values | 0: move by `-step_size`, 1: by `+step_size` (continuous: [-1, 1], clipped) |
| Observation shape | `(3,)`: the goal, then the group scoreboard (see 2.) |
| Observation values | [-1, 1]: goal -1 or +1, scoreboard fractions in [0, 1] (images: uint8) |
| Agents leaving | an agent that reaches the edges terminates; see 3. for `death_mode` |

1. `B` discrete branches of 2: `MultiDiscrete([2] * B)` for B > 1; `C` continuous dims:
   `Box(-1, 1, (C,))`; both: a `Dict` with keys `continuous` and `discrete`.
2. `(obs_size + 2,)`, `(obs_size,)` in `"mlagents"` mode (no scoreboard). With images
   (`num_visual`, uint8 `visual_size`) or entity lists (`num_entity_lists`, `(max_entities,
   entity_size)` in [-1, 1]) the observation is a `Dict` of those components.
3. `death_mode="remove"` (the default): the agent is reported once, in the step it
   ends, then leaves `agents`; `death_mode="absorb"` keeps it in `agents` with zero observations
   and rewards until the group ends. In the batched core and the Gymnasium views its `alive`
   entry turns False. The episode goes on until every agent has left (or `max_steps`).
Gymnasium: `gymnasium.make("groupenvs/Goal-v0")` (joint control of the group);
`gymnasium.make_vec(..., num_envs=N)` or `envs.make_group("Goal-v0", num_envs=N)` for batches.

>>> import pettingzoo, envs
>>> env = pettingzoo.make("parallel", "groupenvs/goal-v0")
>>> env.possible_agents
['agent_0', 'agent_1']
>>> env.action_space("agent_0"), env.observation_space("agent_0")
(Discrete(2), Box(-1.0, 1.0, (3,), float32))

agent_0 always moves up and reaches the edge in 5 steps; agent_1 goes up and down and stays:

>>> obs, infos = env.reset(seed=0)
>>> for t in range(5):
...     obs, rewards, terminations, truncations, infos = env.step({"agent_0": 1, "agent_1": t % 2})
>>> terminations, env.agents
({'agent_0': True, 'agent_1': False}, ['agent_1'])
"""

from __future__ import annotations

import numpy as np

from envs import render
from envs.core import (
    GroupEnv,
    GroupSpec,
    ObsSpec,
    agent_any,
    agent_sum,
    check_bool,
    check_choice,
    check_int,
    check_number,
)

TIME_PENALTY = 0.01
SUCCESS_REWARD = 1.06  # ML-Agents: 1 + MIN_STEPS * TIME_PENALTY with MIN_STEPS = 6
REWARD_MODES = ("group", "mlagents")
# ML-Agents' test environment exactly (its rewards, one goal for the group): the settings of the
# parity benchmark cases and tests
MLAGENTS_PARITY = {"reward_mode": "mlagents", "shared_goal": True}
_EDGE = 1.0 - 1e-5  # a coordinate within float error of +-1 sits on the edge
_COST = np.float32(-TIME_PENALTY)


class GoalGroup(GroupEnv):
    """A group of agents that must each walk to the side their goal points to.

    ## Description
    Each agent owns a point with `D = C + B` coordinates, all starting at 0. Every episode it draws
    a goal `g` in {-1, +1}. The agent finishes, and leaves the episode, as soon as every coordinate
    sits on an edge (+-1); it did well if the edges are on its goal's side. The group's episode
    ends when every agent has finished (or at `max_steps`). Solving it needs 5 steps per agent
    with the default `step_size`.

    ## Action Space
    `C` continuous values in [-1, 1] (actions outside are clipped), each moving one coordinate by
    `value * step_size`, and `B` discrete branches of size 2, each moving one coordinate by
    `+step_size` (1) or `-step_size` (0). Coordinates are clamped to [-1, 1].

    ## Observation Space
    A tuple of components per agent, in this order (each can be switched on or off, so every
    combination of ML-Agents' test environments can be built):
    - `vector` (`num_vector=1`), float32 `(obs_size [+ 2],)`: `obs_size` copies of its goal; in
      `"group"` reward mode followed by the group scoreboard, the fractions of the group that
      finished on the goal side and on the wrong side so far (partial credit when only some
      coordinates are on the goal side). The scoreboard is what lets a learner credit an agent
      that already left: its outcome stays visible to the agents that remain, so group mode
      needs the vector.
    - `image_0`, `image_1` (`num_visual` of them), uint8 `visual_size` (H, W, C): black, with a
      bright square at a random place (new each step) inside the left half for goal -1 and the
      right half for +1. No single pixel gives the goal away; the image as a whole does.
    - `entities_0`, `entities_1` (`num_entity_lists` of them), float32 `(max_entities,
      entity_size)`: each step a random number (1..max_entities) of rows is present, at the
      front; every present row is filled with the goal, absent rows are all zero (that is how a
      learner tells them apart: a present row is never all zero).
    With `show_steps` (the memory variant), the goal is shown only in the first `show_steps`
    observations of an episode; after that the goal entries are 0 and images are blank, so the
    task needs memory. Entity lists always show the goal, so they do not combine with it.

    ## Rewards
    The outcome of a finished agent is `mean_d(pos_d * g)` (1: every coordinate on the goal side).
    - `reward_mode="group"` (default): individual reward -0.01 for every step an agent acts; when
      the last agent finishes the group reward is the mean outcome of all agents.
    - `reward_mode="mlagents"`: ML-Agents' rules exactly. With `r = 1.06 * outcome`, an agent that
      finishes while others still act gets `min(-0.01, r)` individually; the last one to finish
      (the highest index among those finishing together) gets 0 individually and the group
      reward `r`; every other acting step costs -0.01. The observation is the goal alone.

    ## Starting State
    Every coordinate at 0; goals drawn per agent (`shared_goal=True`: one per group, which is what
    ML-Agents' test environment does in effect).

    ## Episode End
    Agents terminate individually when they reach the edges. The group terminates when the last
    agent does; after `max_steps` steps the remaining agents are truncated and no group reward is
    paid.

    ## Arguments
    >>> import gymnasium, envs
    >>> env = gymnasium.make("groupenvs/Goal-v0", num_agents=3, action_sizes=(1, 1))

    | argument | default | meaning |
    |---|---|---|
    | `num_envs` | 1 | episodes stepped at once (native core only) |
    | `num_agents` | 2 | agents per group, 1..64 |
    | `action_sizes` | (0, 1) | `(C, B)`: continuous dims and discrete branches of 2 |
    | `step_size` | 0.2 | largest move per step, in (0, 1] |
    | `obs_size` | 1 | copies of the goal in the observation |
    | `reward_mode` | "group" | "group" or "mlagents" |
    | `shared_goal` | False | one goal per group instead of one per agent |
    | `max_steps` | 100 | steps before the group is truncated |
    | `num_vector` | 1 | 0 or 1 vector observations |
    | `num_visual` | 0 | 0-2 image observations (GoalVisual-v0: 1) |
    | `visual_size` | (20, 20, 3) | image height, width, channels (1 or 3) |
    | `num_entity_lists` | 0 | 0-2 variable-length observations (GoalEntities-v0: 1) |
    | `max_entities` | 10 | rows of an entity list |
    | `entity_size` | 5 | columns of an entity list |
    | `show_steps` | None | goal shown in only this many first observations (GoalMemory-v0: 3) |

    ## Vectorized environment
    The class is batched itself: `GoalGroup(num_envs=N)` (`envs.make_group("Goal-v0",
    num_envs=N)`) steps N independent groups at once, every array `[N, A, ...]` with an `alive`
    mask `[N, A]`; a group that ends is reset within the same `step` (`final_obs` keeps its last
    view), and env i plays the same episodes whatever N is. `gymnasium.make_vec(
    "groupenvs/Goal-v0", num_envs=N)` wraps that core as a native `VectorEnv` (one joint
    observation and action per group, no copies of the single-group env). Its autoreset mode is
    `AutoresetMode.NEXT_STEP` by default, as Gymnasium's vector wrappers expect: an ended group
    shows its last observation, and the next step ignores its action and returns the first
    observation of its next episode with reward 0. `make_vec(..., autoreset_mode=
    AutoresetMode.SAME_STEP)` returns the new episode at once and the ended one's last view in
    `infos["final_obs"]`.

    >>> vec = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=4)
    >>> vec.num_envs, vec.metadata["autoreset_mode"]
    (4, <AutoresetMode.NEXT_STEP: 'NextStep'>)
    >>> vec.single_observation_space
    Dict('alive': MultiBinary(2), 'vector': Box(-1.0, 1.0, (2, 3), float32))
    >>> envs.make_group("Goal-v0", num_envs=4).reset(seed=0).alive.shape
    (4, 2)

    ## Version History
    - v0: initial release.
    """

    def __init__(self, num_envs: int = 1, num_agents: int = 2, action_sizes=(0, 1),
                 step_size: float = 0.2, obs_size: int = 1, reward_mode: str = "group",
                 shared_goal: bool = False, max_steps: int = 100, num_vector: int = 1,
                 num_visual: int = 0, visual_size=(20, 20, 3), num_entity_lists: int = 0,
                 max_entities: int = 10, entity_size: int = 5, show_steps: int | None = None):
        A = check_int("num_agents", num_agents, 1, 64)
        if (not isinstance(action_sizes, (tuple, list)) or len(action_sizes) != 2
                or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0
                       for s in action_sizes) or sum(action_sizes) < 1):
            raise ValueError("action_sizes must be (continuous dims, discrete branches) of "
                             f"non-negative ints with at least one action, got {action_sizes!r}")
        step_size = check_number("step_size", step_size, 0, 1, low_open=True)
        obs_size = check_int("obs_size", obs_size, 1)
        check_choice("reward_mode", reward_mode, REWARD_MODES)
        shared_goal = check_bool("shared_goal", shared_goal)
        self.C, self.B = int(action_sizes[0]), int(action_sizes[1])
        self.step_size = step_size
        self.obs_size = obs_size
        self.reward_mode = reward_mode
        self.shared_goal = shared_goal
        vec_size = obs_size + (2 if reward_mode == "group" else 0)
        self.num_vector = check_int("num_vector", num_vector, 0, 1)
        self.num_visual = check_int("num_visual", num_visual, 0, 2)
        self.num_entity_lists = check_int("num_entity_lists", num_entity_lists, 0, 2)
        if self.num_vector + self.num_visual + self.num_entity_lists == 0:
            raise ValueError("Goal needs at least one observation: set num_vector, num_visual or "
                             "num_entity_lists")
        if reward_mode == "group" and not self.num_vector:
            raise ValueError('reward_mode="group" needs num_vector=1: the vector carries the '
                             "group scoreboard that shows what agents who left achieved")
        if (not isinstance(visual_size, (tuple, list)) or len(visual_size) != 3
                or any(isinstance(v, bool) or not isinstance(v, (int, np.integer))
                       for v in visual_size)  # before comparing: ("a", 20, 3) too
                or visual_size[2] not in (1, 3) or min(visual_size[:2]) < 4):
            raise ValueError("visual_size must be (height, width, channels) with height and "
                             f"width >= 4 and 1 or 3 channels, got {visual_size!r}")
        self.visual_size = tuple(int(v) for v in visual_size)
        self.max_entities = check_int("max_entities", max_entities, 1)
        self.entity_size = check_int("entity_size", entity_size, 1)
        if show_steps is not None:
            show_steps = check_int("show_steps", show_steps, 1)
            if self.num_entity_lists:
                raise ValueError("show_steps (memory) does not combine with entity lists: their "
                                 "rows always carry the goal")
        self.show_steps = show_steps
        components = [ObsSpec("vector", "vector", (vec_size,))] if self.num_vector else []
        components += [ObsSpec(f"image_{i}", "image", self.visual_size, 0.0, 255.0)
                       for i in range(self.num_visual)]
        components += [ObsSpec(f"entities_{i}", "entities", (self.max_entities, self.entity_size))
                       for i in range(self.num_entity_lists)]
        spec = GroupSpec(num_agents=A, obs=tuple(components),
                         continuous_size=self.C, discrete_branches=(2,) * self.B,
                         max_steps=check_int("max_steps", max_steps, 1))
        super().__init__(spec, num_envs)
        E, D = self.num_envs, self.C + self.B
        self.D = D
        self.pos = np.zeros((E, A, D), dtype=np.float32)
        self.goal = np.ones((E, A), dtype=np.float32)
        # The observation is kept as state, [E, A, obs_size (+ 2 scoreboard columns)], so that
        # observing is one contiguous copy; the scoreboard changes only when agents finish.
        self.obs = np.zeros((E, A, vec_size), dtype=np.float32)
        self._slot = np.arange(A)
        self._disc_move = np.array([-self.step_size, self.step_size], dtype=np.float32)
        self._mean_d = np.full(D, 1.0 / D, dtype=np.float32)
        # one random bit per agent (the same bit for all with a shared goal)
        self._goal_bit = (np.zeros(A) if self.shared_goal else np.arange(A)).astype(np.uint64)
        # Scoreboard increments as matmuls over the group ([E, A] -> [E, A * vec_size], copied to
        # every agent's columns): goal side = (done + done * outcome) / 2, wrong = (done - ...) / 2.
        cols = np.zeros((2, obs_size + 2), dtype=np.float32)
        cols[0, obs_size:] = 0.5 / A  # from `done`
        cols[1, obs_size:] = [0.5 / A, -0.5 / A]  # from `done * outcome`
        self._board_from_done = np.tile(cols[0], (A, A))
        self._board_from_outcome = np.tile(cols[1], (A, A))
        self._final = {}  # env -> (pos, goal, t) of its last ended episode, for rendering

    def _reset_envs(self, idx):
        if self.record_final:  # a rendering view wants the ended episode's last frame
            self._final.update({e: (self.pos[e].copy(), self.goal[e].copy(), int(self.t[e]))
                                for e in idx.tolist()})
        bit = (self.random_bits(idx)[:, None] >> self._goal_bit) & np.uint64(1)  # [n, A]
        self.goal[idx] = 1.0 - 2.0 * bit
        self.pos[idx] = 0.0
        self.obs[idx] = 0.0
        self.obs[idx, :, :self.obs_size] = self.goal[idx, :, None]
        self.alive[idx] = True

    def _step(self, cont, disc):
        acting = self.alive  # [E, A], before this step
        moves = []
        if cont is not None:
            moves.append(cont * np.float32(self.step_size))
        if disc is not None:  # 1 -> +step_size, 0 -> -step_size
            moves.append(self._disc_move[disc])
        delta = moves[0] if len(moves) == 1 else np.concatenate(moves, axis=2)
        # acting as float32 once: the same 0/1 factors, without two mixed bool/float ufuncs
        acting_f = acting.astype(np.float32)
        delta *= acting_f[:, :, None]
        self.pos += delta
        np.minimum(self.pos, 1.0, out=self.pos)  # np.clip costs 2x more on small batches
        np.maximum(self.pos, -1.0, out=self.pos)
        on_edge = np.abs(self.pos) >= _EDGE  # [E, A, D]
        done_now = acting & (on_edge[:, :, 0] if self.D == 1 else _all_coords(on_edge))
        self.alive = acting ^ done_now  # done_now is a subset of acting
        step_cost = acting_f * _COST
        if not np.count_nonzero(done_now):
            return step_cost, np.zeros(self.num_envs, np.float32), done_now, self._no_limit()
        side = np.sign(self.pos[:, :, 0]) if self.D == 1 else np.sign(self.pos) @ self._mean_d
        outcome_now = side * self.goal  # [E, A]: 1 when every coordinate is on the goal side
        # Every env had an agent acting (ended groups restart at once), so a group with nobody
        # left has just seen its last agent finish.
        group_end = ~agent_any(self.alive)
        if self.reward_mode == "group":
            done_f = done_now.astype(np.float32)
            board_inc = (done_f @ self._board_from_done
                         + (done_f * outcome_now) @ self._board_from_outcome)
            self.obs += board_inc.reshape(self.obs.shape)
            # float32 sums of the 0.5 / A increments can round past 1 (1.0000001 when all 10 of
            # 10 agents win), out of the declared Box; the fractions themselves are at most 1
            board_cols = self.obs[:, :, self.obs_size:]
            np.minimum(board_cols, 1.0, out=board_cols)
            board = self.obs[:, 0, self.obs_size:]
            group_reward = group_end * (board[:, 0] - board[:, 1])  # = mean outcome
            return step_cost, group_reward.astype(np.float32), done_now, self._no_limit()
        r_term = np.float32(SUCCESS_REWARD) * outcome_now
        # ML-Agents steps agents in index order, so of those finishing together the highest index
        # is the one that finds nobody left: it alone carries the group reward.
        last = done_now & group_end[:, None] & (self._slot == self._last_index(done_now)[:, None])
        reward = np.where(done_now, np.minimum(-TIME_PENALTY, r_term), step_cost)
        reward = np.where(last, 0.0, reward).astype(np.float32)
        group_reward = agent_sum(last * r_term).astype(np.float32)
        return reward, group_reward, done_now, self._no_limit()

    def _no_limit(self):
        """Goal has no time limit of its own: nobody is truncated by the task itself."""
        return np.zeros((self.num_envs, self.max_agents), dtype=bool)

    def reference_policy(self) -> dict:
        """The scripted expert: every agent moves every coordinate toward its goal at full speed.

        Returns the action dict for all envs from the current (hidden) state, so it also solves
        the memory and visual variants. Each agent finishes on its goal side after
        `ceil(1 / step_size)` steps: group reward 1.0 (`"mlagents"` mode: 1.06).
        """
        actions = {}
        if self.C:
            actions["continuous"] = np.repeat(self.goal[:, :, None], self.C, axis=2)
        if self.B:
            actions["discrete"] = np.repeat(toward(self.goal)[:, :, None], self.B, axis=2)
        return actions

    def _last_index(self, mask):
        return self.max_agents - 1 - np.argmax(mask[:, ::-1], axis=1)

    def _observe(self, rows=slice(None)):
        if self.show_steps is None and not (self.num_visual or self.num_entity_lists):
            return (self.obs[rows].copy(),)  # plain Goal: one contiguous copy
        ids = self.env_ids[rows]
        t = self.t[ids]
        goal = self.goal[ids]  # [n, A]
        parts = []
        if self.show_steps is not None:
            hidden = t >= self.show_steps
            goal = np.where(hidden[:, None], np.float32(0), goal)
        if self.num_vector:
            vec = self.obs[rows].copy()
            if self.show_steps is not None:
                vec[:, :, :self.obs_size] = goal[:, :, None]
            parts.append(vec)
        parts += [self._image(ids, t, goal, i) for i in range(self.num_visual)]
        parts += [self._entities(ids, t, goal, i) for i in range(self.num_entity_lists)]
        return tuple(parts)

    def _image(self, ids, t, goal, which):
        """uint8 [n, A, H, W, C]: a bright square in the goal's half, at a random place."""
        H, W, C = self.visual_size
        side = max(1, min(H, W) // 6)
        u = self.uniform(ids, 2 * self.max_agents, step=t * 8 + which).reshape(len(ids), -1, 2)
        top = (u[..., 0] * (H - side + 1)).astype(np.int64)  # [n, A]
        left = (u[..., 1] * (W // 2 - side + 1)).astype(np.int64) + (goal > 0) * (W - W // 2)
        rows = np.arange(H) - top[..., None]  # [n, A, H]
        cols = np.arange(W) - left[..., None]
        lit = ((rows >= 0) & (rows < side))[..., :, None] & ((cols >= 0) & (cols < side))[
            ..., None, :] & (goal != 0)[..., None, None]  # [n, A, H, W]
        return np.repeat((lit * np.uint8(255))[..., None], C, axis=-1)

    def _entities(self, ids, t, goal, which):
        """float32 [n, A, max_entities, entity_size]: the first k rows hold the goal."""
        u = self.uniform(ids, self.max_agents, step=t * 8 + 2 + which)
        count = 1 + (u * self.max_entities).astype(np.int64)  # [n, A] in 1..max_entities
        present = np.arange(self.max_entities) < count[..., None]  # [n, A, max_entities]
        rows = np.where(present, goal[..., None], np.float32(0))
        return np.repeat(rows[..., None], self.entity_size, axis=-1)


    # -- rendering --
    def frame(self, env: int, group_return: float, final: bool = False):
        pos, goal, t = (self._final[env] if final else
                        (self.pos[env].copy(), self.goal[env].copy(), int(self.t[env])))
        A, D = pos.shape
        lane = max(6, min(36, 420 // (A * D)))
        width, height, top = 480, 56 + A * D * lane + 10, 56
        x0, x1 = 90, width - 30

        def x_of(p):
            return int(x0 + (p + 1) / 2 * (x1 - x0))

        def draw(pygame, surface):
            render.text(pygame, surface, f"step {t}   group return {group_return:+.2f}", (10, 12),
                        26)
            for a in range(A):
                finished = bool((np.abs(pos[a]) >= _EDGE).all())
                outcome = float(np.sign(pos[a]).mean() * goal[a])
                color = (render.ACTING if not finished else render.SUCCESS if outcome >= 1
                         else render.FAILURE if outcome <= -1 else render.PARTIAL)
                for d in range(D):
                    y = top + (a * D + d) * lane + lane // 2
                    pygame.draw.line(surface, render.TRACK, (x0, y), (x1, y), 2)
                    goal_x = x1 if goal[a] > 0 else x0
                    pygame.draw.rect(surface, render.SUCCESS,
                                     (goal_x - 3, y - lane // 3, 6, 2 * (lane // 3) + 1))
                    pygame.draw.circle(surface, color, (x_of(pos[a, d]), y), max(2, lane // 3))
                if lane >= 12:
                    render.text(pygame, surface, f"agent_{a}", (8, top + a * D * lane + 2), 18)

        return (width, height), draw


def toward(goal, wrong: bool = False):
    """The discrete action (int64, same shape as `goal`) that moves toward goal +-1 (or away)."""
    return ((np.asarray(goal) > 0) != wrong).astype(np.int64)


def _all_coords(on_edge: np.ndarray) -> np.ndarray:
    """bool [E, A, D] -> [E, A]: every coordinate set (a matmul beats .all over a short axis)."""
    return on_edge.astype(np.float32) @ np.ones(on_edge.shape[2], np.float32) == on_edge.shape[2]
