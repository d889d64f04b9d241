"""MA-POCA's trust-region losses and PPO diagnostics, as pure functions.

The losses follow ML-Agents' POCA optimizer (ml-agents/mlagents/trainers/poca/optimizer_torch.py)
and the MA-POCA paper (Cohen et al., arXiv 2111.05992).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def masked_mean(x: Tensor, mask: Tensor) -> Tensor:
    """Mean of `x` over the entries where `mask` is set (mask broadcasts over x's trailing dims)."""
    mask = mask.to(x.dtype)
    while mask.dim() < x.dim():
        mask = mask.unsqueeze(-1)
    mask = mask.expand_as(x)
    return (x * mask).sum() / mask.sum().clamp(min=1)


def linear_decay(initial: float, floor: float, step: int, max_steps: int) -> float:
    """ML-Agents' linear schedule: from `initial` at step 0 to `floor` at `max_steps`."""
    return (initial - floor) * (1 - min(step, max_steps) / max_steps) + floor


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
    compares V with the returns and is inert; we clip against the stored estimates, for V as for
    the baseline.
    """
    clipped = old_estimate + (estimate - old_estimate).clamp(-epsilon, epsilon)
    return masked_mean(torch.max((target - estimate) ** 2, (target - clipped) ** 2), mask)


def policy_diagnostics(log_prob: Tensor, old_log_prob: Tensor, mask: Tensor, epsilon: float,
                       num_continuous: int) -> dict[str, Tensor]:
    """What tells a healthy update from a collapsing one (as CleanRL's PPO logs them).

    `approx_kl`: the k3 estimator E[(r - 1) - log r] of KL(old || new) over the joint action
    (r the ratio of joint probabilities); `clip_fraction_continuous` / `_discrete`: the share of
    action components (continuous dims, discrete branches) whose ratio left [1 - eps, 1 + eps].
    """
    log_ratio = log_prob - old_log_prob  # [..., C + B]
    joint = log_ratio.sum(-1)
    out = {"approx_kl": masked_mean(torch.expm1(joint) - joint, mask)}
    clipped = ((log_ratio.exp() - 1).abs() > epsilon).to(log_prob.dtype)
    for kind, part in (("continuous", clipped[..., :num_continuous]),
                       ("discrete", clipped[..., num_continuous:])):
        if part.shape[-1]:
            out[f"clip_fraction_{kind}"] = masked_mean(part, mask)
    return out


def explained_variance(estimate: Tensor, target: Tensor, mask: Tensor) -> float:
    """1 - Var(target - estimate) / Var(target) over the masked entries: 1 is a perfect critic,
    0 no better than a constant, negative worse (NaN when the targets do not vary)."""
    target, estimate = target[mask], estimate[mask]
    var = target.var(unbiased=False)
    return float(1 - (target - estimate).var(unbiased=False) / var) if var > 0 else math.nan
