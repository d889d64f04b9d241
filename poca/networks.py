"""MA-POCA's networks: the shared actor and the critic (group value and baselines).

Shapes: `N` groups (time steps x envs flattened), `A` agent slots, `present`/`alive` bool masks.
The critic attends over the agents that are alive and nothing else, which is what lets one network
serve groups whose size changes as agents leave (MA-POCA paper, arXiv 2111.05992;
ML-Agents' ml-agents/mlagents/trainers/torch_entities/networks.py, MultiAgentNetworkBody).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from envs.core import GroupSpec
from poca.attention import ResidualSelfAttention, entity_embedding
from poca.config import NetworkSettings
from poca.encoders import ObservationEncoder, RunningNorm


def mlp(in_size: int, hidden: int, layers: int) -> nn.Sequential:
    """`layers` x (Linear + Swish): ML-Agents' LinearEncoder."""
    mods = []
    for i in range(layers):
        lin = nn.Linear(in_size if i == 0 else hidden, hidden)
        nn.init.kaiming_normal_(lin.weight, nonlinearity="linear")
        nn.init.zeros_(lin.bias)
        mods += [lin, nn.SiLU()]
    return nn.Sequential(*mods)


class ActionDist:
    """Gaussian continuous actions and categorical discrete branches of a batch of agents."""

    def __init__(self, mean: Tensor | None, log_std: Tensor | None, logits: list[Tensor]):
        self.mean, self.log_std, self.logits = mean, log_std, logits

    def sample(self, generator: torch.Generator | None = None, deterministic: bool = False):
        cont = disc = None
        if self.mean is not None:
            noise = torch.randn(self.mean.shape, generator=generator, device=self.mean.device)
            cont = self.mean if deterministic else self.mean + noise * self.log_std.exp()
        if self.logits:
            disc = torch.stack([
                logits.argmax(-1) if deterministic else torch.multinomial(
                    logits.softmax(-1).reshape(-1, logits.shape[-1]), 1, generator=generator
                ).view(logits.shape[:-1])
                for logits in self.logits], dim=-1)
        return cont, disc

    def log_prob(self, cont: Tensor | None, disc: Tensor | None) -> Tensor:
        """[..., C + B]: one log-probability per continuous dim and per discrete branch."""
        parts = []
        if self.mean is not None:
            std = self.log_std.exp()
            parts.append(-((cont - self.mean) ** 2) / (2 * std**2) - self.log_std
                         - 0.5 * math.log(2 * math.pi))
        for branch, logits in enumerate(self.logits):
            parts.append(logits.log_softmax(-1).gather(-1, disc[..., branch:branch + 1]))
        return torch.cat(parts, dim=-1)

    def entropy(self) -> Tensor:
        """[...]: mean Gaussian entropy over continuous dims + sum over discrete branches."""
        total = 0.0
        if self.mean is not None:
            per_dim = 0.5 + 0.5 * math.log(2 * math.pi) + self.log_std
            total = per_dim.mean().expand(self.mean.shape[:-1])
        for logits in self.logits:
            total = total + -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1)
        return total


class Memory(nn.Module):
    """An LSTM unrolled over time whose state is zeroed where an episode starts.

    x [L, B, in], memory [B, m] (h and c side by side), starts bool [L, B] ->
    (outputs [L, B, m / 2], memory before each step [L, B, m] (after zeroing at starts),
    memory after each step [L, B, m]). `after[t]` is what step t left behind, before any
    zeroing for a new episode at t + 1: the state to bootstrap a time-limit ending from.
    """

    def __init__(self, in_size: int, memory_size: int):
        super().__init__()
        self.cell = nn.LSTMCell(in_size, memory_size // 2)
        for name, param in self.cell.named_parameters():
            if "weight" in name:
                for block in param.data.chunk(4, 0):
                    nn.init.xavier_uniform_(block)
            else:
                param.data.zero_()
                param.data[memory_size // 2:memory_size] = 0.5  # forget gate (+1 over 2 biases)

    def forward(self, x: Tensor, memory: Tensor, starts: Tensor):
        h, c = memory.chunk(2, -1)
        outputs, before, after = [], [], []
        for t in range(x.shape[0]):
            keep = (~starts[t]).unsqueeze(-1).to(x.dtype)
            h, c = h * keep, c * keep
            before.append(torch.cat([h, c], -1))
            h, c = self.cell(x[t], (h, c))
            outputs.append(h)
            after.append(torch.cat([h, c], -1))
        return torch.stack(outputs), torch.stack(before), torch.stack(after)


def zero_memory(memory: Memory | None, *batch: int, device=None) -> Tensor | None:
    """The LSTM state [*batch, m] an episode starts from (h and c zero); None without memory."""
    if memory is None:
        return None
    return torch.zeros(*batch, 2 * memory.cell.hidden_size, device=device)


def memory_after_body(net: NetworkSettings) -> tuple[Memory | None, int]:
    """The optional LSTM after a network's body (`network_settings.memory`), and the width of
    what then reaches the heads."""
    if net.memory is None:
        return None, net.hidden_units
    return Memory(net.hidden_units, net.memory.memory_size), net.memory.memory_size // 2


def _unroll(memory_net: Memory, x: Tensor, memory: Tensor, starts: Tensor):
    """Run `memory_net` over x [L, *B, in] with memory [*B, m] and starts [L, *B]
    -> (outputs [L, *B, m / 2], memory before each step, memory after each step [L, *B, m])."""
    L, batch = x.shape[0], x.shape[1:-1]
    out, before, after = memory_net(x.reshape(L, -1, x.shape[-1]),
                                    memory.reshape(-1, memory.shape[-1]), starts.reshape(L, -1))
    return (out.reshape(L, *batch, -1), before.reshape(L, *batch, -1),
            after.reshape(L, *batch, -1))


class Actor(nn.Module):
    """The shared policy: each agent acts on its own observation only (and its memory)."""

    def __init__(self, spec: GroupSpec, net: NetworkSettings):
        super().__init__()
        C, branches = spec.action_sizes
        self.branches = branches
        hidden = net.hidden_units
        self.encoder = ObservationEncoder(spec.obs, hidden, net.normalize, net.vis_encode_type)
        self.body = mlp(self.encoder.size, hidden, net.num_layers)
        self.memory, out = memory_after_body(net)
        self.mu = nn.Linear(out, C) if C else None
        self.log_std = nn.Parameter(torch.zeros(C)) if C else None
        self.logits = nn.Linear(out, sum(branches)) if branches else None
        for head, gain in ((self.mu, 0.2), (self.logits, 0.1)):
            if head is not None:
                nn.init.kaiming_normal_(head.weight, nonlinearity="linear")
                head.weight.data *= gain
                nn.init.zeros_(head.bias)

    def forward(self, obs: list[Tensor], action_mask: Tensor | None = None,
                memory: Tensor | None = None, starts: Tensor | None = None):
        """-> (ActionDist, memory after the last step or None).

        With memory, inputs are time-major [L, *batch, ...], memory [*batch, m], starts
        [L, *batch]; without, any leading dims.
        """
        features = self.body(self.encoder(obs))
        final = None
        if self.memory is not None:
            features, _, after = _unroll(self.memory, features, memory, starts)
            final = after[-1]
        mean = self.mu(features) if self.mu is not None else None
        logits = []
        if self.logits is not None:
            flat = self.logits(features)
            if action_mask is not None:  # a branch where nothing is legal (the waiting player
                # of a turn-based env) is then uniform, and carries no gradient
                flat = flat.masked_fill(~action_mask, -1e8)
            logits = list(flat.split(list(self.branches), dim=-1))
        return ActionDist(mean, self.log_std, logits), final


def _units(returns: RunningNorm, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(mean, std) of the running return statistics in `dtype` (they are float64), the std
    with its floor of 0.1; copies, which a later update leaves alone."""
    return (returns.mean[0].to(dtype, copy=True),
            returns.std()[0].clamp(min=0.1).to(dtype))


class Critic(nn.Module):
    """One network, two uses: the group value V(s) and each agent's counterfactual baseline.

    Both attend over the alive agents' embeddings. V embeds every agent from its observation;
    agent i's baseline embeds i from its observation and every other agent j from (o_j, a_j),
    so it scores the group's state as it is except for i's own action. With memory, each of the
    1 + A streams (V, then each b_i) carries its own LSTM state.

    `kind` (config key `critic`, see `poca.config.CRITICS`) selects the paper's ablations:
    "absorbing" replaces the attention by a linear layer over all A slots in a fixed order, an
    agent that is not alive shown as the absorbing input (zeros plus an absent flag);
    "independent" values each agent from its own observation alone, V_i [*, A], which is then
    also its baseline (advantage = return - V_i), and gives 0 for agents not alive.
    """

    def __init__(self, spec: GroupSpec, net: NetworkSettings, kind: str = "attention"):
        super().__init__()
        C, branches = spec.action_sizes
        self.branches, self.kind = branches, kind
        self.num_agents = spec.num_agents
        hidden = net.hidden_units
        self.encoder = ObservationEncoder(spec.obs, hidden, net.normalize, net.vis_encode_type)
        enc = self.encoder.size
        self.obs_embed = entity_embedding(enc, hidden)
        self.obs_act_embed = entity_embedding(enc + C + sum(branches), hidden)
        if kind == "attention":
            self.attention = ResidualSelfAttention(hidden)
        elif kind == "absorbing":  # all slots side by side, each with its absent flag
            self.slots = nn.Linear(spec.num_agents * (hidden + 1), hidden)
        elif kind != "independent":
            raise ValueError(f"critic must be one of 'attention', 'absorbing', 'independent', "
                             f"got {kind!r}")
        self.body = mlp(hidden, hidden, net.num_layers)
        self.memory, out = memory_after_body(net)
        # The head starts at zero, so V and every b_i start at 0: a randomly initialised head put
        # estimates far from the returns (explained variance -4.7 on group-hybrid Goal) and that
        # noise steered the first policy updates; starting at 0 doubled the seeds that solve it.
        self.head = nn.Linear(out + 1, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.returns = RunningNorm(1) if net.normalize_value else None

    def return_stats(self) -> tuple[Tensor, Tensor]:
        """(mean, std) of the returns seen so far, the units the head learns in: V = mean +
        std * head, so a head at 0 gives the mean return. (0, 1) without `normalize_value`.
        The std has a floor of 0.1 (variance 1e-2, as MAPPO's ValueNorm): on a sparse task whose
        returns were all 0 so far, the first success must not be thousands of units away."""
        if self.returns is None:
            one = self.head.bias.new_ones(())
            return one - 1, one
        return _units(self.returns, self.head.bias.dtype)

    def update_return_stats(self, returns: Tensor, alive: Tensor) -> None:
        """Add the `returns` of alive agents to the running statistics (no-op without
        `normalize_value`)."""
        if self.returns is not None:
            self.returns.update(returns[alive].reshape(-1, 1))

    def in_own_units(self, state: dict) -> dict:
        """This critic's `state_dict` saved with the other `normalize_value` setting (a resume
        that changes it with --force), converted so that every estimate stays what it was: raw
        units to return units with fresh statistics (mean 0, std 1, so the head reads as
        before); return units to raw with the statistics folded into the head (V = mean + std *
        head)."""
        saved = {k.removeprefix("returns."): v for k, v in state.items()
                 if k.startswith("returns.")}
        if bool(saved) == (self.returns is not None):
            return state
        if self.returns is not None:
            return {**state, **{f"returns.{k}": v for k, v in RunningNorm(1).state_dict().items()}}
        stats = RunningNorm(1)
        stats.load_state_dict(saved)
        mean, std = _units(stats, state["head.bias"].dtype)
        return {**{k: v for k, v in state.items() if not k.startswith("returns.")},
                "head.weight": state["head.weight"] * std,
                "head.bias": state["head.bias"] * std + mean}

    def _head(self, pooled: Tensor, count: Tensor, memory, starts):
        """pooled [*, h], count [*] -> (estimates [*], (memory before, memory after each step)
        or (None, None) without memory)."""
        features, states = self.body(pooled), (None, None)
        if self.memory is not None:
            features, *states = _unroll(self.memory, features, memory, starts)
        # ML-Agents' agent-count feature, 2n/n_max - 1; n_max is the slot count of the task.
        count_feature = 2 * count.to(features.dtype) / self.num_agents - 1
        out = self.head(torch.cat([features, count_feature.unsqueeze(-1)], -1)).squeeze(-1)
        if self.returns is not None:  # in return units
            mean, std = self.return_stats()
            out = out * std + mean
        return out, states

    def value(self, obs: list[Tensor], alive: Tensor, memory: Tensor | None = None,
              starts: Tensor | None = None):
        """obs [*, A, ...], alive [*, A] -> (V [*], (memory before, after each step)).
        With memory: time-major, memory [*batch, m] of the V stream; without, (None, None)."""
        if self.kind == "independent":
            return self._independent(self.encoder(obs), alive, memory, starts)
        enc = self.encoder(obs)
        if self.kind == "absorbing":
            enc = enc * alive.unsqueeze(-1).to(enc.dtype)
        x = self.obs_embed(enc)
        lead = alive.shape[:-1]
        pooled = self._pool(x.reshape(-1, *x.shape[-2:]), alive.reshape(-1, alive.shape[-1]))
        return self._head(pooled.reshape(*lead, -1), self._count(alive), memory, starts)

    def _pool(self, x: Tensor, present: Tensor) -> Tensor:
        """x [B, A, h], present [B, A] -> [B, h]: attention over the present agents, or (absorbing)
        every slot in order, absent ones as (their zero input's embedding, flag 1)."""
        if self.kind == "attention":
            return self.attention(x, present)
        absent = (~present).unsqueeze(-1).to(x.dtype)
        return self.slots(torch.cat([x, absent], -1).flatten(-2))

    def _count(self, present: Tensor) -> Tensor:
        """The agent count the head sees: the present agents, or every slot (absorbing: agents
        that left stay registered until the group ends)."""
        if self.kind == "absorbing":
            return torch.full(present.shape[:-1], present.shape[-1], device=present.device)
        return present.sum(-1)

    def _independent(self, enc: Tensor, alive: Tensor, memory, starts):
        """enc [*, A, e] -> (V_i [*, A] from agent i's own observation, 0 where not alive)."""
        if memory is not None:
            raise ValueError("critic: independent does not support network_settings.memory")
        value, states = self._head(self.obs_embed(enc), torch.ones_like(alive, dtype=torch.long),
                                   None, None)
        return value * alive.to(value.dtype), states

    def forward(self, obs: list[Tensor], cont: Tensor | None, disc: Tensor | None,
                alive: Tensor, memory: Tensor | None = None, starts: Tensor | None = None):
        """obs [*, A, ...], actions [*, A, ...], alive [*, A] ->
        (V [*], baselines b [*, A], (memory before, after each step)).

        The 1 + A entity sets (the group's, then one per agent i) share one attention pass.
        With memory: time-major [L, *batch, ...], memory [*batch, 1 + A, m], starts
        [L, *batch, 1 + A].
        """
        enc = self.encoder(obs)
        if self.kind == "independent":  # V_i is agent i's baseline too: PPO's loss, no b_i
            value, states = self._independent(enc, alive, memory, starts)
            return value, value.detach(), states
        lead, A = alive.shape[:-1], alive.shape[-1]
        enc = enc.reshape(-1, A, enc.shape[-1])
        alive = alive.reshape(-1, A)
        acts = [] if cont is None else [cont.reshape(-1, A, cont.shape[-1])]
        acts += [F.one_hot(disc[..., branch].reshape(-1, A), size).to(enc.dtype)
                 for branch, size in enumerate(self.branches)]
        if self.kind == "absorbing":  # the absorbing input: zero observation and action
            keep = alive.unsqueeze(-1).to(enc.dtype)
            enc, acts = enc * keep, [a * keep for a in acts]
        own = self.obs_embed(enc)  # [P, A, h]: each agent from its observation
        other = self.obs_act_embed(torch.cat([enc] + acts, -1))  # with its action
        eye = torch.eye(A, dtype=torch.bool, device=enc.device)  # [i, j]
        present = torch.cat([alive[:, None], alive[:, None, :] | eye], 1)  # i counts for b_i
        if self.kind == "attention":  # set 0: every agent's own; set 1 + i: own i, others' other
            slot = torch.arange(A, device=enc.device)
            rows = torch.cat([slot[None], torch.where(eye, slot, A + slot)])  # [1 + A, A]
            pooled = self.attention.pool_sets(torch.cat([own, other], 1), rows, present)
        else:
            sets = torch.cat([own[:, None], torch.where(eye[None, :, :, None], own[:, None],
                                                        other[:, None])], 1)  # [P, 1 + A, A, h]
            pooled = self._pool(sets.flatten(0, 1), present.flatten(0, 1))
        out, states = self._head(pooled.reshape(*lead, 1 + A, -1),
                                 self._count(present).reshape(*lead, 1 + A), memory, starts)
        return out[..., 0], out[..., 1:], states
