"""Returns and losses on hand-computed cases (pure functions of tensors)."""

import pytest
import torch

from poca.loss import clipped_value_loss, linear_decay, masked_mean, policy_loss
from poca.rollout import lambda_returns, next_values, normalized, posthumous_bootstrap

G = 0.9  # gamma used in these hand computations


def returns(reward, value, nxt, alive, done, lambd, horizon=100):
    alive, done = torch.tensor(alive), torch.tensor(done)
    per_agent = posthumous_bootstrap(torch.tensor(nxt), alive, done)
    return lambda_returns(torch.tensor(reward), torch.tensor(value), per_agent, alive, done, G,
                          lambd, horizon)


def test_lambda_one_is_discounted_sum_with_bootstrap():
    # T=3, one env, one agent alive throughout; rollout ends after t=2, V(s_3) = 10
    out = returns([[1.0], [2.0], [3.0]], [[0.0], [5.0], [7.0]], [[5.0], [7.0], [10.0]],
                  [[[True]], [[True]], [[True]]], [[False]] * 3, lambd=1.0)
    g2 = 3 + G * 10
    g1 = 2 + G * g2
    g0 = 1 + G * g1
    assert out[:, 0, 0].tolist() == pytest.approx([g0, g1, g2])


def test_lambda_zero_is_one_step_td():
    out = returns([[1.0], [2.0], [3.0]], [[0.0], [5.0], [7.0]], [[5.0], [7.0], [10.0]],
                  [[[True]], [[True]], [[True]]], [[False]] * 3, lambd=0.0)
    assert out[:, 0, 0].tolist() == pytest.approx([1 + G * 5, 2 + G * 7, 3 + G * 10])


def test_agent_that_ends_early_bootstraps_from_the_groups_next_value():
    # two agents; agent 0 acts at t=0,1 and ends at t=1; agent 1 acts at t=0..2; group goes on
    alive = [[[True, True]], [[True, True]], [[False, True]]]
    value = [[1.0], [2.0], [4.0]]  # V(s_t) of the group
    nxt = [[2.0], [4.0], [8.0]]  # V(s_{t+1}); V(s_3) = 8 at the rollout end
    out = returns([[0.5], [0.5], [0.5]], value, nxt, alive, [[False]] * 3, lambd=0.5)
    g1_agent0 = 0.5 + G * 4.0  # posthumous: the group's value after it left
    assert out[1, 0, 0] == pytest.approx(g1_agent0)
    g0_agent0 = 0.5 + G * (0.5 * 2.0 + 0.5 * g1_agent0)
    assert out[0, 0, 0] == pytest.approx(g0_agent0)
    g2_agent1 = 0.5 + G * 8.0
    g1_agent1 = 0.5 + G * (0.5 * 4.0 + 0.5 * g2_agent1)
    assert out[1, 0, 1] == pytest.approx(g1_agent1)


def test_group_termination_truncation_and_rollout_boundary():
    # three envs, one step each: terminated (0), truncated (value of final obs = 3), running
    value = torch.tensor([[1.0, 1.0, 1.0]])
    nxt = next_values(value, bootstrap=torch.tensor([9.0, 9.0, 6.0]),
                      final_value=torch.tensor([3.0]),
                      group_done=torch.tensor([[True, True, False]]),
                      group_truncated=torch.tensor([[False, True, False]]))
    assert nxt.tolist() == [[0.0, 3.0, 6.0]]
    alive, done = torch.ones(1, 3, 1, dtype=torch.bool), torch.tensor([[True, True, False]])
    out = lambda_returns(torch.tensor([[1.0, 1.0, 1.0]]), value,
                         posthumous_bootstrap(nxt, alive, done), alive, done, G, 0.95, 100)
    assert out[0, :, 0].tolist() == pytest.approx([1.0, 1 + G * 3.0, 1 + G * 6.0])


def test_next_values_inside_the_rollout_use_the_next_step():
    value = torch.tensor([[1.0], [2.0], [3.0]])
    nxt = next_values(value, torch.tensor([4.0]), torch.zeros(0),
                      torch.zeros(3, 1, dtype=torch.bool), torch.zeros(3, 1, dtype=torch.bool))
    assert nxt[:, 0].tolist() == [2.0, 3.0, 4.0]


def test_group_end_stops_the_recursion_across_episodes():
    # the group terminates at t=0; at t=1 a new episode runs with a big reward
    out = returns([[1.0], [100.0]], [[0.0], [0.0]], [[0.0], [0.0]],
                  [[[True]], [[True]]], [[True], [False]], lambd=1.0)
    assert out[0, 0, 0] == pytest.approx(1.0)


def test_time_horizon_cuts_and_bootstraps():
    out = returns([[1.0], [1.0], [1.0], [1.0]], [[0.0]] * 4, [[5.0], [5.0], [5.0], [5.0]],
                  [[[True]]] * 4, [[False]] * 4, lambd=1.0, horizon=2)
    assert out[1, 0, 0] == pytest.approx(1 + G * 5.0)  # cut after 2 steps
    assert out[0, 0, 0] == pytest.approx(1 + G * (1 + G * 5.0))


def test_normalized_uses_only_masked_entries():
    x = torch.tensor([1.0, 3.0, 1000.0])
    out = normalized(x, torch.tensor([True, True, False]))
    assert out[:2].tolist() == pytest.approx([-1.0, 1.0])


def test_policy_loss_clips_each_component():
    old = torch.zeros(1, 2)
    new = torch.log(torch.tensor([[1.5, 0.5]]))  # ratios 1.5 and 0.5
    adv, mask = torch.tensor([2.0]), torch.tensor([True])
    # positive advantage: 1.5 is clipped to 1.2; 0.5 stays (min picks the smaller)
    assert policy_loss(new, old, adv, mask, 0.2).item() == pytest.approx(-(1.2 * 2 + 0.5 * 2) / 2)
    # negative advantage: min(-3, -2.4) = -3 for 1.5; min(-1, -1.6) = -1.6 for 0.5
    assert policy_loss(new, old, -adv, mask, 0.2).item() == pytest.approx((3 + 1.6) / 2)
    new.requires_grad_(True)
    policy_loss(new, old, adv, mask, 0.2).backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 1] != 0  # no push beyond the trust region


def test_policy_loss_ignores_masked_entries():
    lp = torch.tensor([[0.3], [50.0]])
    loss = policy_loss(lp, torch.zeros(2, 1), torch.tensor([1.0, 1.0]),
                       torch.tensor([True, False]), 0.2)
    assert loss.item() == pytest.approx(-1.2)


def test_value_loss_clips_against_stored_estimate():
    target, old = torch.tensor([1.0]), torch.tensor([0.0])
    mask = torch.tensor([True])
    # moving from 0 to 0.5 overshoots epsilon 0.2: the clipped estimate 0.2 is worse, so it counts
    assert clipped_value_loss(torch.tensor([0.5]), old, target, mask, 0.2).item() == \
        pytest.approx((1 - 0.2) ** 2)
    # within the trust region both terms agree
    assert clipped_value_loss(torch.tensor([0.1]), old, target, mask, 0.2).item() == \
        pytest.approx(0.81)


def test_masked_mean_and_decay():
    assert masked_mean(torch.tensor([[1.0, 5.0]]), torch.tensor([[True, False]])).item() == 1.0
    assert linear_decay(0.2, 0.1, 0, 100) == pytest.approx(0.2)
    assert linear_decay(0.2, 0.1, 50, 100) == pytest.approx(0.15)
    assert linear_decay(0.2, 0.1, 500, 100) == pytest.approx(0.1)
