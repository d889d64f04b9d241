"""The trainer's wiring: what reaches the pure POCA functions (critic estimates, bootstraps,
diagnostics) is checked against independent one-pass evaluations."""

import csv
import math

import numpy as np
import pytest
import torch

from poca import trainer as trainer_module
from poca.adapters import make_env
from poca.config import POCAConfig
from poca.loss import explained_variance, policy_diagnostics, policy_loss
from poca.rollout import lambda_returns
from poca.trainer import Trainer, train
from tests.test_adapters import Masked  # Dict observations, a mask allowing action 2 alone

MEMORY = {"network_settings.memory": {"memory_size": 16, "sequence_length": 8}}


def _trainer(env_id="Goal-v0", env_kwargs=None, overrides=None, num_envs=4):
    config = POCAConfig.load("goal").override(
        {"num_envs": num_envs, "hyperparameters.buffer_size": 256,
         "hyperparameters.batch_size": 64, **(overrides or {})})
    env = make_env(env_id, config.num_envs, env_kwargs or {}, None)
    return Trainer(env, config, progress=False)


def test_recurrent_truncation_bootstraps_from_the_episodes_own_memory():
    """The value of a time-limit ending equals the recurrent critic run once over that episode
    from its start, with the final view appended (not a memory zeroed for the next episode)."""
    trainer = _trainer("GoalMemory-v0", {"max_steps": 7}, MEMORY)
    trainer.update(trainer.collect())  # the critic's weights and carried memory are not fresh
    ro = trainer.collect()
    assert ro.group_truncated.any()
    carried = trainer._critic_memory.clone()
    next_value = trainer._estimates(ro).next_value
    critic, checked = trainer.critic, 0
    for k, (t, e) in enumerate(ro.group_truncated.nonzero().tolist()):
        begun = ro.group_starts[: t + 1, e].nonzero().flatten()
        t0 = int(begun[-1]) if len(begun) else 0
        memory = (torch.zeros_like(carried[e, 0]) if len(begun) else carried[e, 0])[None]
        obs = [torch.cat([o[t0:t + 1, e], f[k][None]])[:, None] for o, f in
               zip(ro.obs, ro.final_obs, strict=False)]
        alive = torch.cat([ro.alive[t0:t + 1, e], ro.final_alive[k][None]])[:, None]
        starts = torch.zeros(alive.shape[0], 1, dtype=torch.bool)
        starts[0] = bool(len(begun))
        with torch.no_grad():
            values, _ = critic.value(obs, alive, memory, starts)
        assert float(next_value[t, e]) == pytest.approx(float(values[-1, 0]), abs=1e-5), (t, e)
        checked += 1
    assert checked >= 4


def test_terminated_and_ongoing_bootstraps_without_memory():
    """Without memory: a terminated group bootstraps from 0, a truncated one from V(final view),
    the last step of the rollout from V of the next observation."""
    trainer = _trainer("Goal-v0", {"max_steps": 9})
    ro = trainer.collect()
    est = trainer._estimates(ro)
    value, next_value = est.value, est.next_value
    assert est.critic_memory is None
    done, trunc = ro.group_done, ro.group_truncated
    assert (done & ~trunc).any() and trunc.any()
    assert torch.all(next_value[done & ~trunc] == 0)
    with torch.no_grad():
        final, _ = trainer.critic.value(ro.final_obs, ro.final_alive)
        last, _ = trainer.critic.value(ro.next_obs, ro.next_alive)
    torch.testing.assert_close(next_value[trunc], final, atol=1e-5, rtol=0)
    goes_on = ~done[-1]
    torch.testing.assert_close(next_value[-1][goes_on], last[goes_on], atol=1e-5, rtol=0)
    torch.testing.assert_close(next_value[:-1][~done[:-1]], value[1:][~done[:-1]])


@pytest.mark.parametrize("action_sizes", [(0, 1), (1, 0), (1, 1)])
def test_update_reports_ppo_diagnostics(action_sizes):
    trainer = _trainer("Goal-v0", {"action_sizes": action_sizes})
    stats = trainer.update(trainer.collect())
    assert 0 <= stats["approx_kl"] < 1
    for kind, size in zip(("continuous", "discrete"), action_sizes, strict=False):
        key = f"clip_fraction_{kind}"
        assert (key in stats) == bool(size)
        if size:
            assert 0 <= stats[key] <= 1
    for key in ("explained_variance_value", "explained_variance_baseline"):
        assert stats[key] <= 1 and math.isfinite(stats[key])


def test_the_independent_critic_reports_no_baseline_of_its_own(tmp_path):
    """V_i is its own baseline: a baseline loss or explained variance would repeat V_i's."""
    trainer = _trainer("Goal-v0", overrides={"critic": "independent"})
    stats = trainer.update(trainer.collect())
    assert "baseline_loss" not in stats and "explained_variance_baseline" not in stats
    assert math.isfinite(stats["value_loss"]) and stats["explained_variance_value"] <= 1
    config = POCAConfig.load("goal").override({"critic": "independent", "max_steps": 600,
                                                "summary_freq": 200})
    train("Goal-v0", config, run_dir=tmp_path / "run")
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(r["baseline_loss"] == r["explained_variance_baseline"] == ""
                        and r["value_loss"] for r in rows)


@pytest.mark.parametrize("batch_size", [64, 1])  # 1: more batches asked than units to split
def test_update_reports_step_means_of_losses_and_diagnostics_over_every_sample(
        monkeypatch, batch_size):
    import poca.trainer as trainer_module

    trainer = _trainer("Goal-v0", overrides={"hyperparameters.batch_size": batch_size})
    ro = trainer.collect()
    policy_losses, diagnosed = [], []

    def policy_loss(*args):
        policy_losses.append(float(real_loss(*args).detach()))
        return real_loss(*args)

    def diagnostics(new, old, alive, epsilon, num_continuous):
        diagnosed.append(int(alive.sum()))
        return real_diagnostics(new, old, alive, epsilon, num_continuous)

    real_loss, real_diagnostics = trainer_module.policy_loss, trainer_module.policy_diagnostics
    monkeypatch.setattr(trainer_module, "policy_loss", policy_loss)
    monkeypatch.setattr(trainer_module, "policy_diagnostics", diagnostics)
    stats = trainer.update(ro)
    epochs = trainer.config.hyperparameters.num_epoch
    assert stats["policy_loss"] == pytest.approx(np.mean(policy_losses), rel=1e-5)
    assert len(policy_losses) <= epochs * max(1, ro.agent_steps // batch_size)
    assert diagnosed == [epochs * int(ro.alive.sum())]  # once, over every sample of the update


def test_the_surrogate_gets_the_rollouts_log_probs_normalized_advantages_and_alive(monkeypatch):
    """Over an epoch (its minibatches partition the rollout), the clipped surrogate sees the
    log-probs the actions were sampled with, the advantages normalized over the entries of
    agents in the episode (mean 0, std 1 there), and the alive mask that leaves the others
    out."""
    trainer = _trainer("Goal-v0", overrides={"hyperparameters.num_epoch": 2})
    seen = []

    def spy(log_prob, old_log_prob, advantage, alive, epsilon):
        seen.append((old_log_prob.clone(), advantage.clone(), alive.clone()))
        return policy_loss(log_prob, old_log_prob, advantage, alive, epsilon)

    monkeypatch.setattr(trainer_module, "policy_loss", spy)
    ro = trainer.collect()
    assert 0 < ro.alive.sum() < ro.alive.numel()  # agents that left: entries to leave out
    trainer.update(ro)
    epoch = seen[: len(seen) // 2]
    old, advantage, alive = (torch.cat([part[i].flatten(0, 1) for part in epoch])
                             for i in range(3))
    assert int(alive.sum()) == int(ro.alive.sum()) and not alive.all()
    torch.testing.assert_close(old[alive].flatten().sort().values,
                               ro.log_prob[ro.alive].flatten().sort().values)
    assert abs(float(advantage[alive].mean())) < 1e-5
    assert float(advantage[alive].std(unbiased=False)) == pytest.approx(1, abs=1e-4)


def test_the_stored_log_probs_are_those_of_the_stored_actions():
    """The update's ratio starts at exactly 1: the rollout keeps the actions the policy sampled
    (not, say, the clipped ones the env got) with their log-probs."""
    trainer = _trainer("Goal-v0", {"action_sizes": (1, 1)})
    ro = trainer.collect()
    with torch.no_grad():
        dist, _ = trainer.actor(ro.obs, ro.action_mask)
        torch.testing.assert_close(dist.log_prob(ro.cont, ro.disc)[ro.alive],
                                   ro.log_prob[ro.alive])
    assert (ro.cont[ro.alive].abs() > 1).any()  # some beyond what the env is given


def _first_step_ratio_logs(trainer, monkeypatch):
    """(new, old log-probs, alive) of the update's first minibatch step, before any parameter
    has moved: the new ones must equal the rollout's."""
    seen = []

    def spy(log_prob, old_log_prob, advantage, alive, epsilon):
        seen.append((log_prob.detach().clone(), old_log_prob.clone(), alive.clone()))
        return policy_loss(log_prob, old_log_prob, advantage, alive, epsilon)

    monkeypatch.setattr(trainer_module, "policy_loss", spy)
    trainer.update(trainer.collect())
    return seen[0]


@pytest.mark.parametrize("setting", ["memory", "action_mask"])
def test_the_first_update_step_replays_the_rollouts_log_probs(setting, monkeypatch):
    """The ratio of the update's first step is exactly 1. With memory, its sequences (shorter
    than the rollout, so most start mid-episode) start from the memories stored in the rollout;
    with action masks, the update's log-probs are taken under the same masks as acting's."""
    if setting == "memory":
        trainer = _trainer("GoalMemory-v0", overrides={"network_settings.memory": {
            "memory_size": 16, "sequence_length": 4}})
    else:
        config = POCAConfig.load("goal").override({"num_envs": 4, "max_steps": 400,
                                                   "hyperparameters.buffer_size": 96,
                                                   "hyperparameters.batch_size": 32})
        trainer = Trainer(make_env(Masked, config.num_envs, {}, None), config,
                          progress=False)
    new, old, alive = _first_step_ratio_logs(trainer, monkeypatch)
    assert alive.sum() > 8
    torch.testing.assert_close(new[alive], old[alive], atol=1e-5, rtol=0)


def test_an_epoch_shuffles_the_rollout_anew(monkeypatch):
    """Each epoch goes through the rollout in a fresh random order (the same one every epoch
    would feed the same minibatches again)."""
    trainer = _trainer("Goal-v0", overrides={"hyperparameters.num_epoch": 3})
    seen = []

    def spy(log_prob, old_log_prob, advantage, alive, epsilon):
        seen.append(old_log_prob.clone())
        return policy_loss(log_prob, old_log_prob, advantage, alive, epsilon)

    monkeypatch.setattr(trainer_module, "policy_loss", spy)
    trainer.update(trainer.collect())
    per_epoch = len(seen) // 3
    assert per_epoch >= 3
    epochs = [seen[k * per_epoch:(k + 1) * per_epoch] for k in range(3)]
    for a, b in ((0, 1), (1, 2), (0, 2)):
        assert not all(torch.equal(x, y) for x, y in zip(epochs[a], epochs[b], strict=True))


def test_normalizers_see_the_rollouts_alive_observations_before_the_critic_estimates(
        monkeypatch):
    """Each update first adds the observations of agents in the episode (not the empty slots
    of agents that left) to the running statistics, then the critic estimates with them."""
    trainer = _trainer("Goal-v0", overrides={"network_settings.normalize": True})
    ro = trainer.collect()
    assert 0 < ro.alive.sum() < ro.alive.numel()
    alive_obs = ro.obs[0][ro.alive].double()
    counts = []
    estimates = trainer._estimates

    def spy(rollout):
        counts.append([float(net.encoder.norms["vector"].count)
                       for net in (trainer.actor, trainer.critic)])
        return estimates(rollout)

    monkeypatch.setattr(trainer, "_estimates", spy)
    trainer.update(ro)
    assert counts == [[1.0 + len(alive_obs)] * 2]
    for net in (trainer.actor, trainer.critic):  # from count 1 and mean 0: n / (n + 1) of it
        torch.testing.assert_close(net.encoder.norms["vector"].mean,
                                   alive_obs.mean(0) * len(alive_obs) / (len(alive_obs) + 1))


def test_returns_use_the_configured_gamma_and_lambda(monkeypatch):
    trainer = _trainer("Goal-v0", overrides={"reward_signals.extrinsic.gamma": 0.9,
                                             "hyperparameters.lambd": 0.3})
    used = []

    def spy(reward, value, bootstrap, alive, group_done, gamma, lambd, horizon):
        used.append((gamma, lambd, horizon))
        return lambda_returns(reward, value, bootstrap, alive, group_done, gamma, lambd,
                              horizon)

    monkeypatch.setattr(trainer_module, "lambda_returns", spy)
    trainer.update(trainer.collect())
    assert used == [(0.9, 0.3, trainer.config.time_horizon)]


def test_the_entropy_bonus_makes_the_policy_broader():
    """With beta at its largest the update raises the policy's entropy (a sign slip in the
    joint loss lowers it)."""
    trainer = _trainer("Goal-v0", {"action_sizes": (1, 0)},
                       {"hyperparameters.beta": 1.0, "hyperparameters.beta_schedule": "constant"})
    ro = trainer.collect()

    def entropy():
        with torch.no_grad():
            dist, _ = trainer.actor(ro.obs, ro.action_mask)
            return float(dist.entropy()[ro.alive].mean())

    before = entropy()
    trainer.update(ro)
    assert entropy() > before + 0.01


def test_policy_diagnostics_values():
    old = torch.zeros(4, 2)  # two components: one continuous dim, one discrete branch
    new = torch.tensor([[0.0, 0.0], [0.5, 0.0], [0.0, -0.5], [0.1, 0.0]])
    mask = torch.tensor([True, True, True, False])
    out = policy_diagnostics(new, old, mask, epsilon=0.2, num_continuous=1)
    joint = torch.tensor([0.0, 0.5, -0.5])
    assert float(out["approx_kl"]) == pytest.approx(float((joint.exp() - 1 - joint).mean()))
    assert float(out["clip_fraction_continuous"]) == pytest.approx(1 / 3)
    assert float(out["clip_fraction_discrete"]) == pytest.approx(1 / 3)


def test_explained_variance():
    target = torch.tensor([1.0, 2.0, 3.0, 100.0])
    mask = torch.tensor([True, True, True, False])
    assert explained_variance(target, target, mask) == 1.0
    assert explained_variance(torch.full((4,), 2.0), target, mask) == pytest.approx(0.0)
    assert explained_variance(-target, target, mask) < 0
    assert np.isnan(explained_variance(target, torch.ones(4), mask))


def test_unset_buffer_and_batch_follow_the_env_and_the_run():
    config = POCAConfig()  # ML-Agents' names, nothing given
    assert config.hyperparameters.buffer_size is None
    # one time_horizon of every slot of every env ...
    assert config.rollout_sizes(num_agents=2) == (16 * 2 * 64, 16 * 2 * 64 // 4)
    # ... but at least ~32 updates in a short run, and at least one step of every slot
    short = config.override({"max_steps": 9000})
    assert short.rollout_sizes(2) == (9000 // 32, 9000 // 32 // 4)
    tiny = config.override({"max_steps": 100})
    assert tiny.rollout_sizes(3)[0] == 16 * 3
    # given values are used as they are, an ML-Agents file is unchanged
    given = config.override({"hyperparameters.buffer_size": 10240,
                             "hyperparameters.batch_size": 1024})
    assert given.rollout_sizes(2) == (10240, 1024)
    assert config.override({"hyperparameters.batch_size": 4096}).rollout_sizes(2)[0] == 4096


def test_trainer_collects_the_derived_buffer():
    trainer = Trainer(make_env("Goal-v0", 4, {}, None),
                      POCAConfig().override({"num_envs": 4, "max_steps": 3200}), progress=False)
    assert (trainer.buffer_size, trainer.batch_size) == (100, 25)
    ro = trainer.collect()
    assert 100 < ro.agent_steps <= 100 + 4 * 2
