"""The `critic` config key: MA-POCA's attention critic and the paper's two ablations (absorbing
fixed slots, independent per-agent values), all through one trainer."""

import math

import pytest
import torch

from envs.core import GroupSpec, ObsSpec
from poca.adapters import make_env
from poca.config import CRITICS, NetworkSettings, POCAConfig
from poca.loss import clipped_value_loss
from poca.networks import Critic
from poca.trainer import Trainer, train


def spec(A=3, d=4):
    return GroupSpec(num_agents=A, obs=(ObsSpec("vector", "vector", (d,)),), continuous_size=1,
                     discrete_branches=(2, 3), max_steps=10)


def batch(s, N=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = s.num_agents
    obs = [torch.randn(N, A, *s.obs[0].shape, generator=g)]
    cont = torch.randn(N, A, s.continuous_size, generator=g)
    disc = torch.stack([torch.randint(0, n, (N, A), generator=g) for n in s.discrete_branches],
                       -1)
    alive = torch.ones(N, A, dtype=torch.bool)
    alive[::2, 2] = False
    return obs, cont, disc, alive


def small(critic, **more):
    return POCAConfig.load("goal").override({"critic": critic, "max_steps": 6000, **more})


@pytest.mark.parametrize("critic", list(CRITICS))
def test_each_critic_trains_goal(critic):
    result = train("groupenvs/Goal-v0", small(critic))
    assert result.agent_steps >= 6000 and result.episodes > 0
    assert math.isfinite(result.mean_return())


@pytest.mark.parametrize("critic", list(CRITICS))
def test_each_critic_trains_a_parallel_env_with_3_agents(critic):
    result = train("groupenvs/Goal-v0", small(critic, num_envs=8),
                   env_kwargs={"num_agents": 3, "action_sizes": (1, 1)})
    assert result.episodes > 0 and math.isfinite(result.mean_team_return())


def test_independent_value_of_agent_i_ignores_agent_j():
    s = spec()
    torch.manual_seed(0)
    critic = Critic(s, NetworkSettings(hidden_units=16), "independent")
    torch.nn.init.normal_(critic.head.weight)  # the head starts at 0
    obs, cont, disc, alive = batch(s)
    v, b, _ = critic(obs, cont, disc, alive)
    assert v.shape == b.shape == alive.shape
    assert torch.equal(b, v)  # its own value is its baseline
    obs2 = [obs[0].clone()]
    obs2[0][:, 1] = torch.randn_like(obs2[0][:, 1]) * 10  # agent 1 sees something else
    cont2, disc2 = torch.randn_like(cont), torch.zeros_like(disc)  # and everyone acts otherwise
    v2, b2, _ = critic(obs2, cont2, disc2, alive)
    others = [0, 2]
    assert torch.equal(v2[:, others], v[:, others])
    assert torch.equal(b2[:, others], b[:, others])
    assert not torch.allclose(v2[:, 1], v[:, 1])  # its own observation does matter
    assert torch.equal(critic.value(obs2, alive)[0], v2)  # the value-only path agrees
    assert (v[~alive] == 0).all()  # an agent that is not alive is worth 0 (bootstraps from 0)
    # Contrast: MA-POCA's critic does look at the others.
    attention = Critic(s, NetworkSettings(hidden_units=16), "attention")
    torch.nn.init.normal_(attention.head.weight)  # the head starts at 0
    assert not torch.allclose(attention(obs2, cont, disc, alive)[1][:, 0],
                              attention(obs, cont, disc, alive)[1][:, 0])


def test_absorbing_keeps_fixed_slots_and_a_fixed_absorbing_input():
    s = spec()
    torch.manual_seed(0)
    critic = Critic(s, NetworkSettings(hidden_units=16), "absorbing")
    torch.nn.init.normal_(critic.head.weight)  # the head starts at 0
    assert not hasattr(critic, "attention")
    assert critic.slots.in_features == s.num_agents * (16 + 1)  # A slots in a fixed order
    obs, cont, disc, alive = batch(s)
    v, b, _ = critic(obs, cont, disc, alive)
    assert v.shape == (6,) and b.shape == (6, 3)
    assert torch.allclose(critic.value(obs, alive)[0], v, atol=1e-6)
    # An agent that left is the same absorbing input whatever its slot still holds.
    dead = ~alive
    obs2 = [torch.where(dead[..., None], torch.randn_like(obs[0]) * 100, obs[0])]
    cont2 = torch.where(dead[..., None], torch.randn_like(cont), cont)
    v2, b2, _ = critic(obs2, cont2, disc, alive)
    assert torch.equal(v2, v) and torch.equal(b2[alive], b[alive])
    # ... and it is still registered: being absent is not the same as being an all-zero agent
    # (the flag), and the slot order matters (no pooling over a set).
    zeroed = [torch.where(dead[..., None], 0.0, obs[0])]
    assert not torch.allclose(critic.value(zeroed, torch.ones_like(alive))[0][::2], v[::2])
    perm = [1, 0, 2]
    assert not torch.allclose(critic.value([obs[0][:, perm]], alive[:, perm])[0], v)


def test_independent_bootstraps_an_agent_that_left_from_zero():
    config = POCAConfig.load("goal").override({"critic": "independent", "num_envs": 8})
    env = make_env("Goal-v0", config.num_envs, {"num_agents": 3})
    trainer = Trainer(env, config, progress=False)
    torch.nn.init.normal_(trainer.critic.head.weight)  # the head starts at 0
    ro = trainer.collect()
    est = trainer._estimates(ro)
    value, next_value = est.value, est.next_value
    assert value.shape == next_value.shape == ro.alive.shape
    next_alive = torch.cat([ro.alive[1:], ro.next_alive[None]])
    left = ro.alive & ~next_alive & ~ro.group_done[..., None]
    assert left.any()  # Goal agents leave one by one
    assert (next_value[left] == 0).all()
    goes_on = ro.alive & next_alive & ~ro.group_done[..., None]
    assert (next_value[goes_on] != 0).all()
    trainer.update(ro)  # the whole update runs on per-agent values


def test_attention_and_absorbing_keep_posthumous_credit():
    for critic in ("attention", "absorbing"):
        config = POCAConfig.load("goal").override({"critic": critic, "num_envs": 8})
        trainer = Trainer(make_env("Goal-v0", 8, {"num_agents": 3}), config, progress=False)
        ro = trainer.collect()
        est = trainer._estimates(ro)
        value, next_value = est.value, est.next_value
        assert value.shape == next_value.shape == ro.group_done.shape  # one group value


def test_invalid_critic_is_refused_with_the_options():
    with pytest.raises(ValueError, match=r"critic must be one of \['attention', 'absorbing', "
                                         r"'independent'\], got 'coma'"):
        POCAConfig().override({"critic": "coma"})
    with pytest.raises(ValueError, match="critic must be one of"):
        Critic(spec(), NetworkSettings(), "coma")
    with pytest.raises(ValueError, match="independent does not support network_settings.memory"):
        POCAConfig().override({"critic": "independent",
                               "network_settings.memory": {"memory_size": 8,
                                                           "sequence_length": 4}})


def test_each_option_is_documented_in_one_sentence():
    for name, doc in CRITICS.items():
        assert doc.endswith(".") and doc.count(". ") == 0, name


@pytest.mark.parametrize("critic, normalize_value",
                         [("attention", False), ("absorbing", False), ("attention", True)])
def test_recurrent_critic_options_train(critic, normalize_value):
    memory = {"memory_size": 16, "sequence_length": 8}
    result = train("groupenvs/GoalMemory-v0",
                   small(critic, max_steps=3000, **{"network_settings.memory": memory,
                                                    "network_settings.normalize_value":
                                                        normalize_value}))
    assert result.episodes > 0 and math.isfinite(result.mean_return())


@pytest.mark.parametrize("critic", list(CRITICS))
def test_normalize_value_reads_the_head_in_units_of_the_returns_seen(critic):
    s = spec()
    torch.manual_seed(0)
    net = Critic(s, NetworkSettings(hidden_units=16, normalize_value=True), critic)
    obs, cont, disc, alive = batch(s)
    returns = torch.randn(4096, generator=torch.Generator().manual_seed(1)) * 30 - 100
    gone = torch.arange(4096) % 3 == 0  # padding of agents that were not there: not counted
    net.update_return_stats(torch.where(gone, 1e6, returns), ~gone)
    mean, std = net.return_stats()
    seen = returns[~gone]
    assert abs(mean - seen.mean()) < 0.1 and abs(std - seen.std()) < 0.1
    value, baseline, _ = net(obs, cont, disc, alive)
    expected = alive if critic == "independent" else torch.ones_like(alive)  # V_i = 0 if gone
    assert torch.allclose(baseline, mean * expected.to(mean.dtype))  # a head at 0: the mean
    torch.nn.init.normal_(net.head.weight)
    plain = Critic(s, NetworkSettings(hidden_units=16, normalize_value=False), critic)
    plain.load_state_dict({k: v for k, v in net.state_dict().items()
                           if not k.startswith("returns.")})
    raw = plain(obs, cont, disc, alive)[1]
    expected_baseline = (raw * std + mean) * (alive if critic == "independent" else 1)
    assert torch.allclose(net(obs, cont, disc, alive)[1], expected_baseline, atol=1e-4)


@pytest.mark.parametrize("critic", list(CRITICS))
@pytest.mark.parametrize("saved_with", [True, False])
def test_a_state_saved_with_the_other_normalize_value_keeps_every_estimate(critic, saved_with):
    """What a resume with --force that changes normalize_value loads: raw units into return
    units, or back, with V and every baseline as they were (not a missing-keys error)."""
    s = spec()
    torch.manual_seed(0)
    saved = Critic(s, NetworkSettings(hidden_units=16, normalize_value=saved_with), critic)
    torch.nn.init.normal_(saved.head.weight)
    saved.update_return_stats(torch.randn(500, generator=torch.Generator().manual_seed(2)) * 30
                              - 100, torch.ones(500, dtype=torch.bool))
    loaded = Critic(s, NetworkSettings(hidden_units=16, normalize_value=not saved_with), critic)
    loaded.load_state_dict(loaded.in_own_units(saved.state_dict()))
    obs, cont, disc, alive = batch(s)
    for before, after in zip(saved(obs, cont, disc, alive)[:2], loaded(obs, cont, disc, alive)[:2],
                             strict=True):
        torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-4)
    own = loaded.state_dict()
    assert loaded.in_own_units(own) is own  # the same units: as it is


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_return_stats_are_a_copy_that_the_next_update_leaves_alone(dtype):
    """The update reads the old units, adds the returns, then reads the new ones: the old must
    not follow (the statistics are float64, so a float64 head got the buffer itself)."""
    net = Critic(spec(), NetworkSettings(hidden_units=16, normalize_value=True)).to(dtype)
    old_mean, old_std = net.return_stats()
    net.update_return_stats(torch.full((64, 3), 50.0, dtype=dtype), torch.ones(64, 3, dtype=bool))
    assert (old_mean.item(), old_std.item()) == (0.0, 1.0)
    assert net.return_stats()[0].item() > 40 and old_mean.dtype == dtype


@pytest.mark.parametrize("normalize_value", [True, False])
def test_normalize_value_makes_the_critic_follow_the_reward_scale(normalize_value):
    """One update on rewards x1 and x100 from the same start: in return units the critic's
    estimates scale with the rewards (and the policy learns the same). Without it a head that
    starts at 0 moves the same few Adam steps either way, far short of returns 100x larger."""
    estimates = []
    for strength in (1.0, 100.0):
        config = POCAConfig.load("goal").override({
            "num_envs": 16, "reward_signals.extrinsic.strength": strength,
            "network_settings.normalize_value": normalize_value})
        trainer = Trainer(make_env("Goal-v0", 16), config, progress=False)
        ro = trainer.collect()
        trainer.update(ro)
        estimates.append(trainer._estimates(ro).value)
    ratio = (estimates[1] / estimates[0]).median()
    assert (abs(ratio - 100) < 10) == normalize_value, ratio


def test_normalize_value_std_has_a_floor_for_returns_that_never_varied():
    net = Critic(spec(), NetworkSettings(hidden_units=16, normalize_value=True), "attention")
    zeros = torch.zeros(100_000)  # a sparse task before its first success
    net.update_return_stats(zeros, zeros == 0)
    mean, std = net.return_stats()
    assert mean == 0 and std == pytest.approx(0.1)


@pytest.mark.parametrize("normalize_value", [True, False])
def test_value_clipping_is_centred_on_the_network_before_its_first_step(monkeypatch,
                                                                        normalize_value):
    """The first minibatch step sees the network that made the old estimates, so its estimates
    and the old ones must agree in the head's units, although this update moved the return
    statistics (old estimates read in the new units would shift the clipping window)."""
    import poca.trainer as trainer_module

    calls = []

    def recording(estimate, old_estimate, target, mask, epsilon):
        calls.append((estimate.detach().clone(), old_estimate.clone(), mask))
        return clipped_value_loss(estimate, old_estimate, target, mask, epsilon)

    monkeypatch.setattr(trainer_module, "clipped_value_loss", recording)
    config = POCAConfig.load("goal").override({
        "num_envs": 16, "reward_signals.extrinsic.strength": 100.0,
        "network_settings.normalize_value": normalize_value})
    trainer = Trainer(make_env("Goal-v0", 16), config, progress=False)
    before = trainer.critic.return_stats()
    trainer.update(trainer.collect())
    after = trainer.critic.return_stats()
    assert (abs(after[0] - before[0]) > 1) == normalize_value  # the units did move
    for estimate, old_estimate, mask in calls[:2]:  # V and the baselines, first step
        assert torch.allclose(estimate[mask], old_estimate[mask], atol=1e-4)
