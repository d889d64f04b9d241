"""The rollout buffer [T, E, A, ...] and MA-POCA's returns, as pure functions of tensors.

Bootstrap rules (MA-POCA, Cohen et al., arXiv 2111.05992, §4), for an agent acting at step t of
env e:
- still acting at t+1 in the same episode: the lambda-recursion goes on;
- it ended but its group goes on: bootstrap from the *group's* value at t+1, V(s_{t+1}), computed
  from the agents that remain (posthumous credit: what the group achieves later reaches it);
- its group terminated at t: 0;
- its group was truncated at t: the value of the group's final observation;
- the rollout (or a `time_horizon` segment) ends: V(s_{t+1}).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Rollout:
    """One rollout of every env, time-major: what the agents saw and did at each step t, what
    the step paid, and how episodes ended (the critic's inputs for the bootstraps)."""

    obs: list[Tensor]  # each [T, E, A, *shape]
    alive: Tensor  # bool [T, E, A]: acting at t
    cont: Tensor | None  # [T, E, A, C] raw sampled continuous actions
    disc: Tensor | None  # long [T, E, A, B]
    log_prob: Tensor  # [T, E, A, C + B] under the policy that acted
    action_mask: Tensor | None  # bool [T, E, A, sum(branches)]
    team_reward: Tensor  # [T, E]: group reward + sum of the step's individual rewards
    group_done: Tensor  # bool [T, E]
    group_truncated: Tensor  # bool [T, E]
    starts: Tensor  # bool [T, E, A]: the agent's episode starts at t (its memory is zeroed)
    group_starts: Tensor  # bool [T, E]: the group's episode starts at t
    actor_memory: Tensor | None  # [T, E, A, m]: the actor's memory before step t
    next_obs: list[Tensor]  # each [E, A, *shape]: after the last step
    next_alive: Tensor  # bool [E, A]
    next_group_start: Tensor  # bool [E]: the group restarted after the last step
    final_obs: list[Tensor]  # each [n, A, *shape]: last view of the n truncated groups
    final_alive: Tensor  # bool [n, A]

    @property
    def agent_steps(self) -> int:
        return int(self.alive.sum())


@dataclass
class Estimates:
    """The critic over one rollout (`Trainer._estimates`), before any update."""

    value: Tensor  # [T, E]: V(s_t) (independent critic: V_i, [T, E, A])
    baseline: Tensor  # [T, E, A]: b_i(s_t, a_-i)
    next_value: Tensor  # [T, E] (or [T, E, A]): the group value step t bootstraps from
    critic_memory: Tensor | None  # [T, E, 1 + A, m]: before step t, per stream (V, each b_i)
    stream_starts: Tensor  # bool [T, E, 1 + A]: where each stream starts an episode


def team_reward(group_reward, reward):
    """[T, E] (or [E]): what every agent of a group learns from, the group reward plus the sum
    of the step's individual rewards (numpy or torch)."""
    return group_reward + reward.sum(axis=-1)


def next_values(value: Tensor, bootstrap: Tensor, final_value: Tensor, group_done: Tensor,
                group_truncated: Tensor) -> Tensor:
    """[T, E]: the group value each step bootstraps from.

    value [T, E] = V(s_t); bootstrap [E] = V(s_T) after the last step; final_value [n] = V of the
    truncated groups' final observations, in (t, e) order of `group_truncated`. Per-agent values
    (the independent critic: [T, E, A], [E, A], [n, A]) give [T, E, A].
    """
    following = torch.cat([value[1:], bootstrap[None]], 0)  # V(s_{t+1})
    done = group_done.reshape(group_done.shape + (1,) * (following.dim() - group_done.dim()))
    next_value = torch.where(done, torch.zeros_like(following), following)
    next_value[group_truncated] = final_value
    return next_value


def posthumous_bootstrap(next_value: Tensor, alive: Tensor, group_done: Tensor) -> Tensor:
    """[T, E, A]: the value each agent's return bootstraps from after step t.

    It is the group's next value for every agent, also for one that left at t while its group
    goes on: V(s_{t+1}) scores what the agents that remain will still achieve, and that is how
    an agent that is gone keeps receiving credit (the paper's posthumous credit assignment).
    """
    return next_value[..., None].expand(alive.shape)


def lambda_returns(team_reward: Tensor, value: Tensor, next_value: Tensor, alive: Tensor,
                   group_done: Tensor, gamma: float, lambd: float, time_horizon: int) -> Tensor:
    """Per-agent lambda-returns G [T, E, A] (entries of agents not acting are meaningless).

    G_t = r_t + gamma * ((1 - lambd) V_{t+1} + lambd G_{t+1}) while the agent goes on acting,
    G_t = r_t + gamma * next_value_t at the step it (or its group, or the segment) ends;
    next_value [T, E, A] is per agent (see `posthumous_bootstrap`).
    """
    T = team_reward.shape[0]
    steps = torch.arange(T, device=alive.device)
    segment_end = (steps + 1) % time_horizon == 0  # [T]
    goes_on = torch.zeros_like(alive)
    goes_on[:-1] = alive[:-1] & alive[1:]
    goes_on &= ~group_done[..., None] & ~segment_end[:, None, None]
    returns = torch.empty(alive.shape, dtype=value.dtype, device=value.device)
    later = torch.zeros(alive.shape[1:], dtype=value.dtype, device=value.device)
    for t in range(T - 1, -1, -1):
        bootstrap = next_value[t]
        later = team_reward[t, :, None] + gamma * torch.where(
            goes_on[t], (1 - lambd) * bootstrap + lambd * later, bootstrap)
        returns[t] = later
    return returns


def normalized(x: Tensor, mask: Tensor) -> Tensor:
    """(x - mean) / (std + 1e-10) over the entries where `mask` is set."""
    vals = x[mask]
    return (x - vals.mean()) / (vals.std(unbiased=False) + 1e-10)


def to_units(x: Tensor | None, length: int) -> Tensor | None:
    """[T, E, ...] -> [C * E, length, ...]: sequences of `length` steps of one env each, the
    time axis zero-padded to a multiple of `length` (padded steps have alive = False).

    >>> x = torch.arange(6).reshape(3, 2)  # x[t, e] = 2 t + e: T = 3 steps of E = 2 envs
    >>> to_units(x, 2).tolist()  # (steps 0-1, env 0), (steps 0-1, env 1), (step 2 + pad, env 0)...
    [[0, 2], [1, 3], [4, 0], [5, 0]]
    """
    if x is None:
        return None
    T, E = x.shape[:2]
    C = -(-T // length)
    if C * length > T:
        x = torch.cat([x, x.new_zeros((C * length - T,) + x.shape[1:])])
    return x.reshape(C, length, E, *x.shape[2:]).transpose(1, 2).reshape(C * E, length,
                                                                         *x.shape[2:])
