"""Residual self-attention over a variable set of entities (agents, or items in an entity list).

One implementation, two uses: the critic attends over the agents still in the episode, the
entity-list encoder over the rows present in an observation (ML-Agents'
ml-agents/mlagents/trainers/torch_entities/attention.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

NEG = -1e6  # logit for absent keys: exp underflows to exactly 0, with no NaN for empty sets
HEADS = 4  # as ML-Agents' entity attention


def entity_embedding(in_size: int, size: int) -> nn.Sequential:
    """Linear + Swish with ML-Agents' small T-Fixup-style init for inputs to attention."""
    lin = nn.Linear(in_size, size)
    nn.init.normal_(lin.weight, std=math.sqrt(0.125 / size))
    nn.init.zeros_(lin.bias)
    return nn.Sequential(lin, nn.SiLU())


class ResidualSelfAttention(nn.Module):
    """Masked multi-head self-attention with a residual, then a masked mean over entities.

    x [B, N, E], present bool [B, N] -> [B, E]. Absent entities change nothing, exactly: their
    keys get weight exp(-1e6) = 0 and the mean skips their rows, whatever they hold.
    """

    def __init__(self, size: int, heads: int = HEADS):
        super().__init__()
        if size % heads:
            raise ValueError(f"attention: its size (network_settings.hidden_units) must be a "
                             f"multiple of its {heads} heads, got {size}")
        self.size, self.heads = size, heads
        self.qkv = nn.Linear(size, 3 * size)
        self.out = nn.Linear(size, size)
        for lin in (self.qkv, self.out):
            nn.init.normal_(lin.weight, std=math.sqrt(0.125 / size))
            nn.init.zeros_(lin.bias)
        # head_of[e, h] = 1 where feature e belongs to head h: a matmul with it sums each head's
        # features, where a sum over a trailing dim of fewer than 16 is slow on CPU (not saved)
        self.register_buffer("head_of", torch.eye(heads).repeat_interleave(size // heads, 0),
                             persistent=False)

    def forward(self, x: Tensor, present: Tensor) -> Tensor:
        return self.pool_sets(x, torch.arange(x.shape[1], device=x.device)[None],
                              present[:, None]).squeeze(1)

    def pool_sets(self, x: Tensor, rows: Tensor, present: Tensor) -> Tensor:
        """Several entity sets drawn from shared entities: x [B, K, E] (K distinct entities),
        rows [S, N] (set s holds entities rows[s]), present bool [B, S, N] -> [B, S, E].

        The first layer norm and the query/key/value projection act on each entity alone, so
        they run once per distinct entity, not once per set it appears in (the critic's 1 + A
        sets hold only 2A distinct entities). The first layer norm also sees absent entities
        unmasked: their keys weigh exactly 0 and their own rows are left out of the mean, so
        what they hold changes nothing."""
        B, K, E = x.shape
        S, N = rows.shape
        x = F.layer_norm(x, (E,))
        flat = rows.flatten()
        x_sets = x.index_select(1, flat).view(B * S, N, E)
        qkv = self.qkv(x).index_select(1, flat).view(B * S, N, 3 * E)
        present = present.reshape(B * S, N)
        keep = present.unsqueeze(-1).to(x.dtype)
        y = F.layer_norm(self.out(self._attend(qkv, present)) + x_sets, (E,))
        return ((y * keep).sum(1) / (keep.sum(1) + 1e-7)).view(B, S, E)

    def _attend(self, qkv: Tensor, present: Tensor) -> Tensor:
        """[B, N, 3E] queries, keys, values -> [B, N, E]; logits scaled by sqrt(E) as ML-Agents."""
        B, N, E3 = qkv.shape
        E, H = E3 // 3, self.heads
        if N <= 4 and E // H >= 16:  # few entities, heads of 16+ features (hidden_units 64+):
            # sums over each head's slice, 1.3x faster forward + backward than the head_of
            # matmuls below at 32 features a head, on par at 16
            q, k, v = qkv.view(B, N, 3, H, E // H).unbind(2)
            logits = (q.unsqueeze(2) * k.unsqueeze(1)).sum(-1)  # [B, query, key, head]
            logits = logits.masked_fill(~present[:, None, :, None], NEG) / math.sqrt(E)
            weights = logits.softmax(2)
            return (weights.unsqueeze(-1) * v.unsqueeze(1)).sum(2).reshape(B, N, E)
        if N <= 4:  # few entities, narrow heads: elementwise beats tiny batched matmuls 2x
            q, k, v = qkv.split(E, -1)
            logits = (q.unsqueeze(2) * k.unsqueeze(1)) @ self.head_of  # [B, query, key, head]
            logits = logits.masked_fill(~present[:, None, :, None], NEG) / math.sqrt(E)
            weights = logits.softmax(2) @ self.head_of.T  # each head's weight on its features
            return (weights * v.unsqueeze(1)).sum(2)
        q, k, v = qkv.view(B, N, 3, H, E // H).permute(2, 0, 3, 1, 4)  # [B, H, N, E/H] each
        # torch's fused kernel: forward + backward as fast at N 5-6, 1.3-1.6x at N 8-32;
        # absent keys get NEG added to their logits, as on the path above, so an empty set is
        # handled alike on both paths whatever torch's convention for fully masked rows
        absent = torch.zeros((B, 1, 1, N), dtype=qkv.dtype, device=qkv.device).masked_fill(
            ~present[:, None, None, :], NEG)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=absent, scale=1 / math.sqrt(E))
        return out.transpose(1, 2).reshape(B, N, E)
