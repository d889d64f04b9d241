"""Trainer speed on Goal (a script, not a test), one CPU thread.

    python benchmarks/trainer_speed.py [--seeds 5]

(a) end-to-end agent-steps/s of `poca train groupenvs/Goal-v0 --config goal` (median over seeds);
(b) wall seconds to solve ML-Agents' parity case (reward_mode="mlagents", shared_goal=True, the
    `mlagents_test` config, discrete and continuous): training is deterministic, so each seed is
    run once to find the agent-step where the mean group return of the last 20 episodes reaches
    0.9, then again with `max_steps` at that step, timed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from poca.config import POCAConfig
from poca.trainer import train

PARITY = {"reward_mode": "mlagents", "shared_goal": True}


def steps_to_threshold(log, threshold=0.9, last=20):
    returns = [r for _, r in log]
    for i in range(last - 1, len(log)):
        if np.mean(returns[i - last + 1:i + 1]) >= threshold:
            return log[i][0]
    return None


def timed(env_kwargs, config):
    start = time.perf_counter()
    result = train("Goal-v0", config, env_kwargs)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    seeds = range(args.seeds)
    timed({}, POCAConfig.load("goal").override({"max_steps": 2000}))  # warm up torch

    rates, solved_at = [], []
    for seed in seeds:
        result, wall = timed({}, POCAConfig.load("goal").override({"seed": seed}))
        rates.append(result.agent_steps / wall)
        solved_at.append(steps_to_threshold(result.episode_log))
    print(f"(a) Goal-v0, goal preset: {statistics.median(rates):,.0f} agent-steps/s median "
          f"({', '.join(f'{r:,.0f}' for r in rates)}); solved at {solved_at} agent-steps")

    for name, sizes in (("discrete", (0, 1)), ("continuous", (1, 0))):
        kwargs = {**PARITY, "action_sizes": sizes}
        walls, hits = [], []
        for seed in seeds:
            config = POCAConfig.load("mlagents_test").override({"seed": seed})
            result, _ = timed(kwargs, config)
            hit = steps_to_threshold(result.episode_log)
            hits.append(hit)
            if hit is not None:
                walls.append(timed(kwargs, config.override({"max_steps": hit}))[1])
        median = f"{statistics.median(walls):.2f}" if walls else "n/a"
        print(f"(b) parity {name}: {median} s median to solve "
              f"({', '.join(f'{w:.2f}' for w in walls)}); solved at {hits} agent-steps")


if __name__ == "__main__":
    main()
