"""Run a trained policy: evaluation over many episodes at once, and watching one group play."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from envs.core import GroupEnv
from poca import checkpoint
from poca.config import POCAConfig
from poca.networks import Actor


def load_actor(path: str | Path, env: GroupEnv) -> Actor:
    """The trained policy of a checkpoint, checked against `env`'s spec."""
    state = checkpoint.load(path, env.spec)
    net = POCAConfig.from_dict(state["config"]).network_settings
    actor = Actor(env.spec, net.hidden_units, net.num_layers, net.normalize)
    actor.load_state_dict(state["actor"])
    return actor.eval()


@torch.no_grad()
def act(actor: Actor, step, generator: torch.Generator, deterministic: bool) -> dict:
    mask = None if step.action_mask is None else torch.as_tensor(step.action_mask)
    dist = actor([torch.as_tensor(o) for o in step.obs], mask)
    cont, disc = dist.sample(generator, deterministic)
    actions = {}
    if cont is not None:
        actions["continuous"] = cont.numpy()
    if disc is not None:
        actions["discrete"] = disc.numpy()
    return actions


def evaluate(actor: Actor, env: GroupEnv, seed: int = 0, deterministic: bool = False) -> np.ndarray:
    """Group return of the first episode of each of `env.num_envs` groups (one episode each,
    so short episodes are not over-counted)."""
    generator = torch.Generator().manual_seed(seed)
    step = env.reset(seed=seed)
    returns = np.zeros(env.num_envs)
    running = np.ones(env.num_envs, dtype=bool)
    while running.any():
        step = env.step(act(actor, step, generator, deterministic))
        returns += np.where(running, step.group_reward, 0.0)
        running &= ~step.group_done
    return returns
