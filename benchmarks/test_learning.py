"""One parametrized test over the table in cases.py: train the whole budget, judge the final
policy on fresh episodes, record."""

from __future__ import annotations

import csv
import json
import platform
import subprocess
import time
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.breaks import applied
from benchmarks.cases import CASES, EVAL_SEED, Case
from benchmarks.conftest import RECORD_PROPERTY
from poca.adapters import make_env
from poca.config import POCAConfig
from poca.curves import steps_to_threshold
from poca.evaluate import evaluate
from poca.trainer import Trainer


def _groupenvs_version() -> str:
    try:
        return version("groupenvs")
    except PackageNotFoundError:
        return "not installed"


@cache
def _source_commit() -> str | None:
    """The git commit the benchmark ran from (`+dirty` with uncommitted changes to tracked
    files), so a record says which code it measured; None outside a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode or dirty.returncode:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _plot(case: Case, seed: int, log, final: float, path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    steps, returns = zip(*log, strict=False) if log else ((), ())
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(steps, returns, ".", alpha=0.3, label="episode")
    if len(returns) >= case.last:
        smooth = np.convolve(returns, np.ones(case.last) / case.last, "valid")
        ax.plot(steps[case.last - 1:], smooth, label=f"mean of last {case.last}")
    ax.axhline(case.threshold, color="k", lw=0.8)
    if steps:
        ax.plot([steps[-1]], [final], "r*", ms=10, label="final policy (eval)")
    ax.set(title=f"{case.id} (seed {seed})", xlabel="agent-steps", ylabel="group return")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run_case(case: Case, seed: int, break_name: str | None = None) -> dict:
    """Train `case` for its whole budget on `seed`, then evaluate the final policy on
    `case.eval_episodes` fresh episodes (env seeds disjoint from training). -> the record."""
    config = POCAConfig.load(case.preset).override(
        {**case.overrides, "max_steps": case.budget, "seed": seed})
    start = time.perf_counter()
    with applied(break_name):
        env = make_env(case.env_id, config.num_envs, case.env_kwargs, None)
        trainer = Trainer(env, config, env_id=case.env_id, env_kwargs=case.env_kwargs,
                          progress=False)
        result = trainer.run().finished(f"{case.id} seed {seed}")
    train_wall = time.perf_counter() - start
    eval_env = make_env(case.env_id, case.eval_episodes, case.env_kwargs, None)
    returns = evaluate(trainer.actor, eval_env, seed=EVAL_SEED + seed)
    final = float(returns.mean())
    return {"case": case.id, "seed": seed, "env_id": case.env_id, "break": break_name,
            "passed": final >= case.threshold, "threshold": case.threshold,
            "budget": case.budget, "agent_steps": result.agent_steps,
            "steps_to_threshold": steps_to_threshold(result.episode_log, case.threshold,
                                                     case.last),
            "final_return": final, "final_return_std": float(returns.std()),
            "eval_episodes": len(returns),
            "training_return_last": result.mean_return(case.last),
            "wall_seconds": time.perf_counter() - start,
            "agent_steps_per_s": result.agent_steps / max(train_wall, 1e-9),
            "finished_at": time.time(), "episode_log": result.episode_log,
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "numpy": np.__version__, "groupenvs": _groupenvs_version(),
                         "commit": _source_commit()}}


def write_curve(path, log) -> None:
    """A training curve as CSV (agent_steps, group_return per episode): kept with or without
    matplotlib."""
    with open(path, "w", newline="") as f:
        rows = csv.writer(f)
        rows.writerow(("agent_steps", "group_return"))
        rows.writerows(log)


def write_record(case: Case, record: dict, report_dir) -> dict:
    """`<case>-seed<s>.json` (the record without its episode log), the training curve as
    `<case>-seed<s>-curve.csv` (agent_steps, group_return per episode) and, with matplotlib,
    as a PNG; under a break `<case>-seed<s>-break-<name>`, so that a broken run never
    overwrites an unbroken one's record in the same folder."""
    record = dict(record)
    log = record.pop("episode_log")
    name = f"{case.id}-seed{record['seed']}" + (f"-break-{record['break']}"
                                                 if record.get("break") else "")
    write_curve(report_dir / f"{name}-curve.csv", log)
    (report_dir / f"{name}.json").write_text(json.dumps(record, indent=1))
    _plot(case, record["seed"], log, record["final_return"], report_dir / f"{name}.png")
    return record


def _marks(case: Case) -> list:
    marks = [pytest.mark.slow] if case.slow else []
    if case.known_failure:
        marks.append(pytest.mark.xfail(reason=case.known_failure, strict=True))
    return marks


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in CASES])
def test_final_policy_reaches_threshold(case: Case, seed: int, report_dir, break_name, request):
    record = write_record(case, run_case(case, seed, break_name), report_dir)
    request.node.user_properties.append((RECORD_PROPERTY, json.dumps(record)))  # conftest.py
    assert record["passed"], (
        f"{case.id} (seed {seed}): the final policy's mean group return over "
        f"{record['eval_episodes']} fresh episodes is {record['final_return']:+.3f} < "
        f"{case.threshold} after {record['agent_steps']} agent-steps")
