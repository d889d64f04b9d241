"""Play a registered task with a random policy and print each episode's group return.

    python -m envs.play Goal-v0 --episodes 5 --seed 0
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import envs


def play(task: str, episodes: int, seed: int, env_kwargs: dict) -> list[float]:
    """Random actions in the PettingZoo view; returns the group return of each episode."""
    from envs.pettingzoo import GroupParallelEnv

    env = GroupParallelEnv(task, **env_kwargs)
    returns = []
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        for agent in env.possible_agents:
            env.action_space(agent).seed(seed + episode)
        group_return, steps = 0.0, 0
        while env.agents:
            _, _, _, _, infos = env.step({a: env.action_space(a).sample() for a in env.agents})
            group_return += next(iter(infos.values()))["group_reward"]
            steps += 1
        returns.append(group_return)
        print(f"episode {episode}: group return {group_return:+.3f} in {steps} steps")
    env.close()
    return returns


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", help=f"one of {sorted(envs.TASKS)}")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-kwargs", type=json.loads, default={},
                        help='task arguments as JSON, e.g. \'{"num_agents": 3}\'')
    args = parser.parse_args(argv)
    returns = play(args.task, args.episodes, args.seed, args.env_kwargs)
    print(f"mean group return {np.mean(returns):+.3f} over {len(returns)} episodes")


if __name__ == "__main__":
    main()
