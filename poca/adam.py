"""Adam for the trainer, without `torch.optim.Optimizer`.

Why not `torch.optim.Adam` (re-measured with torch 2.13 on this project's 2-core machine, one
thread): `import torch.optim` is free, but building any `torch.optim.Optimizer` imports torch's
compiler stack, `torch._dynamo`: `Optimizer.add_param_group` (and `state_dict`,
`load_state_dict`) are wrapped by `torch._disable_dynamo`, which imports it on first call, and
`step` imports it in `_use_grad_for_differentiable`, whatever `fused`/`foreach` say. That is
0.74-1.7 s per process (against 1.1-1.2 s for `import torch` itself), also with
`TORCH_COMPILE_DISABLE=1`, which makes dynamo a no-op but still imports it; there is no
supported switch that skips the import. A 3,000-step `poca train` pays it on every start. Per
step on the `mlagents_test` networks (16 tensors, 5.6k numbers): this class 77 us,
`torch.optim.Adam` 322 us (foreach=True 210 us), torch's functional `torch.optim.adam.adam`
(which does not import dynamo) 278 us (foreach=True 170 us); a 3,000-step run takes 552 steps.

This is Adam's update as `torch.optim.Adam` computes it (no weight decay, no amsgrad), on the
moments of all parameters kept in two flat buffers: one `torch.cat` of the gradients and a
handful of vector ops per step instead of several per parameter (tests/test_startup.py checks it
against `torch.optim.Adam`). Its `state_dict` has `torch.optim.Adam`'s layout, so checkpoints
written with either load into either. Revisit when torch builds optimizers without `_dynamo`.
"""

from __future__ import annotations

import math

import torch


class Adam:
    def __init__(self, params, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        self.params = [p for p in params]
        if not self.params:
            raise ValueError("Adam got no parameters")
        self.sizes = [p.numel() for p in self.params]
        first = self.params[0]
        n = sum(self.sizes)
        self.exp_avg = torch.zeros(n, dtype=first.dtype, device=first.device)
        self.exp_avg_sq = torch.zeros_like(self.exp_avg)
        self.steps = 0
        self.param_groups = [{"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": 0,
                              "amsgrad": False, "maximize": False, "foreach": None,
                              "capturable": False, "differentiable": False, "fused": None,
                              "decoupled_weight_decay": False,
                              "params": list(range(len(self.params)))}]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        grad = torch.cat([torch.zeros_like(p).reshape(-1) if p.grad is None
                          else p.grad.reshape(-1) for p in self.params])
        self.steps += 1
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size = lr / (1 - beta1 ** self.steps)
        denom = (self.exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** self.steps)).add_(eps)
        update = (self.exp_avg / denom).mul_(-step_size)
        for p, u in zip(self.params, update.split(self.sizes), strict=True):
            p.add_(u.view_as(p))

    def state_dict(self) -> dict:
        """`torch.optim.Adam`'s layout: per-parameter `step`, `exp_avg`, `exp_avg_sq`."""
        state = {}
        if self.steps:
            step = torch.tensor(float(self.steps))
            for i, (p, m, v) in enumerate(zip(self.params, self.exp_avg.split(self.sizes),
                                              self.exp_avg_sq.split(self.sizes), strict=True)):
                state[i] = {"step": step.clone(), "exp_avg": m.view_as(p).clone(),
                            "exp_avg_sq": v.view_as(p).clone()}
        groups = [{k: (list(v) if k == "params" else v) for k, v in g.items()}
                  for g in self.param_groups]
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores a state from `state_dict()` or from `torch.optim.Adam.state_dict()`."""
        groups, state = state_dict["param_groups"], state_dict["state"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(f"the optimizer state has {[len(g['params']) for g in groups]} "
                             f"parameters per group; this network has [{len(self.params)}]")
        saved = dict(groups[0])
        if saved.get("amsgrad") or saved.get("weight_decay"):
            raise ValueError("the optimizer state uses amsgrad or weight decay; this Adam "
                             "has neither")
        exp_avg, exp_avg_sq, steps = torch.zeros_like(self.exp_avg), \
            torch.zeros_like(self.exp_avg_sq), set()
        for i, (index, p, m, v) in enumerate(zip(groups[0]["params"], self.params,
                                                 exp_avg.split(self.sizes),
                                                 exp_avg_sq.split(self.sizes), strict=True)):
            entry = state.get(index, state.get(str(index)))
            if entry is None:
                steps.add(0)
                continue
            for key, buf in (("exp_avg", m), ("exp_avg_sq", v)):
                if tuple(entry[key].shape) != tuple(p.shape):
                    raise ValueError(f"optimizer state {key} of parameter {i} has shape "
                                     f"{tuple(entry[key].shape)}; the parameter's is "
                                     f"{tuple(p.shape)}")
                buf.copy_(entry[key].reshape(-1))
            steps.add(int(float(entry["step"])))
        if len(steps) != 1:
            raise ValueError(f"the optimizer state's parameters were stepped different numbers "
                             f"of times ({sorted(steps)})")
        self.exp_avg.copy_(exp_avg)
        self.exp_avg_sq.copy_(exp_avg_sq)
        self.steps = steps.pop()
        self.param_groups[0].update({k: v for k, v in saved.items() if k != "params"})
        self.param_groups[0]["betas"] = tuple(self.param_groups[0]["betas"])
