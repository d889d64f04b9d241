"""Probe tasks: tiny games built so that one mechanism of MA-POCA decides the outcome, as guards
in the benchmark's break matrix (`benchmarks/breaks.py`). Not part of the `envs` suite.

`CrowdCredit` guards the counterfactual baseline b_i. A one-step game of N agents: each sees a
cue and is paid for answering it right, through the group reward (the headline score,
(number right) / N, at most 1). Each agent also has a second action, a "fumble" s_i = -1 or +1,
that the env forces at random through the action mask (drawn per episode, in no observation),
paid as an individual reward K s_i / N. What every agent learns from is the team reward, group
reward plus all individual rewards, so each return carries the whole crowd's fumbles:
sum_j K s_j / N, zero on average and out of anyone's control.

  - With b_i(s, a_-i), which sees every other agent's action, the others' fumbles are subtracted
    exactly (a linear function of their action one-hots): agent i's advantage keeps its own
    answer and its own fumble only.
  - With V(s) in place of b_i (the `baseline` break), no observation holds the fumbles: each
    advantage carries the other N - 1 agents' fumbles, variance ~K^2 / N against the answer's
    1 / N^2. After the advantages are normalized by their spread, each agent's own part is
    ~sqrt(N) times smaller, and against a constant entropy bonus the policy settles short of
    answering every cue right (measured: README, "Break matrix").
"""

from __future__ import annotations

import numpy as np

from envs.core import GroupEnv, GroupSpec, ObsSpec, check_int, check_number


class CrowdCredit(GroupEnv):
    """One-step cue game with forced random fumbles paid to the whole crowd (see the module).

    Observation per agent: the one-hot cue (`num_cues`). Actions: two discrete branches, the
    answer (`num_cues` actions; right when it is (3 c + 1) mod `num_cues` for cue c, so not the
    identity) and the fumble (2 actions, only the forced one legal).
    """

    def __init__(self, num_envs: int = 1, num_agents: int = 32, num_cues: int = 2,
                 fumble: float = 4.0):
        N = check_int("num_agents", num_agents, 1, 64)
        M = check_int("num_cues", num_cues, 2)
        self.fumble = check_number("fumble", fumble, 0.0)
        spec = GroupSpec(num_agents=N, obs=(ObsSpec("cue", "vector", (M,)),),
                         continuous_size=0, discrete_branches=(M, 2), max_steps=1)
        super().__init__(spec, num_envs)
        self.cue = np.zeros((self.num_envs, N), np.int64)
        self.forced = np.zeros((self.num_envs, N), np.int64)  # the fumble's only legal action
        self.right = (np.arange(M) * 3 + 1) % M  # the right answer per cue
        self.one_hot = np.eye(M, dtype=np.float32)

    def _reset_envs(self, idx):
        N, M = self.spec.num_agents, self.spec.discrete_branches[0]
        u = self.uniform(idx, 2 * N)
        self.cue[idx] = np.minimum((u[:, :N] * M).astype(np.int64), M - 1)
        self.forced[idx] = (u[:, N:] < 0.5).astype(np.int64)
        self.alive[idx] = True

    def _step(self, cont, disc):
        E, N = self.num_envs, self.spec.num_agents
        answered = disc[..., 0] == self.right[self.cue]
        group = (answered.sum(1) / N).astype(np.float32)
        # the forced fumble is paid (the core does not enforce masks; learners only play it)
        reward = (self.fumble / N * (2 * self.forced - 1)).astype(np.float32)
        self.alive[:] = False  # one step: every agent ends, the group resets
        return reward, group, np.ones((E, N), bool), np.zeros((E, N), bool)

    def _observe(self, rows=slice(None)):
        return (self.one_hot[self.cue[rows]],)

    def _action_mask(self):
        M = self.spec.discrete_branches[0]
        mask = np.ones((self.num_envs, self.spec.num_agents, M + 2), bool)
        mask[..., M] = self.forced == 0
        mask[..., M + 1] = self.forced == 1
        return mask
