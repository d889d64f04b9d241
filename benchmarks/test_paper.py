"""The paper comparison (deselected by default: `pytest benchmarks -m paper`, or `--paper` to add it
to the whole suite): on Dungeon Escape and Baton Pass, MA-POCA's final policy must beat the
`independent` critic (the paper's PPO: no centralized critic, no baselines, no posthumous
credit) trained on the same seeds with the same settings and budget, on every seed and clearly on
the mean (ahead by more than the larger spread over seeds, `clearly_above`, the rule of the
third-party group). Both are judged on the same fresh episodes; `paper/<case>.md` and `.png` get
`poca compare`'s table and curves. This is the paper's claim (arXiv 2111.05992, §6.2) as a
regression test."""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchmarks.cases import CASES
from benchmarks.conftest import PAPER_PROPERTY
from benchmarks.test_learning import run_case, write_curve
from benchmarks.third_party import clearly_above
from poca import compare

pytestmark = pytest.mark.paper


@pytest.mark.parametrize("case", [c for c in CASES if c.beats_independent], ids=lambda c: c.id)
def test_poca_beats_independent(case, paper_seeds, report_dir, break_name, request):
    independent = dataclasses.replace(case, id=f"{case.id}-independent",
                                      overrides={**case.overrides, "critic": "independent"})
    folder = report_dir / "paper"
    folder.mkdir(parents=True, exist_ok=True)
    finals: dict[str, list[float]] = {"attention": [], "independent": []}
    runs = []  # in poca compare's record form, for its table and plot
    for seed in range(paper_seeds):
        for critic, variant in (("attention", case), ("independent", independent)):
            record = run_case(variant, seed, break_name)
            curve = record.pop("episode_log")
            (folder / f"{case.id}-{critic}-seed{seed}.json").write_text(
                json.dumps(record, indent=1))
            write_curve(folder / f"{case.id}-{critic}-seed{seed}-curve.csv", curve)
            finals[critic].append(record["final_return"])
            runs.append({"critic": critic, "seed": seed, "env_id": case.env_id, "curve": curve,
                         "score": "group return", "final_return": record["final_return"],
                         "steps_to_threshold": record["steps_to_threshold"],
                         "agent_steps": record["agent_steps"], "wall_s": record["wall_seconds"]})
    table = compare.table(runs, case.threshold)
    (folder / f"{case.id}.md").write_text(table + "\n")
    request.node.user_properties.append((PAPER_PROPERTY, json.dumps({"case": case.id,
                                                                      "table": table})))
    compare.plot(runs, folder / f"{case.id}.png")
    summary = (f"{case.id}: final return per seed, POCA {finals['attention']}, "
               f"independent {finals['independent']}")
    assert all(p > i for p, i in zip(finals["attention"], finals["independent"], strict=True)), (
        f"POCA is not ahead on every seed. {summary}")
    assert clearly_above(finals["attention"], finals["independent"]), (
        f"POCA is not clearly ahead on the mean. {summary}")
