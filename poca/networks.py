"""MA-POCA's networks: observation encoder, attention over a variable set, actor and critic.

Shapes: `N` groups (time steps x envs flattened), `A` agent slots, `present`/`alive` bool masks.
The critic attends over the agents that are alive and nothing else, which is what lets one network
serve groups whose size changes as agents leave (see shared/spec/poca-reference.md §2).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from envs.core import GroupSpec, ObsSpec

NEG = -1e6  # logit for absent keys: exp underflows to exactly 0, with no NaN for empty sets


def mlp(in_size: int, hidden: int, layers: int) -> nn.Sequential:
    """`layers` x (Linear + Swish): ML-Agents' LinearEncoder."""
    mods = []
    for i in range(layers):
        lin = nn.Linear(in_size if i == 0 else hidden, hidden)
        nn.init.kaiming_normal_(lin.weight, nonlinearity="linear")
        nn.init.zeros_(lin.bias)
        mods += [lin, nn.SiLU()]
    return nn.Sequential(*mods)


def entity_embedding(in_size: int, size: int) -> nn.Sequential:
    """Linear + Swish with ML-Agents' small T-Fixup-style init for inputs to attention."""
    lin = nn.Linear(in_size, size)
    nn.init.normal_(lin.weight, std=math.sqrt(0.125 / size))
    nn.init.zeros_(lin.bias)
    return nn.Sequential(lin, nn.SiLU())


class RunningNorm(nn.Module):
    """Running mean/variance of a vector observation; normalizes and clips to [-5, 5]."""

    def __init__(self, size: int):
        super().__init__()
        self.register_buffer("count", torch.ones(()))
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("m2", torch.ones(size))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        """Chan et al.'s parallel update with a batch `x` [n, size]."""
        n = x.shape[0]
        if n == 0:
            return
        total = self.count + n
        delta = x.mean(0) - self.mean
        self.m2 += ((x - x.mean(0)) ** 2).sum(0) + delta**2 * self.count * n / total
        self.mean += delta * n / total
        self.count.copy_(total)

    def forward(self, x: Tensor) -> Tensor:
        return ((x - self.mean) / torch.sqrt(self.m2 / self.count)).clamp(-5, 5)


class ObservationEncoder(nn.Module):
    """Every observation component of one agent -> one flat vector of `size` features."""

    def __init__(self, specs: tuple[ObsSpec, ...], normalize: bool):
        super().__init__()
        unsupported = [o.name for o in specs if o.kind != "vector"]
        if unsupported:
            raise NotImplementedError(f"no encoder yet for observation components {unsupported}")
        self.norms = nn.ModuleList(RunningNorm(o.shape[0]) if normalize else nn.Identity()
                                   for o in specs)
        self.size = sum(o.shape[0] for o in specs)

    def forward(self, obs: list[Tensor]) -> Tensor:
        return torch.cat([norm(o.float()) for norm, o in zip(self.norms, obs)], dim=-1)

    def update_normalizers(self, obs: list[Tensor], present: Tensor) -> None:
        for norm, o in zip(self.norms, obs):
            if isinstance(norm, RunningNorm):
                norm.update(o[present].float())


class ResidualSelfAttention(nn.Module):
    """Masked multi-head self-attention with a residual, then a masked mean over entities.

    x [B, N, E], present bool [B, N] -> [B, E]. Absent entities change nothing, exactly: their
    inputs are zeroed, their keys get weight exp(-1e6) = 0, and the mean skips them.
    """

    def __init__(self, size: int, heads: int = 4):
        super().__init__()
        self.size, self.heads = size, heads
        self.qkv = nn.Linear(size, 3 * size)
        self.out = nn.Linear(size, size)
        for lin in (self.qkv, self.out):
            nn.init.normal_(lin.weight, std=math.sqrt(0.125 / size))
            nn.init.zeros_(lin.bias)

    def forward(self, x: Tensor, present: Tensor) -> Tensor:
        B, N, E = x.shape
        keep = present.unsqueeze(-1).to(x.dtype)
        x = F.layer_norm(x * keep, (E,))
        y = F.layer_norm(self.out(self._attend(self.qkv(x), present)) + x, (E,))
        return (y * keep).sum(1) / (keep.sum(1) + 1e-7)

    def _attend(self, qkv: Tensor, present: Tensor) -> Tensor:
        """[B, N, 3E] queries, keys, values -> [B, N, E]; logits scaled by sqrt(E) as ML-Agents."""
        B, N, E3 = qkv.shape
        E, H = E3 // 3, self.heads
        if N <= 4:  # few entities (small groups): elementwise beats tiny batched matmuls 2x
            q, k, v = qkv.split(E, -1)
            logits = (q.unsqueeze(2) * k.unsqueeze(1)).view(B, N, N, H, E // H).sum(-1)
            logits = logits.masked_fill(~present[:, None, :, None], NEG) / math.sqrt(E)
            weights = logits.softmax(2)  # [B, query, key, head]
            return (weights.unsqueeze(-1) * v.view(B, 1, N, H, E // H)).sum(2).reshape(B, N, E)
        q, k, v = qkv.view(B, N, 3, H, E // H).permute(2, 0, 3, 1, 4)  # [B, H, N, E/H] each
        logits = (q @ k.transpose(-1, -2)).masked_fill(~present[:, None, None, :], NEG)
        weights = (logits / math.sqrt(E)).softmax(-1)
        return (weights @ v).transpose(1, 2).reshape(B, N, E)


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
                lg.argmax(-1) if deterministic else torch.multinomial(
                    lg.softmax(-1).reshape(-1, lg.shape[-1]), 1, generator=generator
                ).view(lg.shape[:-1])
                for lg in self.logits], dim=-1)
        return cont, disc

    def log_prob(self, cont: Tensor | None, disc: Tensor | None) -> Tensor:
        """[..., C + B]: one log-probability per continuous dim and per discrete branch."""
        parts = []
        if self.mean is not None:
            std = self.log_std.exp()
            parts.append(-((cont - self.mean) ** 2) / (2 * std**2) - self.log_std
                         - 0.5 * math.log(2 * math.pi))
        for b, lg in enumerate(self.logits):
            parts.append(lg.log_softmax(-1).gather(-1, disc[..., b:b + 1]))
        return torch.cat(parts, dim=-1)

    def entropy(self) -> Tensor:
        """[...]: mean Gaussian entropy over continuous dims + sum over discrete branches."""
        total = 0.0
        if self.mean is not None:
            per_dim = 0.5 + 0.5 * math.log(2 * math.pi) + self.log_std
            total = per_dim.mean().expand(self.mean.shape[:-1])
        for lg in self.logits:
            total = total + -(lg.softmax(-1) * lg.log_softmax(-1)).sum(-1)
        return total


class Actor(nn.Module):
    """The shared policy: each agent acts on its own observation only."""

    def __init__(self, spec: GroupSpec, hidden: int, layers: int, normalize: bool):
        super().__init__()
        C, branches = spec.action_sizes
        self.branches = branches
        self.encoder = ObservationEncoder(spec.obs, normalize)
        self.body = mlp(self.encoder.size, hidden, layers)
        self.mu = nn.Linear(hidden, C) if C else None
        self.log_std = nn.Parameter(torch.zeros(C)) if C else None
        self.logits = nn.Linear(hidden, sum(branches)) if branches else None
        for head, gain in ((self.mu, 0.2), (self.logits, 0.1)):
            if head is not None:
                nn.init.kaiming_normal_(head.weight, nonlinearity="linear")
                head.weight.data *= gain
                nn.init.zeros_(head.bias)

    def forward(self, obs: list[Tensor], action_mask: Tensor | None = None) -> ActionDist:
        h = self.body(self.encoder(obs))
        mean = self.mu(h) if self.mu is not None else None
        logits = []
        if self.logits is not None:
            flat = self.logits(h)
            if action_mask is not None:
                flat = flat.masked_fill(~action_mask, -1e8)
            logits = list(flat.split(list(self.branches), dim=-1))
        return ActionDist(mean, self.log_std, logits)


class Critic(nn.Module):
    """One network, two uses: the group value V(s) and each agent's counterfactual baseline.

    Both attend over the alive agents' embeddings. V embeds every agent from its observation;
    agent i's baseline embeds i from its observation and every other agent j from (o_j, a_j),
    so it scores the group's state as it is except for i's own action.
    """

    def __init__(self, spec: GroupSpec, hidden: int, layers: int, normalize: bool):
        super().__init__()
        C, branches = spec.action_sizes
        self.branches = branches
        self.num_agents = spec.num_agents
        self.encoder = ObservationEncoder(spec.obs, normalize)
        enc = self.encoder.size
        self.obs_embed = entity_embedding(enc, hidden)
        self.obs_act_embed = entity_embedding(enc + C + sum(branches), hidden)
        self.attention = ResidualSelfAttention(hidden)
        self.body = mlp(hidden, hidden, layers)
        self.head = nn.Linear(hidden + 1, 1)
        nn.init.xavier_uniform_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def _head(self, pooled: Tensor, count: Tensor) -> Tensor:
        # ML-Agents' agent-count feature, 2n/n_max - 1; n_max is the slot count of the task.
        feature = 2 * count.to(pooled.dtype) / self.num_agents - 1
        return self.head(torch.cat([self.body(pooled), feature.unsqueeze(-1)], -1)).squeeze(-1)

    def value(self, obs: list[Tensor], alive: Tensor) -> Tensor:
        """obs [N, A, ...], alive [N, A] -> V [N]."""
        x = self.obs_embed(self.encoder(obs))
        return self._head(self.attention(x, alive), alive.sum(-1))

    def forward(self, obs: list[Tensor], cont: Tensor | None, disc: Tensor | None,
                alive: Tensor) -> tuple[Tensor, Tensor]:
        """obs [N, A, ...], actions [N, A, ...], alive [N, A] -> (V [N], baselines b [N, A]).

        The 1 + A entity sets (the group's, then one per agent i) share one attention pass.
        """
        enc = self.encoder(obs)
        N, A, _ = enc.shape
        acts = [] if cont is None else [cont]
        acts += [F.one_hot(disc[..., b], n).to(enc.dtype) for b, n in enumerate(self.branches)]
        own = self.obs_embed(enc)  # [N, A, h]: each agent from its observation
        other = self.obs_act_embed(torch.cat([enc] + acts, -1))  # with its action
        eye = torch.eye(A, dtype=torch.bool, device=enc.device)  # [i, j]
        sets = torch.cat([own[:, None], torch.where(eye[None, :, :, None], own[:, None],
                                                    other[:, None])], 1)  # [N, 1 + A, A, h]
        present = torch.cat([alive[:, None], alive[:, None, :] | eye], 1)  # i counts for b_i
        pooled = self.attention(sets.flatten(0, 1), present.flatten(0, 1))
        out = self._head(pooled, present.sum(-1).flatten()).view(N, 1 + A)
        return out[:, 0], out[:, 1:]
