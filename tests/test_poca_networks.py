"""Networks: exact masking, the counterfactual baseline, action distributions."""

import math

import pytest
import torch

from envs.core import GroupSpec, ObsSpec
from poca.attention import ResidualSelfAttention
from poca.config import NetworkSettings
from poca.encoders import RunningNorm
from poca.networks import Actor, Critic


def spec(A=3, C=1, branches=(2, 3), d=4):
    return GroupSpec(num_agents=A, obs=(ObsSpec("vector", "vector", (d,)),), continuous_size=C,
                     discrete_branches=branches, max_steps=10)


def batch(s, N=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    A = s.num_agents
    obs = [torch.randn(N, A, *s.obs[0].shape, generator=g)]
    cont = torch.randn(N, A, s.continuous_size, generator=g)
    disc = torch.stack([torch.randint(0, n, (N, A), generator=g) for n in s.discrete_branches],
                       -1)
    alive = torch.rand(N, A, generator=g) > 0.3
    alive[:, 0] = True
    return obs, cont, disc, alive


# the three attention paths: few entities with narrow (4 features) or wide (16) heads, many
PATHS = [(3, 16), (3, 64), (12, 16)]


@pytest.mark.parametrize(("entities", "size"), PATHS)
def test_attention_ignores_absent_entities_exactly(entities, size):
    torch.manual_seed(0)
    att = ResidualSelfAttention(size)
    x = torch.randn(6, entities, size)
    present = torch.rand(6, entities) > 0.4
    present[:, 0] = True
    y = att(x, present)
    x2 = torch.where(present[..., None], x, torch.randn_like(x) * 1e3)
    assert torch.equal(att(x2, present), y)
    perm = torch.randperm(entities)
    assert torch.allclose(att(x[:, perm], present[:, perm]), y, atol=1e-5)


@pytest.mark.parametrize("size", [16, 64])  # narrow and wide heads
@pytest.mark.parametrize("entities", [3, 6, 12])
def test_attention_over_a_set_equals_attention_over_its_present_rows_alone(entities, size):
    """The mask keeps absent rows out of the attention; and the few-rows and many-rows
    paths agree (torch's fused attention is the reference), since a subset of more than 4 rows
    can have 4 or fewer present."""
    torch.manual_seed(1)
    att = ResidualSelfAttention(size)
    with torch.no_grad():
        for param in att.parameters():
            param.normal_(0, 0.5)
    x = torch.randn(8, entities, size)
    present = torch.rand(8, entities) > 0.5
    present[:, 0] = True
    y = att(x, present)
    for b in range(8):
        rows = x[b:b + 1, present[b]]
        alone = att(rows, torch.ones(rows.shape[:2], dtype=torch.bool))
        torch.testing.assert_close(y[b:b + 1], alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("entities", "size"), PATHS)
def test_attention_over_an_empty_set_is_zero_with_finite_gradients(entities, size):
    att = ResidualSelfAttention(size)
    x = torch.randn(2, entities, size, requires_grad=True)
    present = torch.zeros(2, entities, dtype=torch.bool)
    present[1, 1] = True
    y = att(x, present)
    assert torch.equal(y[0], torch.zeros(size))
    y.sum().backward()
    assert torch.isfinite(x.grad).all() and not x.grad[0].any()


@pytest.mark.parametrize(("entities", "size"), PATHS)
def test_sets_drawn_from_shared_entities_pool_as_each_set_alone(entities, size):
    """pool_sets (the critic's 1 + A sets, each entity embedded once) equals the attention over
    each set gathered on its own, entity by entity, values and gradients."""
    torch.manual_seed(2)
    att = ResidualSelfAttention(size)
    with torch.no_grad():
        for param in att.parameters():
            param.normal_(0, 0.3)
    B, K, S = 5, 2 * entities, 4
    x = torch.randn(B, K, size, requires_grad=True)
    rows = torch.stack([torch.randperm(K)[:entities] for _ in range(S)])
    present = torch.rand(B, S, entities) > 0.3
    pooled = att.pool_sets(x, rows, present)
    alone = torch.stack([att(x[:, rows[s]], present[:, s]) for s in range(S)], 1)
    torch.testing.assert_close(pooled, alone, rtol=1e-5, atol=1e-5)
    grad, = torch.autograd.grad((pooled * torch.arange(S)[:, None]).sum(), x)
    expected, = torch.autograd.grad((alone * torch.arange(S)[:, None]).sum(), x)
    torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-5)


def test_critic_ignores_agents_that_are_not_alive():
    s = spec()
    critic = Critic(s, NetworkSettings(hidden_units=32))
    torch.nn.init.normal_(critic.head.weight)  # the head starts at 0: give it something to show
    obs, cont, disc, alive = batch(s)
    v, b, _ = critic(obs, cont, disc, alive)
    dead = ~alive
    obs2 = [torch.where(dead[..., None], torch.randn_like(obs[0]) * 100, obs[0])]
    cont2 = torch.where(dead[..., None], torch.randn_like(cont), cont)
    disc2 = torch.where(dead[..., None], torch.zeros_like(disc), disc)
    v2, b2, _ = critic(obs2, cont2, disc2, alive)
    assert torch.equal(v, v2)
    assert torch.equal(b[alive], b2[alive])
    assert torch.allclose(critic.value(obs2, alive)[0], v, atol=1e-6)  # the value-only path


def test_baseline_differs_from_value_only_through_other_agents_actions():
    s = spec()
    critic = Critic(s, NetworkSettings(hidden_units=32))
    torch.nn.init.normal_(critic.head.weight)  # the head starts at 0: give it something to show
    obs, cont, disc, alive = batch(s)
    alive[:] = True
    v, b, _ = critic(obs, cont, disc, alive)
    # agent 0's own action does not enter its baseline; the others' actions do
    cont2 = cont.clone()
    cont2[:, 0] += 1.0
    disc2 = disc.clone()
    disc2[:, 0, 0] = 1 - disc2[:, 0, 0]
    v2, b2, _ = critic(obs, cont2, disc2, alive)
    assert torch.equal(b2[:, 0], b[:, 0]) and torch.equal(v2, v)
    assert not torch.allclose(b2[:, 1], b[:, 1])
    # alone in its group, an agent's baseline is the group value
    solo = alive.clone()
    solo[:, 1:] = False
    v3, b3, _ = critic(obs, cont, disc, solo)
    assert torch.allclose(b3[:, 0], v3)


def test_actor_distribution_matches_torch_distributions():
    s = spec(C=2, branches=(2, 3))
    actor = Actor(s, NetworkSettings(hidden_units=16, num_layers=1))
    obs, _, _, _ = batch(s)
    dist, _ = actor(obs)
    cont, disc = dist.sample(torch.Generator().manual_seed(0))
    lp = dist.log_prob(cont, disc)
    normal = torch.distributions.Normal(dist.mean, dist.log_std.exp())
    assert torch.allclose(lp[..., :2], normal.log_prob(cont), atol=1e-5)
    for b, logits in enumerate(dist.logits):
        cat = torch.distributions.Categorical(logits=logits)
        assert torch.allclose(lp[..., 2 + b], cat.log_prob(disc[..., b]), atol=1e-5)
    expected = normal.entropy().mean(-1) + sum(
        torch.distributions.Categorical(logits=lg).entropy() for lg in dist.logits)
    assert torch.allclose(dist.entropy(), expected, atol=1e-5)


def test_action_masks_are_respected():
    s = spec(C=0, branches=(3,))
    actor = Actor(s, NetworkSettings(hidden_units=16, num_layers=1))
    obs, _, _, _ = batch(s, N=200)
    mask = torch.ones(200, 3, 3, dtype=torch.bool)
    mask[..., 1] = False
    _, disc = actor(obs, mask)[0].sample(torch.Generator().manual_seed(0))
    assert (disc != 1).all() and (disc == 0).any() and (disc == 2).any()


def test_running_norm_matches_batch_statistics():
    norm = RunningNorm(2)
    data = torch.randn(1000, 2) * torch.tensor([3.0, 0.5]) + torch.tensor([1.0, -2.0])
    for chunk in data.split(100):
        norm.update(chunk)
    out = norm(data)
    assert torch.allclose(out.mean(0), torch.zeros(2), atol=0.05)
    assert torch.allclose(out.std(0), torch.ones(2), atol=0.05)
    assert math.isclose(float(norm.count), 1001)
