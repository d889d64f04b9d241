"""Run a trained policy: evaluation over many episodes at once, and watching one group play."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from envs.core import GroupEnv
from poca import checkpoint
from poca.acting import Acting
from poca.config import POCAConfig
from poca.networks import Actor


def load_actor(path: str | Path, env: GroupEnv) -> Actor:
    """The trained policy of a checkpoint, checked against `env`'s spec."""
    state = checkpoint.load(path, env.spec)
    net = POCAConfig.from_dict(state["config"]).network_settings
    actor = Actor(env.spec, net)
    actor.load_state_dict(state["actor"])
    return actor.eval()


def evaluate(actor: Actor, env: GroupEnv, seed: int = 0, deterministic: bool = False) -> np.ndarray:
    """Group return of the first episode of each of `env.num_envs` groups (one episode each,
    so short episodes are not over-counted)."""
    acting = Acting(actor, env.num_envs, env.spec.num_agents, torch.device("cpu"),
                    torch.Generator().manual_seed(seed))
    step = env.reset(seed=seed)
    returns = np.zeros(env.num_envs)
    running = np.ones(env.num_envs, dtype=bool)
    while running.any():
        nxt = env.step(acting.act(step, deterministic).actions)
        acting.observe(step, nxt)
        returns += np.where(running, nxt.group_reward, 0.0)
        running &= ~nxt.group_done
        step = nxt
    return returns
