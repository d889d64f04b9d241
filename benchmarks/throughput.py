"""Environment throughput in agent-steps per second (a script, not a test).

    python benchmarks/throughput.py [--repeats 5] [--seconds 0.5]

Measures, in one run: the native batched Goal core at several batch sizes, the visual (one
20x20 image) and entity-list variants, the paper tasks (Dungeon Escape, Baton Pass, Push Block)
at E=1024, the PettingZoo view (one group, pre-drawn actions, agents alive counted), and a
bare numpy update of the same shape as Goal's step (the ceiling: read actions, move, clamp,
detect finishers, write observations, with no episode logic). "native" rows step pre-drawn
random actions and count every agent slot (env steps x A); "reference policy" rows step the
task's scripted policy, its cost included, and count the agents alive. Prints medians.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import envs


def _rate(step_fn, agent_steps_per_call: int, seconds: float) -> float:
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(10):
            step_fn()
        calls += 10
    return calls * agent_steps_per_call / elapsed


def _median(fn, repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def core_rate(task: str, num_envs: int, seconds: float, **kw) -> float:
    env = envs.make_group(task, num_envs=num_envs, **kw)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    A, (C, branches) = env.max_agents, env.spec.action_sizes
    pool = []  # pre-drawn actions, so the policy's cost is not measured
    for _ in range(8):
        act = {}
        if C:
            act["continuous"] = rng.uniform(-1, 1, (num_envs, A, C)).astype(np.float32)
        if branches:
            act["discrete"] = rng.integers(0, branches, (num_envs, A, len(branches)))
        pool.append(act)
    it = iter(range(1 << 62))
    return _rate(lambda: env.step(pool[next(it) % 8]), num_envs * A, seconds)


def reference_rate(task: str, num_envs: int, seconds: float) -> float:
    """Steps driven by the task's scripted `reference_policy` (its cost included)."""
    env = envs.make_group(task, num_envs=num_envs)
    env.reset(seed=0)
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        count += int(env.alive.sum())  # agents that act, not slots
        env.step(env.reference_policy())
    return count / (time.perf_counter() - start)


def ceiling_rate(num_envs: int, num_agents: int, seconds: float) -> float:
    rng = np.random.default_rng(0)
    pos = np.zeros((num_envs, num_agents, 1), np.float32)
    goal = np.ones((num_envs, num_agents), np.float32)
    acts = [rng.integers(0, 2, (num_envs, num_agents, 1)) for _ in range(8)]
    it = iter(range(1 << 62))

    def step():
        a = acts[next(it) % 8]
        np.clip(pos + np.where(a == 1, 0.2, -0.2), -1, 1, out=pos)
        done = (np.abs(pos) >= 1).all(axis=2)
        pos[done] = 0.0
        return np.repeat(goal[:, :, None], 3, axis=2), done

    return _rate(step, num_envs * num_agents, seconds)


def pettingzoo_rate(task: str, seconds: float) -> float:
    from envs.pettingzoo import GroupParallelEnv

    env = GroupParallelEnv(task)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    pool = [dict(zip(env.possible_agents, rng.integers(0, 2, len(env.possible_agents)).tolist(),
                     strict=True)) for _ in range(8)]  # pre-drawn, as for the native rows
    count = [0]

    def step():
        if not env.agents:
            env.reset()
        n = len(env.agents)
        actions = pool[count[0] % 8]
        env.step({a: actions[a] for a in env.agents})
        count[0] += n

    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
    return count[0] / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5)
    args = parser.parse_args()
    r, s = args.repeats, args.seconds
    rows = []
    for E in (1, 64, 1024, 16384):
        # native and ceiling alternate, so a slow moment of the machine hits both alike
        pairs = [(core_rate("Goal-v0", E, s), ceiling_rate(E, 2, s)) for _ in range(r)]
        native, ceiling = (statistics.median(x) for x in zip(*pairs, strict=True))
        rows.append((f"Goal-v0 native E={E}", native, ceiling))
    for task, E in (("GoalVisual-v0", 256), ("GoalEntities-v0", 1024)):
        rows.append((f"{task} native E={E}",
                     _median(lambda task=task, E=E: core_rate(task, E, s), r), None))
    rows.append(("Goal-v0 reference policy E=1024",
                 _median(lambda: reference_rate("Goal-v0", 1024, s), r), None))
    for task in ("DungeonEscape-v0", "DungeonEscapeHard-v0", "BatonPass-v0", "PushBlock-v0"):
        # random actions count every slot; the reference rows count the agents alive
        rows.append((f"{task} native E=1024",
                     _median(lambda task=task: core_rate(task, 1024, s), r), None))
        rows.append((f"{task} reference policy E=1024",
                     _median(lambda task=task: reference_rate(task, 1024, s), r), None))
    rows.append(("Goal-v0 PettingZoo view",
                 _median(lambda: pettingzoo_rate("Goal-v0", s), r), None))
    print(f"{'case':44s} {'agent-steps/s':>15s} {'ceiling':>15s} {'of ceiling':>10s}")
    for name, rate, ceiling in rows:
        frac = f"{rate / ceiling:10.0%}" if ceiling else ""
        ceil = f"{ceiling:15,.0f}" if ceiling else ""
        print(f"{name:44s} {rate:15,.0f} {ceil:>15s} {frac}")


if __name__ == "__main__":
    main()
