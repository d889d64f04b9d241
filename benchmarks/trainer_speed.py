"""Trainer speed on Goal (a script, not a test), one CPU thread.

    python benchmarks/trainer_speed.py [--seeds 5]

(a) end-to-end agent-steps/s of `poca train groupenvs/Goal-v0 --config goal` (median over seeds);
(b) wall seconds to solve ML-Agents' parity case (reward_mode="mlagents", shared_goal=True, the
    `mlagents_test` config, discrete and continuous): training is deterministic, so each seed is
    run once to find the agent-step where the mean group return of the last 20 episodes reaches
    0.9, then again with `max_steps` at that step, timed.

    python benchmarks/trainer_speed.py --third-party [--workers 0 1 2] [--baseline DIR]

(c) third-party PettingZoo envs through the adapter: Knights Archers Zombies (vector
    observations) and mpe2's simple_spread: the raw env's agent-steps/s in one process (16
    copies stepped one after another with random actions, agents alive counted), then
    `poca train`'s agent-steps/s (agent-steps over the training loop's wall time, as
    `poca train` prints it) with each number of env workers, interleaved round by round;
(d) the Goal preset's end-to-end rate and start-up: `python -c "import torch"` against a whole
    `poca train` process of ML-Agents' 3,000-step case, interleaved; with `--baseline DIR` (a
    copy of another version, e.g. `git archive COMMIT | tar -x -C DIR`) the same runs of
    that version alternate with this one's, each in its own process.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

from envs.goal import MLAGENTS_PARITY as PARITY
from poca.config import POCAConfig
from poca.curves import steps_to_threshold
from poca.trainer import train


def timed(env_kwargs, config):
    start = time.perf_counter()
    result = train("Goal-v0", config, env_kwargs)
    return result, time.perf_counter() - start


ROOT = Path(__file__).resolve().parent.parent
# (label, module candidates, factory, kwargs): pettingzoo 1.27 ships KAZ v11 (obs_method="vector"
# is v10's vector_state=True)
THIRD_PARTY = (
    ("KAZ (vector obs)", (("pettingzoo.butterfly.knights_archers_zombies_v10",
                           {"vector_state": True}),
                          ("pettingzoo.butterfly.knights_archers_zombies_v11",
                           {"obs_method": "vector"}))),
    ("mpe2 simple_spread (N=3)", (("mpe2.simple_spread_v3",
                                   {"N": 3, "continuous_actions": False}),)),
)
COPIES = 16
THIRD_PARTY_STEPS = 20480  # 32 updates of the buffer derived for it (640 agent-steps)


def third_party_factory(candidates):
    for module, kwargs in candidates:
        try:
            return partial(importlib.import_module(module).parallel_env, **kwargs)
        except ImportError:
            continue
    return None


def raw_rate(factory, seconds: float = 5.0) -> float:
    """Agent-steps/s of COPIES copies stepped one after another in this process."""
    copies = [factory() for _ in range(COPIES)]
    rng = np.random.default_rng(0)
    for i, env in enumerate(copies):
        env.reset(seed=i)
    sizes = {a: int(env.action_space(a).n) for env in copies[:1] for a in env.possible_agents}
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for env in copies:
            if not env.agents:
                env.reset()
            count += len(env.agents)
            env.step({a: int(rng.integers(sizes[a])) for a in env.agents})
    rate = count / (time.perf_counter() - start)
    for env in copies:
        env.close()
    return rate


def train_rate(factory, workers: int) -> float:
    config = POCAConfig().override({"num_envs": COPIES, "max_steps": THIRD_PARTY_STEPS,
                                    "num_env_workers": workers})
    result = train(factory, config)
    return result.agent_steps / result.wall_seconds


def third_party(worker_counts, rounds: int) -> None:
    for label, candidates in THIRD_PARTY:
        factory = third_party_factory(candidates)
        if factory is None:
            print(f"(c) {label}: not installed, skipped")
            continue
        rates = {"raw": []} | {w: [] for w in worker_counts}
        for _ in range(rounds):  # interleaved, so a busy moment of the machine hits all alike
            rates["raw"].append(raw_rate(factory))
            for w in worker_counts:
                rates[w].append(train_rate(factory, w))
        raw = statistics.median(rates["raw"])
        parts = [f"raw env {raw:,.0f}"] + [
            f"{w or 'no'} worker{'s' if w != 1 else ''} {statistics.median(rates[w]):,.0f} "
            f"({statistics.median(rates[w]) / raw:.0%} of raw)" for w in worker_counts]
        print(f"(c) {label}, {COPIES} copies, agent-steps/s: " + "; ".join(parts), flush=True)


def _python(path: Path | str, *args: str) -> float:
    """Wall seconds of a Python process with `path` first on its path."""
    env = {**os.environ, "PYTHONPATH": str(path), "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, check=True, capture_output=True,
                   cwd="/tmp")
    return time.perf_counter() - start


def _goal_rate(path, seed: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(path), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--goal-rate",
                          str(seed)], env=env, check=True, capture_output=True, text=True,
                         cwd="/tmp")
    return float(out.stdout.split()[-1])


def startup_and_goal(baseline: Path | None, rounds: int) -> None:
    versions = {"this": ROOT} | ({"baseline": baseline} if baseline else {})
    case = ["-m", "poca.cli", "train", "Goal-v0", "--config", "mlagents_test", "--env-kwargs",
            json.dumps({**PARITY, "action_sizes": [0, 1]}), "--no-progress"]
    walls = {"import torch": []} | {f"poca train ({v})": [] for v in versions}
    helps = {f"poca train --help ({v})": [] for v in versions}
    goal = {v: [] for v in versions}
    for r in range(rounds):
        walls["import torch"].append(_python(ROOT, "-c", "import torch"))
        for v, path in versions.items():
            run_dir = f"/tmp/trainer_speed_{os.getpid()}_{v}_{r}"
            walls[f"poca train ({v})"].append(_python(path, *case, "--run-dir", run_dir))
            helps[f"poca train --help ({v})"].append(
                _python(path, "-m", "poca.cli", "train", "--help"))
            goal[v].append(_goal_rate(path, r))
    torch_s = statistics.median(walls["import torch"])
    for name, values in (walls | helps).items():
        extra = "" if name == "import torch" else \
            f" ({statistics.median(values) - torch_s:+.2f} s against import torch)"
        print(f"(d) {name}: {statistics.median(values):.2f} s median wall "
              f"({', '.join(f'{x:.2f}' for x in values)}){extra}")
    for v, rates in goal.items():
        print(f"(d) Goal preset end-to-end ({v}): {statistics.median(rates):,.0f} agent-steps/s "
              f"median ({', '.join(f'{x:,.0f}' for x in rates)})")
    if baseline:
        print(f"(d) Goal preset: this / baseline = "
              f"{statistics.median(goal['this']) / statistics.median(goal['baseline']):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--third-party", action="store_true", help="(c) and (d) instead")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a checkout to compare (d) with")
    parser.add_argument("--goal-rate", type=int, help=argparse.SUPPRESS)  # one (d) run
    args = parser.parse_args()
    if args.goal_rate is not None:  # as (a): warm up, then one seed, set-up included
        timed({}, POCAConfig.load("goal").override({"max_steps": 2000}))
        result, wall = timed({}, POCAConfig.load("goal").override({"seed": args.goal_rate}))
        print(result.agent_steps / wall)
        return
    if args.third_party:
        third_party(args.workers, args.rounds)
        startup_and_goal(args.baseline, args.rounds)
        return
    seeds = range(args.seeds)
    timed({}, POCAConfig.load("goal").override({"max_steps": 2000}))  # warm up torch

    rates, solved_at = [], []
    for seed in seeds:
        result, wall = timed({}, POCAConfig.load("goal").override({"seed": seed}))
        rates.append(result.agent_steps / wall)
        solved_at.append(steps_to_threshold(result.episode_log, 0.9))
    print(f"(a) Goal-v0, goal preset: {statistics.median(rates):,.0f} agent-steps/s median "
          f"({', '.join(f'{r:,.0f}' for r in rates)}); solved at {solved_at} agent-steps")

    for name, sizes in (("discrete", (0, 1)), ("continuous", (1, 0))):
        kwargs = {**PARITY, "action_sizes": sizes}
        walls, hits = [], []
        for seed in seeds:
            config = POCAConfig.load("mlagents_test").override({"seed": seed})
            result, _ = timed(kwargs, config)
            hit = steps_to_threshold(result.episode_log, 0.9)
            hits.append(hit)
            if hit is not None:
                walls.append(timed(kwargs, config.override({"max_steps": hit}))[1])
        median = f"{statistics.median(walls):.2f}" if walls else "n/a"
        print(f"(b) parity {name}: {median} s median to solve "
              f"({', '.join(f'{w:.2f}' for w in walls)}); solved at {hits} agent-steps")


if __name__ == "__main__":
    main()
