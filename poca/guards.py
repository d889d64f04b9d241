"""Checks the training loop runs between its steps: non-finite values (with their first source)
and reward scales that drown the critic."""

from __future__ import annotations

import warnings

import torch

VALUE_LOSS_WARNING = 1e6


def check_rollout(trainer, ro) -> None:
    """Raise `TrainingDiverged` for a NaN/inf team reward or an alive agent's NaN/inf
    observation in rollout `ro`, naming the env, slot and rollout step."""
    from poca.trainer import TrainingDiverged

    checks = [("the env's team reward", ro.team_reward, None)] + [
        (f"the env's observation {o.name!r}", x, ro.alive)
        for o, x in zip(trainer.spec.obs, ro.obs, strict=True) if x.is_floating_point()]
    for what, x, alive in checks:
        bad = ~torch.isfinite(x)
        if alive is not None:
            bad = bad.reshape(*alive.shape, -1).any(-1) & alive
        if bad.any():
            t, e, *a = torch.nonzero(bad)[0].tolist()
            where = f"env {e}" + (f", agent slot {a[0]}" if alive is not None else "")
            raise TrainingDiverged(trainer._diverged_message(
                f"{what} ({where}, step {t} of the rollout)"))


def non_finite_tensor(*nets: torch.nn.Module) -> str | None:
    """The first tensor of `nets` (actor, critic) that is not finite: 'a parameter (name)', or
    'the normaliser statistics name' for a buffer; None when all are finite."""
    for net_name, net in zip(("actor", "critic"), nets, strict=False):
        params = {name for name, _ in net.named_parameters()}
        for name, value in net.state_dict().items():
            if value.is_floating_point() and not torch.isfinite(value).all():
                return (f"a parameter ({net_name}.{name})" if name in params else
                        f"the normaliser statistics {net_name}.{name}")
    return None


def warn_reward_scale(trainer, stats: dict) -> None:
    """Once per trainer: warn when the value loss shows returns far beyond the usual scale."""
    loss = stats.get("value_loss", 0.0)
    if loss > VALUE_LOSS_WARNING and not getattr(trainer, "_warned_scale", False):
        trainer._warned_scale = True
        scale_down = "scale the rewards down (e.g. --set reward_signals.extrinsic.strength=0.01)"
        fixes = (scale_down if trainer.config.network_settings.normalize_value else
                 "let the critic learn in return units (--set "
                 f"network_settings.normalize_value=true) or {scale_down}")
        warnings.warn(
            f"value loss {loss:.3g} at agent-step {trainer.agent_steps}: the returns are huge, "
            f"so the critic learns slowly and drowns the policy's signal. To fix it, {fixes}",
            RuntimeWarning, stacklevel=3)
