"""The paper comparison (deselected by default; `pytest benchmarks --paper`): on Dungeon Escape
and Baton Pass, MA-POCA's final policy must beat the `independent` critic (the paper's PPO: no
centralized critic, no baselines, no posthumous credit) trained on the same seed with the same
settings and budget, by the case's `beats_independent_by`. Both final policies are judged on the
same fresh episodes. This is the paper's claim (arXiv 2111.05992, §6.2) as a regression test."""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchmarks.cases import CASES
from benchmarks.test_learning import run_case

pytestmark = pytest.mark.paper


@pytest.mark.parametrize("case", [c for c in CASES if c.beats_independent_by is not None],
                         ids=lambda c: c.id)
def test_poca_beats_independent(case, seed, report_dir, break_name):
    independent = dataclasses.replace(case, id=f"{case.id}-independent",
                                      overrides={**case.overrides, "critic": "independent"})
    records = {"attention": run_case(case, seed, break_name),
               "independent": run_case(independent, seed, break_name)}
    folder = report_dir / "paper"
    folder.mkdir(parents=True, exist_ok=True)
    for critic, record in records.items():
        record.pop("episode_log")
        (folder / f"{case.id}-{critic}-seed{seed}.json").write_text(json.dumps(record, indent=1))
    poca, ppo = (records[c]["final_return"] for c in ("attention", "independent"))
    assert poca >= ppo + case.beats_independent_by, (
        f"{case.id} (seed {seed}): POCA's final return {poca:+.3f} is not ahead of the "
        f"independent critic's {ppo:+.3f} by {case.beats_independent_by:.3f}")
