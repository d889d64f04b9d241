"""Play a registered task with a random policy (or the keyboard) and print each group return.

    python -m envs.play Goal-v0 --episodes 5 --render human
    python -m envs.play GoalVisual-v0 --render rgb_array --save frames/
    python -m envs.play Goal-v0 --keyboard       # left/right arrows steer agent_0

With `--keyboard` (needs `--render human`), the arrow keys move agent_0: on Goal left is -,
right +, nothing pressed a random move; on the grid tasks (Dungeon Escape, Baton Pass, Push
Block) each arrow is its move and nothing pressed stays. Every other agent acts at random.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

import envs
from envs.core import check_int
from envs.grid import STAY
from envs.pettingzoo import GroupParallelEnv
from envs.render import check_display


def _keyboard_action(space, arrow_moves: dict | None = None):
    """agent_0's action from the arrow keys held: a grid task's `ARROW_MOVES` (none held:
    stay), else left -, right + on every action entry (none held: a random action)."""
    import pygame

    pygame.event.pump()
    keys = pygame.key.get_pressed()
    if arrow_moves is not None:
        return next((move for key, move in arrow_moves.items() if keys[getattr(pygame, key)]),
                    STAY)
    direction = 1 if keys[pygame.K_RIGHT] else 0 if keys[pygame.K_LEFT] else None
    action = space.sample()
    if direction is None:
        return action
    if isinstance(action, dict):
        return {"continuous": np.full_like(action["continuous"], 2 * direction - 1),
                "discrete": np.full_like(np.asarray(action["discrete"]), direction)}
    if np.asarray(action).dtype.kind == "f":
        return np.full_like(action, 2 * direction - 1)
    return np.full_like(np.asarray(action), direction)


def play(task: str, episodes: int, seed: int, env_kwargs: dict, render: str | None = None,
         save: Path | None = None, keyboard: bool = False) -> list[float]:
    """Play in the PettingZoo view; returns the group return of each episode."""
    if keyboard and render != "human":
        raise SystemExit("--keyboard needs --render human")
    env = GroupParallelEnv(task, render_mode=render, **env_kwargs)
    returns, frames = [], 0

    def save_frame():  # each episode's start, then one per step
        nonlocal frames
        if render == "rgb_array" and save is not None:
            _save_png(env.render(), save / f"frame_{frames:06d}.png")
            frames += 1

    for episode in range(episodes):
        env.reset(seed=seed + episode)
        save_frame()
        for i, agent in enumerate(env.possible_agents):
            env.action_space(agent).seed(seed + 1000 * episode + i)
        group_return, steps = 0.0, 0
        while env.agents:
            actions = {a: env.action_space(a).sample() for a in env.agents}
            if keyboard and "agent_0" in actions:
                actions["agent_0"] = _keyboard_action(env.action_space("agent_0"),
                                                      getattr(env.core, "ARROW_MOVES", None))
            _, _, _, _, infos = env.step(actions)
            # the group's reward: every agent sharing in it reports it, one that left (absorbed,
            # death_mode="absorb") reports 0, so the first listed agent may not say it
            group_return += max((info["group_reward"] for info in infos.values()), key=abs,
                                default=0.0)
            steps += 1
            save_frame()
        returns.append(group_return)
        print(f"episode {episode}: group return {group_return:+.3f} in {steps} steps")
    env.close()
    return returns


def _save_png(image: np.ndarray, path: Path) -> None:
    import pygame

    path.parent.mkdir(parents=True, exist_ok=True)
    pygame.image.save(pygame.surfarray.make_surface(np.transpose(image, (1, 0, 2))), str(path))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help=f"one of {sorted(envs.TASKS)}")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-kwargs", type=json.loads, default={},
                        help='task arguments as JSON, e.g. \'{"num_agents": 3}\'')
    parser.add_argument("--render", choices=["human", "rgb_array"])
    parser.add_argument("--save", type=Path, help="with --render rgb_array: write PNG frames here")
    parser.add_argument("--keyboard", action="store_true", help="steer agent_0 with the arrows")
    args = parser.parse_args(argv)
    try:
        envs._task(args.task)  # the registry's own lookup ("Goal-v0" or "groupenvs/Goal-v0")
    except KeyError as err:
        parser.error(err.args[0])
    if args.episodes < 1:
        parser.error(f"--episodes must be >= 1, got {args.episodes}")
    if not isinstance(args.env_kwargs, dict):
        parser.error('--env-kwargs must be a JSON object, e.g. \'{"num_agents": 3}\'')
    if "render_mode" in args.env_kwargs:
        parser.error("give the render mode with --render, not in --env-kwargs")
    if args.save is not None and args.render != "rgb_array":
        parser.error("--save needs --render rgb_array")
    try:  # before playing: a folder that cannot be written fails now, not at the first frame
        check_int("--seed", args.seed, 0, 2**62)
        GroupParallelEnv(args.task, **args.env_kwargs).close()  # the task's own argument checks
        if args.render == "human":
            check_display("use --render rgb_array --save FOLDER instead")
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            if not os.access(args.save, os.W_OK):
                raise ValueError(f"--save {str(args.save)!r} is not a writable folder")
    except (ValueError, TypeError, OSError) as err:
        parser.error(str(err))
    returns = play(args.task, args.episodes, args.seed, args.env_kwargs, args.render, args.save,
                   args.keyboard)
    print(f"mean group return {np.mean(returns):+.3f} over {len(returns)} episodes")


if __name__ == "__main__":
    main()
