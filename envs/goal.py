"""Goal: ML-Agents' multi-agent test environment, batched, with a group scoreboard.

Rebuilt from the rules of ML-Agents' `MultiAgentEnvironment` (mlagents/trainers/tests/
simple_test_envs.py); see `shared/spec/poca-reference.md` §4.
"""

from __future__ import annotations

import numpy as np

from envs.core import GroupEnv, GroupSpec, ObsSpec, agent_any, agent_sum, check_choice, check_int

TIME_PENALTY = 0.01
SUCCESS_REWARD = 1.06  # ML-Agents: 1 + MIN_STEPS * TIME_PENALTY with MIN_STEPS = 6
REWARD_MODES = ("group", "mlagents")
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
    One float32 vector per agent: `obs_size` copies of its goal; in `"group"` reward mode followed
    by the group scoreboard, the fractions of the group that finished on the goal side and on the
    wrong side so far (partial credit when only some coordinates are on the goal side). The
    scoreboard is what lets a learner credit an agent that already left: its outcome stays visible
    to the agents that remain.

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

    ## Version History
    - v0: initial release.
    """

    def __init__(self, num_envs: int = 1, num_agents: int = 2, action_sizes=(0, 1),
                 step_size: float = 0.2, obs_size: int = 1, reward_mode: str = "group",
                 shared_goal: bool = False, max_steps: int = 100):
        A = check_int("num_agents", num_agents, 1, 64)
        if (not isinstance(action_sizes, (tuple, list)) or len(action_sizes) != 2
                or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0
                       for s in action_sizes) or sum(action_sizes) < 1):
            raise ValueError("action_sizes must be (continuous dims, discrete branches) of "
                             f"non-negative ints with at least one action, got {action_sizes!r}")
        if not (isinstance(step_size, (int, float)) and 0 < step_size <= 1):
            raise ValueError(f"step_size must be a number in (0, 1], got {step_size!r}")
        obs_size = check_int("obs_size", obs_size, 1)
        check_choice("reward_mode", reward_mode, REWARD_MODES)
        if not isinstance(shared_goal, (bool, np.bool_)):
            raise TypeError(f"shared_goal must be a bool, got {shared_goal!r}")
        self.C, self.B = int(action_sizes[0]), int(action_sizes[1])
        self.step_size = float(step_size)
        self.obs_size = obs_size
        self.reward_mode = reward_mode
        self.shared_goal = bool(shared_goal)
        vec_size = obs_size + (2 if reward_mode == "group" else 0)
        spec = GroupSpec(num_agents=A, obs=(ObsSpec("vector", "vector", (vec_size,)),),
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

    def _reset_envs(self, idx):
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
        delta *= acting[:, :, None]
        self.pos += delta
        np.minimum(self.pos, 1.0, out=self.pos)  # np.clip costs 2x more on small batches
        np.maximum(self.pos, -1.0, out=self.pos)
        on_edge = np.abs(self.pos) >= _EDGE  # [E, A, D]
        done_now = acting & (on_edge[:, :, 0] if self.D == 1 else _all_coords(on_edge))
        self.alive = acting ^ done_now  # done_now is a subset of acting
        step_cost = acting * _COST
        if not np.logical_or.reduce(done_now, axis=None):
            return step_cost, np.zeros(self.num_envs, np.float32), done_now
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
            board = self.obs[:, 0, self.obs_size:]
            group_reward = group_end * (board[:, 0] - board[:, 1])  # = mean outcome
            return step_cost, group_reward.astype(np.float32), done_now
        r_term = np.float32(SUCCESS_REWARD) * outcome_now
        # ML-Agents steps agents in index order, so of those finishing together the highest index
        # is the one that finds nobody left: it alone carries the group reward.
        last = done_now & group_end[:, None] & (self._slot == self._last_index(done_now)[:, None])
        reward = np.where(done_now, np.minimum(-TIME_PENALTY, r_term), step_cost)
        reward = np.where(last, 0.0, reward).astype(np.float32)
        group_reward = agent_sum(last * r_term).astype(np.float32)
        return reward, group_reward, done_now

    def _last_index(self, mask):
        return self.max_agents - 1 - np.argmax(mask[:, ::-1], axis=1)

    def _observe(self, rows=slice(None)):
        return (self.obs[rows].copy(),)


def _all_coords(on_edge: np.ndarray) -> np.ndarray:
    """bool [E, A, D] -> [E, A]: every coordinate set (a matmul beats .all over a short axis)."""
    return on_edge.astype(np.float32) @ np.ones(on_edge.shape[2], np.float32) == on_edge.shape[2]
