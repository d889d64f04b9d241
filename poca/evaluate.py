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


def load_actor(path: str | Path, env: GroupEnv, state: dict | None = None) -> Actor:
    """The trained policy of a checkpoint, checked against `env`'s spec.

    `state`: the checkpoint at `path` when it was already read with `checkpoint.load`."""
    if state is None:
        state = checkpoint.load(path, env.spec)
    else:
        checkpoint.check_fits(path, state, env.spec)
    try:
        net = POCAConfig.from_dict(state["config"]).network_settings
        actor = Actor(env.spec, net)
        actor.load_state_dict(state["actor"])
    except (ValueError, TypeError, RuntimeError) as err:
        raise checkpoint.CheckpointError(f"{path} does not hold a policy for this environment "
                                         f"and its config: {checkpoint.one_line(err)}"
                                         ) from None
    return actor.eval()


def evaluate(actor: Actor, env: GroupEnv, seed: int = 0, deterministic: bool = False,
             team: bool = False) -> np.ndarray:
    """Group return (with `team`: group + individual rewards) of the first episode of each of
    `env.num_envs` groups (one episode each, so short episodes are not over-counted)."""
    acting = Acting(actor, env.num_envs, env.spec.num_agents, torch.device("cpu"),
                    torch.Generator().manual_seed(seed))
    step = env.reset(seed=seed)
    returns = np.zeros(env.num_envs)
    running = np.ones(env.num_envs, dtype=bool)
    while running.any():
        nxt = env.step(acting.act(step, deterministic).actions)
        acting.observe(step, nxt)
        reward = nxt.group_reward + (nxt.reward.sum(axis=1) if team else 0.0)
        returns += np.where(running, reward, 0.0)
        running &= ~nxt.group_done
        step = nxt
    return returns


def play(actor: Actor, env: GroupEnv, episodes: int, seed: int = 0, render: str | None = None,
         record=None, fps: int = 10) -> list[float]:
    """Watch (render="human") and/or record (a GIF path) a trained group, one env at a time.

    Returns each episode's group return. Recording needs Pillow (`pip install "groupenvs[gif]"`).
    """
    from envs.render import EpisodeRenderer

    if env.num_envs != 1:
        raise ValueError("play() steps one group: make the env with num_envs=1")
    views = [EpisodeRenderer(env, mode, fps) for mode in
             (render, "rgb_array" if record else None) if mode]
    frames, returns = [], []
    acting = Acting(actor, 1, env.spec.num_agents, torch.device("cpu"),
                    torch.Generator().manual_seed(seed))
    for episode in range(episodes):
        step = env.reset(seed=seed + episode)
        acting.reset()
        for view in views:
            view.start()
        total, done = 0.0, False
        while not done:
            nxt = env.step(acting.act(step).actions)
            acting.observe(step, nxt)
            total += float(nxt.group_reward[0])
            done = bool(nxt.group_done[0])
            for view in views:
                view.step(nxt)
                if view.mode == "rgb_array":
                    frames.append(view.render())
            step = nxt
        returns.append(total)
    for view in views:
        view.close()
    if record:
        _write_gif(frames, record, fps)
    return returns


def _write_gif(frames: list[np.ndarray], path, fps: int) -> None:
    try:
        from PIL import Image
    except ImportError:
        raise ImportError('recording GIFs needs Pillow: pip install "groupenvs[gif]"') from None
    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=1000 // fps, loop=0)
