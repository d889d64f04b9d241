"""Probe tasks: tiny games built so that one mechanism of MA-POCA decides the outcome, as guards
in the benchmark's break matrix (`benchmarks/breaks.py`). Not part of the `envs` suite.

`CrowdCredit` guards the counterfactual baseline b_i, `HiddenHeadcount` the critic's use of the
alive mask.

`CrowdCredit`: A one-step game of N agents: each sees a
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

`HiddenHeadcount`: the same one-step answers, by a few "cued" agents that are always present
(the score is the fraction of them right). The other slots hold "helpers" that join each
episode at random, see nothing (all-zero observations, exactly what a learner shows for an
absent slot) and have one legal action; each helper present is paid a large individual reward,
so every return carries the random headcount. Only the alive mask tells who came: the critic,
with its attention and agent count over the agents alive, subtracts the headcount from V and
every b_i; one that ignores `alive` (the `mask` break) sees the same slots whoever came, the
headcount's noise stays in every advantage, and the policy again settles short.
"""

from __future__ import annotations

import numpy as np

from envs.core import GroupEnv, GroupSpec, ObsSpec, check_int, check_number


class _CueGame(GroupEnv):
    """What both probes share: one step in which agents answer a one-hot cue, right when the
    answer (the first discrete branch) is (3 c + 1) mod `num_cues` for cue c (not the identity)."""

    def __init__(self, spec: GroupSpec, num_envs: int):
        super().__init__(spec, num_envs)
        M = spec.discrete_branches[0]
        self.cue = np.zeros((self.num_envs, spec.num_agents), np.int64)
        self.right = (np.arange(M) * 3 + 1) % M  # the right answer per cue
        self.one_hot = np.eye(M, dtype=np.float32)

    def _draw_cues(self, idx, u):
        """Cues of envs `idx` from uniforms u [len(idx), num_agents]."""
        M = self.spec.discrete_branches[0]
        self.cue[idx] = np.minimum((u * M).astype(np.int64), M - 1)

    def _answered(self, disc) -> np.ndarray:
        return disc[..., 0] == self.right[self.cue]

    def _end_episode(self) -> np.ndarray:
        """One step: every agent present ends (terminated), the group resets."""
        terminated = self.alive.copy()
        self.alive[:] = False
        return terminated

    def _observe(self, rows=slice(None)):
        return (self.one_hot[self.cue[rows]],)


class CrowdCredit(_CueGame):
    """One-step cue game with forced random fumbles paid to the whole crowd (see the module).

    Observation per agent: the one-hot cue (`num_cues`). Actions: two discrete branches, the
    answer (`num_cues` actions) and the fumble (2 actions, only the forced one legal).
    """

    def __init__(self, num_envs: int = 1, num_agents: int = 32, num_cues: int = 2,
                 fumble: float = 4.0):
        N = check_int("num_agents", num_agents, 1, 64)
        M = check_int("num_cues", num_cues, 2)
        self.fumble = check_number("fumble", fumble, 0.0)
        spec = GroupSpec(num_agents=N, obs=(ObsSpec("cue", "vector", (M,)),),
                         continuous_size=0, discrete_branches=(M, 2), max_steps=1)
        super().__init__(spec, num_envs)
        self.forced = np.zeros((self.num_envs, N), np.int64)  # the fumble's only legal action

    def _reset_envs(self, idx):
        N = self.spec.num_agents
        u = self.uniform(idx, 2 * N)
        self._draw_cues(idx, u[:, :N])
        self.forced[idx] = (u[:, N:] < 0.5).astype(np.int64)
        self.alive[idx] = True

    def _step(self, cont, disc):
        N = self.spec.num_agents
        group = (self._answered(disc).sum(1) / N).astype(np.float32)
        # the forced fumble is paid: the mask allows no other (step() refuses it)
        reward = (self.fumble / N * (2 * self.forced - 1)).astype(np.float32)
        terminated = self._end_episode()
        return reward, group, terminated, np.zeros_like(terminated)

    def _action_mask(self):
        M = self.spec.discrete_branches[0]
        mask = np.ones((self.num_envs, self.spec.num_agents, M + 2), bool)
        mask[..., M] = self.forced == 0
        mask[..., M + 1] = self.forced == 1
        return mask


class HiddenHeadcount(_CueGame):
    """One-step cue game for `num_cued` agents; the other slots are blind helpers present at
    random, each paid `bonus` / `num_agents` (see the module).

    Observation per slot: the one-hot cue (`num_cues`), all zeros for helpers. One discrete
    branch, the answer; a helper's only legal action is 0, present or not.
    """

    def __init__(self, num_envs: int = 1, num_agents: int = 16, num_cued: int = 4,
                 num_cues: int = 2, present: float = 0.5, bonus: float = 64.0):
        N = check_int("num_agents", num_agents, 2, 64)
        self.num_cued = check_int("num_cued", num_cued, 1, N - 1)
        M = check_int("num_cues", num_cues, 2)
        self.present = check_number("present", present, 0.0, 1.0)
        self.bonus = check_number("bonus", bonus, 0.0)
        spec = GroupSpec(num_agents=N, obs=(ObsSpec("cue", "vector", (M,)),),
                         continuous_size=0, discrete_branches=(M,), max_steps=1)
        super().__init__(spec, num_envs)
        self.cued = np.arange(N) < self.num_cued
        self.mask = np.ones((self.num_envs, N, M), bool)
        self.mask[:, ~self.cued, 1:] = False  # helpers: action 0 only

    def _reset_envs(self, idx):
        N = self.spec.num_agents
        u = self.uniform(idx, 2 * N)
        self._draw_cues(idx, u[:, :N])
        self.alive[idx] = self.cued | (u[:, N:] < self.present)

    def _step(self, cont, disc):
        answered = self._answered(disc) & self.cued
        group = (answered.sum(1) / self.num_cued).astype(np.float32)
        reward = (self.bonus / self.spec.num_agents * (self.alive & ~self.cued)).astype(
            np.float32)
        terminated = self._end_episode()
        return reward, group, terminated, np.zeros_like(terminated)

    def _observe(self, rows=slice(None)):
        return (self.one_hot[self.cue[rows]] * self.cued[:, None],)

    def _action_mask(self):
        return self.mask.copy()
