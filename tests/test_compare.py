"""`poca compare`: one JSON per run, a table per critic, a PNG of the curves, clear errors."""

import json

import pytest

from poca.cli import main


def test_compare_writes_a_record_per_run_and_a_table(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", "groupenvs/Goal-v0", "--config", "goal", "--critics",
                 "attention,independent", "--seeds", "2", "--max-steps", "3000",
                 "--eval-episodes", "20", "--threshold", "0.5", "--out", str(out)])
    assert code == 0
    records = {p.name: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert sorted(records) == ["attention-seed0.json", "attention-seed1.json",
                               "independent-seed0.json", "independent-seed1.json"]
    for name, r in records.items():
        assert name == f"{r['critic']}-seed{r['seed']}.json"
        assert r["config"]["critic"] == r["critic"] and r["config"]["seed"] == r["seed"]
        assert r["agent_steps"] >= 3000 and r["eval_episodes"] == 20
        assert r["score"] == "group return" and -1.0 <= r["final_return"] <= 1.0
        assert r["curve"] and (out / f"{r['critic']}-seed{r['seed']}" / "checkpoints").is_dir()
    printed = capsys.readouterr().out
    assert "| attention |" in printed and "| independent |" in printed
    # the same --out again: refused before training anything, naming the runs it holds
    assert main(["compare", "groupenvs/Goal-v0", "--critics", "attention", "--out",
                 str(out)]) == 2
    assert "already holds the runs ['attention-seed0', 'attention-seed1']; choose another " \
           "--out" in capsys.readouterr().err
    pytest.importorskip("matplotlib")
    assert (out / "curves.png").stat().st_size > 0


def test_compare_refuses_an_unknown_critic(tmp_path, capsys):
    assert main(["compare", "groupenvs/Goal-v0", "--critics", "attention,coma",
                 "--out", str(tmp_path)]) == 2
    assert "unknown ['coma']" in capsys.readouterr().err
    assert main(["compare", "groupenvs/Goal-v0", "--critics", "attention,attention",
                 "--out", str(tmp_path)]) == 2
    assert "each critic once, got 'attention,attention'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
