"""The trainer end to end: learning, determinism, checkpoints, guards, config and CLI."""

import csv
import json
import re

import pytest
import torch
import yaml

from envs.goal import MLAGENTS_PARITY as PARITY
from poca import checkpoint
from poca.adapters import make_env
from poca.cli import main
from poca.config import POCAConfig
from poca.curves import steps_to_threshold
from poca.evaluate import evaluate, load_actor
from poca.rollout import to_units
from poca.trainer import Trainer, TrainingDiverged, train


@pytest.mark.parametrize("action_sizes", [(0, 1), (1, 0)], ids=["discrete", "continuous"])
def test_solves_mlagents_parity_case_within_mlagents_budget(action_sizes):
    config = POCAConfig.load("mlagents_test")
    result = train("Goal-v0", config, {**PARITY, "action_sizes": action_sizes})
    assert result.agent_steps <= 3000 + 100
    assert steps_to_threshold(result.episode_log, 0.9) is not None, result.episode_log[-20:]


def test_solves_group_reward_mode_within_20k():
    result = train("Goal-v0", POCAConfig.load("goal"))
    assert steps_to_threshold(result.episode_log, 0.9) <= 20_000


def small_config(**over):
    base = {"hyperparameters.batch_size": 32, "hyperparameters.buffer_size": 128,
            "network_settings.hidden_units": 16, "network_settings.num_layers": 1,
            "num_envs": 4, "max_steps": 1000, "checkpoint_interval": 500, "summary_freq": 250}
    return POCAConfig().override({**base, **over})


def test_same_seed_same_training_curve():
    a = train("Goal-v0", small_config(), {"action_sizes": (1, 1)})
    b = train("Goal-v0", small_config(), {"action_sizes": (1, 1)})
    c = train("Goal-v0", small_config(seed=1), {"action_sizes": (1, 1)})
    assert a.episode_log == b.episode_log
    assert a.episode_log != c.episode_log


@pytest.mark.parametrize("normalize_value", [False, True])
def test_resume_restores_parameters_optimizer_and_counters(tmp_path, normalize_value):
    config = small_config(**{"network_settings.normalize_value": normalize_value})
    first = Trainer(make_env("Goal-v0", 4), config, tmp_path, "Goal-v0", progress=False)
    first.run()
    saved = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    second = Trainer(make_env("Goal-v0", 4), config.override({"max_steps": 1500}), tmp_path,
                     "Goal-v0", progress=False)
    second.load(tmp_path / "checkpoints" / "latest.pt")
    assert second.agent_steps == first.agent_steps == saved["agent_steps"] >= 1000
    for p, q in zip(first.params, second.params, strict=False):
        assert torch.equal(p, q)
    for a, b in zip(first.critic.return_stats(), second.critic.return_stats(), strict=True):
        assert torch.equal(a, b) and (a.item() not in (0.0, 1.0)) == normalize_value
    opt_a, opt_b = first.optimizer.state_dict(), second.optimizer.state_dict()
    for k in opt_a["state"]:
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(opt_a["state"][k][name], opt_b["state"][k][name])
    result = second.run()
    assert result.agent_steps >= 1500 and second.updates > first.updates
    assert len(sorted((tmp_path / "checkpoints").glob("step-*.pt"))) <= config.keep_checkpoints


def test_eval_of_final_checkpoint_reproduces_training_success(tmp_path):
    result = train("Goal-v0", POCAConfig.load("goal"), run_dir=tmp_path)
    assert result.mean_return() >= 0.9
    env = make_env("Goal-v0", 100)
    returns = evaluate(load_actor(result.checkpoint, env), env, seed=3)
    assert len(returns) == 100 and returns.mean() >= 0.9


def test_bad_checkpoints_fail_clearly(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(checkpoint.CheckpointError, match="not a readable checkpoint"):
        checkpoint.load(bad)
    with pytest.raises(checkpoint.CheckpointError, match="no checkpoint"):
        checkpoint.load(tmp_path / "missing.pt")
    trainer = Trainer(make_env("Goal-v0", 2), small_config(max_steps=200), tmp_path,
                      progress=False)
    trainer.run()
    other = make_env("Goal-v0", 2, {"action_sizes": (1, 0)})
    with pytest.raises(checkpoint.CheckpointError,  # names what it was trained on
                       match=r"different environment \(.* with env_kwargs \{\}\): its"):
        load_actor(tmp_path / "checkpoints" / "latest.pt", other)
    wider = Trainer(make_env("Goal-v0", 2), small_config(**{"network_settings.hidden_units": 8}),
                    progress=False)
    with pytest.raises(checkpoint.CheckpointError, match="network configuration"):
        wider.load(tmp_path / "checkpoints" / "latest.pt")


def test_a_checkpoint_from_before_normalize_value_resumes_in_raw_return_units(tmp_path):
    """Its critic learned in raw units (the default then) and it holds no return statistics:
    read with today's default (true), it no longer fit its own network."""
    train("Goal-v0", small_config(max_steps=200, **{"network_settings.normalize_value": False}),
          run_dir=tmp_path)
    latest = tmp_path / "checkpoints" / "latest.pt"
    state = torch.load(latest, weights_only=True)
    del state["config"]["network_settings"]["normalize_value"]
    torch.save(state, latest)
    assert main(["train", "Goal-v0", "--run-dir", str(tmp_path), "--resume", "--max-steps",
                 "400", "--no-progress"]) == 0
    resumed = checkpoint.load(latest)
    assert not resumed["config"]["network_settings"]["normalize_value"]
    assert not any(key.startswith("returns.") for key in resumed["critic"])  # still raw units
    assert resumed["agent_steps"] > 200
    assert main(["eval", "Goal-v0", "--checkpoint", str(latest), "--episodes", "2"]) == 0


def test_resuming_a_raw_units_run_with_a_config_that_leaves_normalize_value_out(tmp_path,
                                                                                capsys):
    """Such a config now asks for return units: refused with what to write instead, and with
    --force the run goes on in return units (it had failed on the critic's missing keys)."""
    config = tmp_path / "my.yaml"
    config.write_text("network_settings:\n  hidden_units: 16\n  num_layers: 1\n"
                      "hyperparameters:\n  batch_size: 32\n  buffer_size: 128\n")
    run = str(tmp_path / "run")
    common = ["train", "Goal-v0", "--config", str(config), "--run-dir", run, "--no-progress"]
    assert main(common + ["--max-steps", "200", "--set",
                          "network_settings.normalize_value=false"]) == 0
    capsys.readouterr()
    assert main(common + ["--resume", "--max-steps", "400"]) == 2
    assert "write 'normalize_value: false' under network_settings" in capsys.readouterr().err
    assert main(common + ["--resume", "--max-steps", "400", "--force"]) == 0
    state = checkpoint.load(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert state["agent_steps"] > 200 and state["config"]["network_settings"]["normalize_value"]


def test_non_finite_parameters_stop_training_with_a_clear_message(tmp_path):
    trainer = Trainer(make_env("Goal-v0", 4), small_config(max_steps=3000), tmp_path,
                      progress=False)
    original = trainer.update

    def poisoned(rollout):
        if trainer.updates == 5:
            with torch.no_grad():
                trainer.actor.body[0].weight.fill_(float("nan"))
        return original(rollout)

    trainer.update = poisoned
    with pytest.raises(TrainingDiverged, match=r"NaN/inf at agent-step \d+ .*Last good "
                                               r"checkpoint: .*step-"):
        trainer.run()


def test_interrupt_saves_a_checkpoint_and_returns(tmp_path):
    trainer = Trainer(make_env("Goal-v0", 4), small_config(max_steps=5000, summary_freq=4000),
                      tmp_path, progress=False)
    original = trainer.collect

    def interrupted():
        if trainer.updates == 2:
            raise KeyboardInterrupt
        return original()

    trainer.collect = interrupted
    result = trainer.run()
    assert result.interrupted and result.agent_steps < 5000
    saved = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    assert saved["updates"] == 2
    # metrics.csv ends with the row of the state saved, as a finished run's does, also when
    # the stop falls between two summaries
    with open(tmp_path / "metrics.csv") as file:
        rows = list(csv.DictReader(file))
    assert [int(row["agent_steps"]) for row in rows][-1] == saved["agent_steps"]


@pytest.mark.parametrize("where", ["warn_reward_scale", "progress", "row", "collect"])
def test_a_stop_anywhere_in_the_loop_logs_the_state_it_saves(tmp_path, monkeypatch, where):
    """Wherever the loop is when Ctrl-C lands, metrics.csv's last row is the state saved."""
    from poca import guards
    from poca import trainer as trainer_module

    trainer = Trainer(make_env("Goal-v0", 4), small_config(max_steps=5000, summary_freq=4000),
                      tmp_path, progress=False)
    owner, name = {"warn_reward_scale": (guards, "warn_reward_scale"),
                   "progress": (trainer_module._MetricsWriter, "progress"),
                   "row": (trainer_module._MetricsWriter, "row"),
                   "collect": (trainer, "collect")}[where]
    original, calls = getattr(owner, name), [0]

    def stopped(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, stopped)
    assert trainer.run().interrupted
    saved = checkpoint.load(tmp_path / "checkpoints" / "latest.pt")
    with open(tmp_path / "metrics.csv") as file:
        assert int(list(csv.DictReader(file))[-1]["agent_steps"]) == saved["agent_steps"]


def test_metrics_that_cannot_be_written_at_a_stop_do_not_stop_the_save(tmp_path, monkeypatch):
    """A full disk when the last metrics row is written: the checkpoint is still saved (and
    the error is raised, not hidden)."""
    from poca import trainer as trainer_module

    trainer = Trainer(make_env("Goal-v0", 4), small_config(
        max_steps=5000, summary_freq=4000, checkpoint_interval=100_000), tmp_path,
        progress=False)
    original = trainer.collect

    def collect():
        if trainer.updates == 3:
            raise KeyboardInterrupt
        return original()

    def full_disk(self, row):
        raise OSError(28, "No space left on device")

    trainer.collect = collect
    monkeypatch.setattr(trainer_module._MetricsWriter, "write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        trainer.run()
    assert checkpoint.load(tmp_path / "checkpoints" / "latest.pt")["updates"] == 3


@pytest.mark.parametrize("hyperparameters, constant", [
    ({}, True),  # the default learning rate is constant
    ({"learning_rate_schedule": "linear"}, False),
    ({"learning_rate_schedule": "constant", "beta_schedule": "linear"}, True),
])
def test_beta_and_epsilon_follow_the_learning_rate_schedule_however_it_is_set(
        tmp_path, hyperparameters, constant):
    """ML-Agents: beta's and epsilon's schedules are the learning rate's unless given. The same
    settings in a YAML file and as --set on the defaults must schedule the same way."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"hyperparameters": hyperparameters}))
    from_yaml = POCAConfig.load(path)
    from_set = POCAConfig().override({f"hyperparameters.{k}": v
                                      for k, v in hyperparameters.items()})
    assert from_yaml == from_set
    trainer = Trainer(make_env("Goal-v0", 2), from_set.override({"max_steps": 1000}),
                      progress=False)
    trainer.agent_steps = 500
    lr, epsilon, beta = trainer.schedules()
    hp = from_set.hyperparameters
    assert (lr == hp.learning_rate and epsilon == hp.epsilon) is constant
    assert (beta == hp.beta) is (constant and "beta_schedule" not in hyperparameters)


def test_config_from_mlagents_yaml(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("behaviors:\n  Goal:\n    trainer_type: poca\n    hyperparameters:\n"
                    "      learning_rate: 1e-3\n      learning_rate_schedule: constant\n"
                    "    network_settings:\n      memory:\n        memory_size: 16\n"
                    "    max_steps: 5e4\n")
    config = POCAConfig.load(path)
    hp = config.hyperparameters
    assert hp.learning_rate == 1e-3 and config.max_steps == 50_000
    assert hp.beta_schedule is hp.epsilon_schedule is None  # as the lr's (ML-Agents)
    assert config.network_settings.memory.memory_size == 16
    defaults = POCAConfig()  # ML-Agents' defaults, except these (README: Defaults)
    hp = defaults.hyperparameters
    assert (hp.learning_rate, hp.learning_rate_schedule, hp.num_epoch) == (1e-3, "constant", 3)
    assert hp.batch_size is hp.buffer_size is None  # derived: rollout_sizes
    assert defaults.network_settings.normalize and defaults.network_settings.normalize_value
    for preset in ("goal", "grid", "mlagents_test"):  # raw units, as their cases were measured
        assert not POCAConfig.load(preset).network_settings.normalize_value


@pytest.mark.parametrize("data, match", [
    ({"hyperparameter": {}}, r"unknown key\(s\) \['hyperparameter'\] in config; valid: "),
    ({"hyperparameters": {"lr": 1}}, r"in hyperparameters; valid: \['batch_size'"),
    ({"hyperparameters": {"batch_size": "big"}}, r"batch_size must be int"),
    ({"hyperparameters": {"batch_size": 0}}, r"batch_size must be > 0"),
    ({"hyperparameters": {"batch_size": 512, "buffer_size": 256}}, r"must not exceed"),
    ({"hyperparameters": {"beta_schedule": "cosine"}}, r"beta_schedule must be one of"),
    ({"network_settings": {"memory": {"memory_size": 15}}}, r"memory_size must be even"),
    ({"network_settings": {"hidden_units": 10}}, r"hidden_units must be a multiple of 4 with "
                                                 r"critic 'attention'.*got 10"),
    ({"trainer_type": "ppo"}, r"trainer_type must be 'poca'"),
    ({"device": "tpu"}, r"device must be"),
])
def test_invalid_config_fails_with_valid_keys(data, match):
    with pytest.raises(ValueError, match=match):
        POCAConfig.from_dict(data)


def test_mlagents_dumps_load_with_their_settings_that_are_off_or_inert(tmp_path):
    """What mlagents-learn writes to configuration.yaml: sections and settings poca does not
    implement, set to null/false (or inert values), load; the same set to something are all
    named in one error, with what to do, whatever their level."""
    dump = {"default_settings": None, "environment_parameters": None, "debug": False,
            "torch_settings": {"device": None},
            "behaviors": {"Goal": {
                "trainer_type": "poca", "self_play": None, "behavioral_cloning": None,
                "init_path": None, "threaded": False,
                "hyperparameters": {"learning_rate": 1e-3, "shared_critic": False},
                "network_settings": {"hidden_units": 32, "goal_conditioning_type": "hyper",
                                     "deterministic": False},
                "reward_signals": {"extrinsic": {"gamma": 0.9, "network_settings": {
                    "hidden_units": 128}}}}}}
    path = tmp_path / "configuration.yaml"
    path.write_text(yaml.safe_dump(dump))
    config = POCAConfig.load(path)
    assert config.network_settings.hidden_units == 32
    assert config.reward_signals.extrinsic.gamma == 0.9
    behavior = dump["behaviors"]["Goal"]
    behavior["self_play"] = {"window": 10}
    behavior["hyperparameters"]["shared_critic"] = True
    behavior["reward_signals"]["curiosity"] = {"strength": 0.02}
    behavior["network_settings"][1] = "a key YAML read as a number"
    path.write_text(yaml.safe_dump(dump))
    with pytest.raises(ValueError) as err:
        POCAConfig.load(path)
    message = str(err.value)
    for fragment in ("['self_play'] in config", "self_play (ML-Agents' setting, not implemented",
                     "['shared_critic'] in hyperparameters", "shared_critic (ML-Agents' setting",
                     "['curiosity'] in reward_signals", "intrinsic and imitation rewards",
                     "[1] in network_settings"):
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize("text, fragment", [
    ("keep_checkpoints: 0\nbehaviors:\n  G: {max_steps: 10}\n", "remove the other top-level"),
    ("behaviors:\n  G: {self_play: 0}\n", "self_play (ML-Agents' setting"),
    ("behaviors:\n  G: {self_play: {}}\n", "self_play (ML-Agents' setting"),  # on: defaults
    ("1: x\nbehaviors:\n  G: {max_steps: 10}\n", "remove the other top-level key(s) 1"),
    ("torch_settings: {device: cuda}\nbehaviors:\n  G: {max_steps: 10}\n", "--device"),
])
def test_only_mlagents_settings_written_as_off_are_passed_over(tmp_path, text, fragment):
    """null/false, not 0, and only ML-Agents' own sections: a misplaced setting is no
    ML-Agents section, and 0 is a value."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(fragment)):
        POCAConfig.load(path)


def test_a_numpy_array_for_a_number_is_named():
    import numpy as np

    with pytest.raises(ValueError, match=r"seed must be int, got array\(\[1, 2\]\)"):
        POCAConfig.from_dict({"seed": np.array([1, 2])})


def test_other_trainer_types_and_threaded_say_what_they_get():
    with pytest.raises(ValueError, match=r"trainer_type must be 'poca', got 'sac': .*critic: "
                                         r"independent"):
        POCAConfig.from_dict({"trainer_type": "sac", "hyperparameters": {"init_entcoef": 1}})
    with pytest.warns(UserWarning, match="threaded: true .* does nothing here"):
        Trainer(make_env("Goal-v0", 2), POCAConfig.from_dict({"threaded": True}),
                progress=False)


def test_a_setting_given_twice_on_the_command_line_is_an_error(capsys):
    for argv in (["--set", "hyperparameters.beta=0.1", "--set", "hyperparameters.beta=0.3"],
                 ["--set", "hyperparameters={beta: 0.1, beta: 0.3}"],
                 ["--set", "hyperparameters={beta: 0.1}", "--set", "hyperparameters.beta=0.3"]):
        try:
            code = main(["train", "groupenvs/Goal-v0", *argv, "--max-steps", "100"])
        except SystemExit as exit_:
            code = exit_.code
        assert code == 2
        err = capsys.readouterr().err
        assert "hyperparameters.beta is given twice (0.1 and 0.3)" in err or \
            "not valid YAML (duplicate key 'beta')" in err, err


def test_a_setting_in_a_section_mapping_and_as_a_dotted_key_is_an_error():
    """Whichever came last would win silently (dict order), so neither does."""
    for given in ({"hyperparameters": {"beta": 0.1}, "hyperparameters.beta": 0.3},
                  {"reward_signals.extrinsic.gamma": 0.3,
                   "reward_signals": {"extrinsic": {"gamma": 0.1}}}):
        with pytest.raises(ValueError, match=r"(hyperparameters.beta|reward_signals.extrinsic."
                                             r"gamma) is given twice \((0.1 and 0.3|0.3 and "
                                             r"0.1)\), as a section's mapping and a dotted key"):
            POCAConfig.of(given)
    for key_order in ({"network_settings.memory": None, "network_settings": {"memory": {}}},
                      {"network_settings": {"memory": {}}, "network_settings.memory": None}):
        with pytest.raises(ValueError, match="network_settings.memory is given twice"):
            POCAConfig.of(key_order)  # an empty mapping beside null: memory on or off by order
    for given in ({"network_settings": {"memory": None},
                   "network_settings.memory.memory_size": 64},
                  {"network_settings.memory.memory_size": 64, "network_settings.memory": None}):
        with pytest.raises(ValueError, match=r"network_settings.memory is given as None and "
                                             r"network_settings.memory.memory_size as 64"):
            POCAConfig.of(given)
    both = POCAConfig.of({"hyperparameters": {"beta": 0.1}, "hyperparameters.lambd": 0.9})
    assert (both.hyperparameters.beta, both.hyperparameters.lambd) == (0.1, 0.9)


def test_keep_checkpoints_0_keeps_them_all_as_in_mlagents(tmp_path):
    train("Goal-v0", POCAConfig.load("goal").override({
        "max_steps": 6000, "checkpoint_interval": 400, "keep_checkpoints": 0,
        "hyperparameters.buffer_size": 256, "hyperparameters.batch_size": 128}),
        run_dir=tmp_path / "run")
    assert len(list((tmp_path / "run" / "checkpoints").glob("step-*.pt"))) >= 8  # 5: default


def test_hidden_units_off_the_attention_heads():
    # a critic without attention takes any width; an entity list still needs whole heads
    config = POCAConfig.from_dict({"critic": "independent", "network_settings": {
        "hidden_units": 10}, "max_steps": 1})
    Trainer(make_env("Goal-v0", 2), config, progress=False)
    with pytest.raises(ValueError, match=r"network_settings.hidden_units\) must be a multiple "
                                         r"of its 4 heads, got 10"):
        Trainer(make_env("GoalEntities-v0", 2), config, progress=False)


def test_unknown_preset_lists_bundled_ones():
    with pytest.raises(FileNotFoundError, match=r"bundled presets: \[.*'goal'"):
        POCAConfig.load("gaol")


def test_cli_train_and_eval(tmp_path, capsys):
    run = tmp_path / "run"
    code = main(["train", "groupenvs/Goal-v0", "--config", "goal", "--run-dir", str(run),
                 "--max-steps", "2000", "--no-progress", "--set", "summary_freq=500",
                 "--set", "hyperparameters.buffer_size=512", "--set",
                 "hyperparameters.batch_size=256"])
    assert code == 0
    out = capsys.readouterr().out
    assert "agent-steps/s" in out and "mean group return" in out
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("agent_steps,episodes,mean_group_return") and len(rows) >= 3
    assert main(["train", "groupenvs/Goal-v0", "--run-dir", str(run), "--no-progress"]) == 2
    assert "pass --resume" in capsys.readouterr().err
    code = main(["eval", "groupenvs/Goal-v0", "--checkpoint",
                 str(run / "checkpoints" / "latest.pt"), "--episodes", "10", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["episodes"] == 10 and set(result) >= {"mean", "std"}


def test_eval_names_the_trained_env_kwargs_that_given_ones_leave_out(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "Goal-v0", "--config", "goal", "--run-dir", str(run), "--no-progress",
                 "--max-steps", "600", "--env-kwargs", '{"num_agents": 3, "max_steps": 30}']) == 0
    ckpt = str(run / "checkpoints" / "latest.pt")
    capsys.readouterr()
    assert main(["eval", "Goal-v0", "--checkpoint", ckpt, "--episodes", "2"]) == 0
    assert "note" not in capsys.readouterr().err  # the trained ones, whole
    # given ones replace the trained ones: the 3 agents it was trained with are not dropped unseen
    assert main(["eval", "Goal-v0", "--checkpoint", ckpt, "--episodes", "2",
                 "--env-kwargs", '{"max_steps": 20}']) == 0
    assert "not given now: {'num_agents': 3}" in capsys.readouterr().err


def test_cli_reports_bad_input(tmp_path, capsys):
    assert main(["train", "Gaol-v0", "--run-dir", str(tmp_path), "--no-progress"]) == 2
    assert "unknown task" in capsys.readouterr().err
    assert main(["train", "Goal-v0", "--set", "hyperparameters.lr=1", "--no-progress",
                 "--run-dir", str(tmp_path)]) == 2
    assert "valid" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "Goal-v0", "--env-kwargs", "[1]"])


def test_cli_play_records_a_gif(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "Goal-v0", "--config", "goal", "--run-dir", str(run), "--no-progress",
                 "--max-steps", "2500"]) == 0
    gif = tmp_path / "play.gif"
    assert main(["play", "Goal-v0", "--checkpoint", str(run / "checkpoints" / "latest.pt"),
                 "--episodes", "2", "--record", str(gif)]) == 0
    from PIL import Image

    with Image.open(gif) as image:
        assert image.n_frames >= 4 and image.size[0] == 480
    assert re.search(r"episode 1: group return [+-]\d+\.\d{3}; team return \(sum of all "
                     r"rewards\) [+-]\d+\.\d{3}\n", capsys.readouterr().out)
    assert main(["play", "Goal-v0", "--checkpoint", str(run / "checkpoints" / "latest.pt")]) == 2


def test_a_sequence_longer_than_the_rollout_updates_as_one_of_the_rollout_s_length(
        monkeypatch):
    """Sequences are cut to the rollout: padding beyond it is masked, so the update is the same
    (up to float summation order), without paying for sequence_length / T times the steps."""
    import poca.trainer

    lengths = []
    monkeypatch.setattr(poca.trainer, "to_units", lambda x, length: (
        lengths.append(length), to_units(x, length))[1])

    def updated(sequence_length):
        config = small_config(**{"network_settings.memory": {
            "memory_size": 8, "sequence_length": sequence_length}})
        trainer = Trainer(make_env("GoalMemory-v0", 4), config, progress=False)
        rollout = trainer.collect()
        assert len(rollout.alive) < 64
        lengths.clear()
        trainer.update(rollout)
        assert set(lengths) == {len(rollout.alive)}
        return torch.cat([p.detach().flatten() for p in trainer.params])

    torch.testing.assert_close(updated(64), updated(10_000), rtol=1e-5, atol=1e-6)
