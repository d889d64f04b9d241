"""Goal's rules, checked against episodes computed by hand."""

import numpy as np
import pytest

import envs
from envs.goal import toward


def run(env, actions_per_step):
    """Step a 1-env core with per-step discrete actions [A] (or dicts); returns the steps."""
    out = []
    for acts in actions_per_step:
        if not isinstance(acts, dict):
            acts = {"discrete": np.array(acts, dtype=np.int64).reshape(1, -1, 1)}
        out.append(env.step(acts))
    return out


def test_group_mode_hand_computed_episode():
    env = envs.make_group("Goal-v0", num_agents=2)
    first = env.reset(seed=3)
    g0, g1 = first.obs[0][0, :, 0]
    # agent 0 walks to its goal (done at step 5); agent 1 wiggles, then walks the wrong way
    # (done at step 7).
    plan = [[toward(g0), 1], [toward(g0), 0]] + [[toward(g0), toward(g1, wrong=True)]] * 5
    steps = run(env, plan)
    for s in steps[:4]:
        np.testing.assert_allclose(s.reward[0], [-0.01, -0.01])
        assert s.group_reward[0] == 0 and not s.terminated.any() and not s.group_done[0]
    s5 = steps[4]
    np.testing.assert_array_equal(s5.terminated[0], [True, False])
    np.testing.assert_allclose(s5.reward[0], [-0.01, -0.01])
    np.testing.assert_array_equal(s5.alive[0], [False, True])
    np.testing.assert_allclose(s5.obs[0][0, 1], [g1, 0.5, 0.0])  # the scoreboard shows agent 0
    np.testing.assert_allclose(steps[5].reward[0], [0.0, -0.01])
    s7 = steps[6]
    np.testing.assert_array_equal(s7.terminated[0], [False, True])
    assert s7.group_done[0] and not s7.group_truncated[0]
    assert s7.group_reward[0] == pytest.approx(0.0)  # mean outcome of +1 and -1
    np.testing.assert_allclose(s7.final_obs[0][0, 1], [g1, 0.5, 0.5])
    np.testing.assert_array_equal(s7.alive[0], [True, True])  # the next episode has begun
    np.testing.assert_allclose(s7.obs[0][0, :, 1:], 0.0)
    assert all(s.group_reward[0] == 0 for s in steps[:6])  # paid once, at the end


def test_group_reward_is_mean_outcome():
    env = envs.make_group("Goal-v0", num_agents=3)
    g = env.reset(seed=0).obs[0][0, :, 0]
    steps = run(env, [[toward(g[0]), toward(g[1]), toward(g[2], wrong=True)]] * 5)
    assert steps[-1].group_done[0]
    assert steps[-1].group_reward[0] == pytest.approx((1 + 1 - 1) / 3)


@pytest.mark.parametrize("num_agents", [10, 26])
def test_scoreboard_of_a_whole_winning_group_stays_in_its_space(num_agents):
    # float32 sums of 0.5 / A had rounded past 1 (1.0000001 for 10 agents, 1.0000004 for 26)
    env = envs.make_group("Goal-v0", num_agents=num_agents)
    g = env.reset(seed=0).obs[0][0, :, 0]
    last = run(env, [[toward(goal) for goal in g]] * 5)[-1]
    assert last.group_done[0] and last.group_reward[0] == 1.0
    board = last.final_obs[0][0, :, 1:]
    np.testing.assert_array_equal(board, np.tile([1.0, 0.0], (num_agents, 1)))


def test_mlagents_mode_hand_computed_episode():
    env = envs.make_group("Goal-v0", num_agents=2, reward_mode="mlagents", shared_goal=True)
    first = env.reset(seed=5)
    assert first.obs[0].shape == (1, 2, 1)  # goal only
    g = first.obs[0][0, 0, 0]
    assert first.obs[0][0, 1, 0] == g
    plan = [[toward(g), 1], [toward(g), 0]] + [[toward(g), toward(g, wrong=True)]] * 5
    steps = run(env, plan)
    np.testing.assert_allclose(steps[4].reward[0], [-0.01, -0.01])  # early success: min(-.01, r)
    assert steps[4].group_reward[0] == 0
    np.testing.assert_allclose(steps[6].reward[0], [0.0, 0.0])  # last finisher: 0 individually
    assert steps[6].group_reward[0] == pytest.approx(-1.06)


def test_mlagents_early_failure_and_simultaneous_finish():
    env = envs.make_group("Goal-v0", num_agents=2, reward_mode="mlagents", shared_goal=True)
    g = env.reset(seed=1).obs[0][0, 0, 0]
    steps = run(env, [[toward(g, wrong=True), toward(g)]] * 5)
    # both finish on step 5: agent 0 counts as early (failed: -1.06), agent 1 is last (+1.06)
    np.testing.assert_allclose(steps[4].reward[0], [-1.06, 0.0])
    assert steps[4].group_reward[0] == pytest.approx(1.06)
    assert steps[4].group_done[0]


def test_continuous_actions_are_scaled_and_clipped():
    env = envs.make_group("Goal-v0", num_agents=1, action_sizes=(1, 0))
    g = env.reset(seed=0).obs[0][0, 0, 0]
    half = {"continuous": np.full((1, 1, 1), 0.5 * g, np.float32)}
    steps = run(env, [half] * 10)  # 0.1 per step: 10 steps to the edge
    assert [s.terminated[0, 0] for s in steps] == [False] * 9 + [True]
    assert steps[-1].group_reward[0] == pytest.approx(1.0)
    env.reset(seed=0)
    big = {"continuous": np.full((1, 1, 1), 7.0 * g, np.float32)}  # clipped to 1 -> 0.2/step
    assert [s.terminated[0, 0] for s in run(env, [big] * 5)] == [False] * 4 + [True]


def test_hybrid_agent_needs_every_coordinate_on_an_edge():
    env = envs.make_group("Goal-v0", num_agents=1, action_sizes=(1, 1))
    g = env.reset(seed=0).obs[0][0, 0, 0]
    # continuous coordinate to the goal side, discrete one to the wrong side: outcome 0
    act = {"continuous": np.full((1, 1, 1), g, np.float32),
           "discrete": np.full((1, 1, 1), toward(g, wrong=True), np.int64)}
    steps = run(env, [act] * 5)
    assert steps[-1].group_done[0] and steps[-1].group_reward[0] == pytest.approx(0.0)
    env.reset(seed=0)
    still = {"continuous": np.zeros((1, 1, 1), np.float32), "discrete": act["discrete"]}
    assert not any(s.terminated.any() for s in run(env, [still] * 8))


def test_time_limit_truncates_without_group_reward():
    env = envs.make_group("Goal-v0", num_agents=2, max_steps=3)
    env.reset(seed=0)
    steps = run(env, [[1, 0], [0, 1], [1, 0]])
    assert not steps[1].group_done[0]
    last = steps[2]
    assert last.group_done[0] and last.group_truncated[0]
    np.testing.assert_array_equal(last.truncated[0], [True, True])
    assert not last.terminated.any() and last.group_reward[0] == 0


def test_shared_goal_and_per_agent_goals():
    shared = envs.make_group("Goal-v0", num_envs=256, num_agents=4, shared_goal=True)
    goals = shared.reset(seed=0).obs[0][..., 0]
    assert (goals == goals[:, :1]).all()
    own = envs.make_group("Goal-v0", num_envs=256, num_agents=4)
    goals = own.reset(seed=0).obs[0][..., 0]
    assert (goals != goals[:, :1]).any()
    assert 0.4 < (goals > 0).mean() < 0.6


def test_agents_finishing_do_not_move_afterwards():
    env = envs.make_group("Goal-v0", num_agents=2)
    g = env.reset(seed=0).obs[0][0, :, 0]
    run(env, [[toward(g[0]), 1], [toward(g[0]), 0]] * 3)
    pos0 = env.pos[0, 0].copy()
    run(env, [[1 - toward(g[0]), 1]])
    np.testing.assert_array_equal(env.pos[0, 0], pos0)


@pytest.mark.parametrize("reward_mode, expected", [("group", 1.0), ("mlagents", 1.06)])
@pytest.mark.parametrize("kw", [{}, {"action_sizes": (1, 1), "num_agents": 3},
                                {"action_sizes": (2, 0), "show_steps": 2}])
def test_reference_policy_reaches_the_maximum_return(reward_mode, expected, kw):
    env = envs.make_group("Goal-v0", num_envs=64, reward_mode=reward_mode, **kw)
    env.reset(seed=0)
    group_return = np.zeros(64)
    for t in range(5):
        step = env.step(env.reference_policy())
        group_return += step.group_reward
        assert step.group_done.all() == (t == 4)  # 5 steps of 0.2 reach the edge
    np.testing.assert_allclose(group_return, expected, rtol=1e-6)
    assert not step.group_truncated.any()
