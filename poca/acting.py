"""Acting in a batched env with the shared actor, carrying LSTM memories per env and agent slot.

Memories persist across steps (and rollouts) and are zeroed where an agent's episode starts:
a slot that acts now but did not act on, or ended at, the previous step, or whose group reset.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import Tensor

from poca.networks import ActionDist, Actor, zero_memory


@dataclass
class Acted:
    """One batched decision: the actions for `env.step` and, as tensors on the trainer's
    device, everything the rollout keeps of the step (converted once, here)."""

    actions: dict  # numpy arrays for env.step
    obs: list[Tensor]  # each [E, A, *shape]: what the agents saw
    alive: Tensor  # bool [E, A]
    action_mask: Tensor | None  # bool [E, A, sum(branches)]
    cont: Tensor | None  # [E, A, C] raw samples
    disc: Tensor | None  # [E, A, B]
    log_prob: Tensor  # [E, A, C + B]
    starts: Tensor  # bool [E, A]: the agent's episode starts at this step
    group_starts: Tensor  # bool [E]: the group's episode starts at this step
    memory: Tensor | None  # [E, A, m]: the actor's memory before this step (zeroed at starts)


class Acting:
    """The shared actor over a batched env; holds what must persist between steps: each slot's
    LSTM memory and whether it continues the episode it acted in at the previous step."""

    def __init__(self, actor: Actor, num_envs: int, num_agents: int, device: torch.device,
                 generator: torch.Generator):
        self.actor, self.device, self.generator = actor, device, generator
        self.shape = (num_envs, num_agents)
        self.reset()

    def reset(self) -> None:
        """Every episode starts over (after env.reset)."""
        self.continuing = torch.zeros(self.shape, dtype=torch.bool, device=self.device)
        self.group_continuing = torch.zeros(self.shape[0], dtype=torch.bool, device=self.device)
        self.memory = zero_memory(self.actor.memory, *self.shape, device=self.device)

    @torch.no_grad()
    def act(self, step, deterministic: bool = False) -> Acted:
        """Sample every slot's action for `step` (a `GroupStep`); alive slots' memories go on,
        zeroed where an episode starts."""
        dev = self.device
        alive = torch.as_tensor(step.alive, device=dev)
        obs = blank_absent(step.obs, alive)
        mask = None if step.action_mask is None else torch.as_tensor(step.action_mask, device=dev)
        starts = alive & ~self.continuing
        memory = None if self.memory is None else torch.where(starts[..., None], 0.0, self.memory)
        # the time-major actor on a one-step sequence [1, E, A, ...] (memory or none)
        dist, self.memory = self.actor([view[None] for view in obs],
                                       None if mask is None else mask[None], memory, starts[None])
        dist = _first_step(dist)
        cont, disc = dist.sample(self.generator, deterministic)
        actions = {}
        if cont is not None:
            actions["continuous"] = cont.cpu().numpy()  # the env clips to [-1, 1]
        if disc is not None:
            actions["discrete"] = disc.cpu().numpy()
        return Acted(actions=actions, obs=obs, alive=alive, action_mask=mask, cont=cont,
                     disc=disc, log_prob=dist.log_prob(cont, disc), starts=starts,
                     group_starts=~self.group_continuing, memory=memory)

    def observe(self, step, after) -> None:
        """After env.step: which slots go on with the same episode at the next step (`step` the
        one acted on, `after` what env.step returned)."""
        ended = after.terminated | after.truncated | after.group_done[:, None]
        self.continuing = torch.as_tensor(step.alive & ~ended, device=self.device)
        self.group_continuing = torch.as_tensor(~after.group_done, device=self.device)


def blank_absent(views, present: Tensor) -> list[Tensor]:
    """Observation arrays [E, A, ...] -> tensors on `present`'s device, zero in every slot that
    is not `present` [E, A].

    An env may leave anything in those slots (`envs.core`: learners mask them). The masks do
    ignore them exactly, but only finite values: the actor still samples for every slot, and a
    masked product with NaN or inf is NaN, so garbage there stopped training. Zeros change
    nothing else (the same episodes, the same curve).
    """
    out = []
    for view in views:
        x = torch.as_tensor(view, device=present.device)
        out.append(torch.where(present.reshape(present.shape + (1,) * (x.dim() - 2)), x,
                               torch.zeros((), dtype=x.dtype, device=x.device)))
    return out


def _first_step(dist: ActionDist) -> ActionDist:
    """A distribution over [1, E, A] -> the same over [E, A]."""
    return ActionDist(None if dist.mean is None else dist.mean[0], dist.log_std,
                      [logits[0] for logits in dist.logits])


@contextlib.contextmanager
def torch_settings(threads: int):
    """What training and evaluation need of torch's global settings, for their duration only
    (the caller's come back after): `threads` CPU threads, float32 by default, gradients on, also
    inside a caller's `torch.no_grad()` or `torch.inference_mode()`."""
    threads_before, dtype_before = torch.get_num_threads(), torch.get_default_dtype()
    torch.set_num_threads(threads)
    torch.set_default_dtype(torch.float32)
    try:
        with torch.inference_mode(False), torch.enable_grad():
            yield
    finally:
        torch.set_num_threads(threads_before)
        torch.set_default_dtype(dtype_before)
