"""Deliberate breaks of MA-POCA's mechanisms, to prove the benchmark catches each one.

Each break is applied from outside the library, by patching one named function of `poca` for the
duration of a run (nothing in `poca/` knows about them). A benchmark that still passes with a
break applied does not guard that mechanism.

    pytest benchmarks --break baseline        # the whole suite with one break applied
    python -m benchmarks.breaks               # every break x every case: the catch matrix
"""

from __future__ import annotations

import contextlib
import math
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from poca import networks, rollout, trainer


def _no_posthumous_credit(next_value, alive, group_done):
    """An agent that left at t while its group goes on bootstraps from 0, not V(s_{t+1})."""
    per_agent = rollout.posthumous_bootstrap(next_value, alive, group_done).clone()
    left = torch.zeros_like(alive)
    left[:-1] = alive[:-1] & ~alive[1:]  # acting at t, gone at t + 1 (within the rollout)
    left &= ~group_done[..., None]
    per_agent[left] = 0.0
    return per_agent


def _value_as_baseline(forward):
    """The counterfactual baselines b_i replaced by the group value V: no per-agent credit."""
    def patched(self, *args, **kwargs):
        value, baseline, states = forward(self, *args, **kwargs)
        return value, value[..., None].expand_as(baseline), states
    return patched


def _critic_sees_everyone(method, alive_index):
    """The critic's attention, pooling and agent count ignore `alive`: agents that left stay
    visible to it (their slots hold zeros: `poca.acting.blank_absent`)."""
    def patched(self, *args, **kwargs):
        args = list(args)
        args[alive_index] = torch.ones_like(args[alive_index])
        return method(self, *args, **kwargs)
    return patched


def _negated(normalized):
    def patched(x, mask):
        return -normalized(x, mask)
    return patched


def _no_group_reward(group_reward, reward):
    """The group reward dropped from what the agents learn from (individual rewards only)."""
    return rollout.team_reward(group_reward * 0, reward)


@dataclass(frozen=True)
class Break:
    name: str
    mechanism: str
    patches: Callable[[], list[tuple[object, str, object]]]  # (owner, attribute, replacement)


BREAKS = {b.name: b for b in [
    Break("posthumous", "posthumous credit: an agent that left bootstraps from the group's value",
          lambda: [(trainer, "posthumous_bootstrap", _no_posthumous_credit)]),
    Break("baseline", "counterfactual baseline b_i (advantage = G - b_i, not G - V)",
          lambda: [(networks.Critic, "forward", _value_as_baseline(networks.Critic.forward))]),
    Break("mask", "the critic attends only over the agents still alive",
          lambda: [(networks.Critic, "forward",
                    _critic_sees_everyone(networks.Critic.forward, 3)),
                   (networks.Critic, "value", _critic_sees_everyone(networks.Critic.value, 1))]),
    Break("sign", "the sign of the advantage", lambda: [(trainer, "normalized",
                                                           _negated(trainer.normalized))]),
    Break("group-reward", "the group reward reaches the learner",
          lambda: [(trainer, "team_reward", _no_group_reward)]),
]}


@contextlib.contextmanager
def applied(name: str | None):
    """Apply break `name` (None: nothing) for the duration of the block."""
    if name is None:
        yield
        return
    if name not in BREAKS:
        raise ValueError(f"unknown break {name!r}; known: {sorted(BREAKS)}")
    patches = BREAKS[name].patches()
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in patches]
    try:
        for owner, attr, replacement in patches:
            setattr(owner, attr, replacement)
        yield
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark once per break (and once unbroken) through pytest-xdist; print the
    matrix of which cases catch which break."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m benchmarks.breaks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--breaks", default=",".join(BREAKS), help="comma-separated subset")
    from benchmarks.conftest import _seeds

    parser.add_argument("--seeds", type=_seeds, default=3)
    parser.add_argument("--workers", default="2", help="pytest-xdist -n")
    parser.add_argument("--report", type=Path, default=Path("bench-results/breaks"))
    parser.add_argument("pytest_args", nargs="*", help="passed on to pytest (e.g. -k group)")
    args = parser.parse_args(argv)
    names = [None] + [b for b in args.breaks.split(",") if b]
    for name in names[1:]:
        if name not in BREAKS:
            parser.error(f"unknown break {name!r}; known: {sorted(BREAKS)}")
    start, started_at = time.perf_counter(), time.time()
    for name in names:
        folder = args.report / (name or "none")
        cmd = [sys.executable, "-m", "pytest", "benchmarks", "-q", "-p", "no:cacheprovider",
               "-n", args.workers, "--bench-seeds", str(args.seeds), "--bench-report",
               str(folder), *(["--break", name] if name else []), *args.pytest_args]
        print(f"$ {' '.join(cmd)}", flush=True)
        child = subprocess.Popen(cmd)
        try:
            code = child.wait()
        except KeyboardInterrupt:  # stop without a matrix of a part, once pytest has stopped
            _stop(child)
            print(f"interrupted during break {name or 'none'}: stopped, no matrix",
                  file=sys.stderr)
            return 130
        # 0: all passed, 1: some failed (what a break should do); anything else ran nothing
        # to judge (a usage error, no test selected, an interrupt): no matrix from old records
        if code not in (0, 1):
            print(f"pytest exited with status {code} for break {name or 'none'}: stopped, no "
                  "matrix", file=sys.stderr)
            return code
    wall = time.perf_counter() - start
    print()
    print(matrix(args.report, names, since=started_at))
    print(f"\nwall time {wall:.0f} s")
    return 0


def _stop(child: subprocess.Popen) -> None:
    """Stop a pytest child after our Ctrl-C: a terminal's reached it too, so it is printing
    its summary (its records stay); an interrupt sent to us alone (`kill -INT`, a supervisor)
    is passed on after a moment; one that hangs is killed."""
    try:
        try:
            child.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGINT)
        child.wait(timeout=60)
        return
    except (KeyboardInterrupt, subprocess.TimeoutExpired):  # a second Ctrl-C, or a hang
        child.kill()
        child.wait()


def matrix(report: Path, names: list[str | None], since: float = 0.0) -> str:
    """Markdown table: per case and break, passed seeds / seeds, the mean final return and the
    median agent-steps to the threshold of the training curve ("never" when most seeds' curves
    never reached it), from the records finished `since` (a time.time(); earlier runs' records
    in the same folders are left out)."""
    import json

    table: dict[str, dict[str, list[dict]]] = {}
    for name in names:
        for path in sorted((report / (name or "none")).glob("*.json")):
            record = json.loads(path.read_text())
            if record.get("finished_at", 0.0) < since:
                continue
            table.setdefault(record["case"], {}).setdefault(name or "none", []).append(record)
    cols = [n or "none" for n in names]
    lines = ["| case | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    caught = {c: 0 for c in cols}
    for case, by_break in table.items():
        cells = []
        for col in cols:
            records = by_break.get(col, [])
            if not records:
                cells.append("-")
                continue
            passed = sum(r["passed"] for r in records)
            final = sum(r["final_return"] for r in records) / len(records)
            mark = "" if col == "none" else (" **caught**" if passed == 0 else "")
            steps = statistics.median(math.inf if r["steps_to_threshold"] is None
                                      else r["steps_to_threshold"] for r in records)
            shown = "never" if math.isinf(steps) else f"{steps / 1000:.1f}k"
            cells.append(f"{passed}/{len(records)} ({final:+.2f}, {shown}){mark}")
            if col != "none" and passed == 0:
                caught[col] += 1
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    lines.append("| cases catching it (0 seeds pass) | "
                 + " | ".join("-" if c == "none" else str(caught[c]) for c in cols) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
