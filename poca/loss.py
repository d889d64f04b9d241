"""MA-POCA's trust-region losses, as pure functions (see shared/spec/poca-reference.md §1.7)."""

from __future__ import annotations

import torch
from torch import Tensor


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of `x` over the entries where `mask` is set (mask broadcasts over x's trailing dims)."""
    mask = mask.to(x.dtype)
    while mask.dim() < x.dim():
        mask = mask.unsqueeze(-1)
    mask = mask.expand_as(x)
    return (x * mask).sum() / mask.sum().clamp(min=1)


def policy_loss(log_prob: Tensor, old_log_prob: Tensor, advantage: Tensor, mask: Tensor,
                epsilon: float) -> Tensor:
    """Clipped surrogate, clipped per action component (each continuous dim, each branch).

    log_prob, old_log_prob [..., K]; advantage, mask [...].
    """
    ratio = torch.exp(log_prob - old_log_prob)
    adv = advantage.unsqueeze(-1)
    surrogate = torch.min(ratio * adv, ratio.clamp(1 - epsilon, 1 + epsilon) * adv)
    return -masked_mean(surrogate, mask)


def clipped_value_loss(estimate: Tensor, old_estimate: Tensor, target: Tensor, mask: Tensor,
                       epsilon: float) -> Tensor:
    """max((G - v)^2, (G - v_clipped)^2) with v kept within epsilon of the stored estimate.

    ML-Agents stores V's old estimates under the key its returns overwrite, so its value clipping
    compares V with the returns and is inert (spec §1.7); we clip against the stored estimates,
    for V as for the baseline.
    """
    clipped = old_estimate + (estimate - old_estimate).clamp(-epsilon, epsilon)
    return masked_mean(torch.max((target - estimate) ** 2, (target - clipped) ** 2), mask)


def linear_decay(initial: float, floor: float, step: int, max_steps: int) -> float:
    """ML-Agents' linear schedule: from `initial` at step 0 to `floor` at `max_steps`."""
    return (initial - floor) * (1 - min(step, max_steps) / max_steps) + floor
