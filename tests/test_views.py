"""Gymnasium and PettingZoo views: API conformance, early termination, registration."""

import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import pettingzoo
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo import test as pzt

import envs
from envs.goal import toward
from envs.pettingzoo import GroupParallelEnv

ACTION_KINDS = {"discrete": (0, 1), "continuous": (1, 0), "hybrid": (1, 1), "wide": (2, 3)}


@pytest.mark.parametrize("kind", ACTION_KINDS)
@pytest.mark.parametrize("reward_mode", ["group", "mlagents"])
def test_gymnasium_check_env_without_warnings(kind, reward_mode):
    env = gymnasium.make("groupenvs/Goal-v0", action_sizes=ACTION_KINDS[kind],
                         reward_mode=reward_mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert not caught, [str(w.message) for w in caught]


@pytest.mark.parametrize("kind", ACTION_KINDS)
@pytest.mark.parametrize("death_mode", ["remove", "absorb"])
def test_pettingzoo_parallel_api(kind, death_mode):
    env = pettingzoo.make("parallel", "groupenvs/goal-v0", num_agents=3,
                          action_sizes=ACTION_KINDS[kind], death_mode=death_mode)
    pzt.parallel_api_test(env, num_cycles=300)


def test_module_prefix_imports_the_package():
    code = ("import gymnasium; e = gymnasium.make('envs:groupenvs/Goal-v0'); "
            "print(e.reset(seed=0)[0]['alive'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[1 1]"


def test_registration_in_both_registries():
    assert "groupenvs/Goal-v0" in gymnasium.registry
    assert gymnasium.spec("groupenvs/Goal-v0").vector_entry_point is not None
    assert "groupenvs/goal-v0" in pettingzoo.parallel_registry
    assert envs.pettingzoo_id("GoalMemory-v0") == "groupenvs/goal_memory-v0"


def test_pettingzoo_agent_ends_once_then_leaves():
    env = GroupParallelEnv(num_agents=2)
    obs, infos = env.reset(seed=3)
    g0, g1 = obs["agent_0"][0], obs["agent_1"][0]
    seen_terminal = {"agent_0": 0, "agent_1": 0}
    group_rewards = []
    plan = [(toward(g0), 1), (toward(g0), 0)] + [(toward(g0), toward(g1))] * 5
    for a0, a1 in plan:
        acts = {"agent_0": a0, "agent_1": a1}
        obs, rew, term, trunc, info = env.step({a: acts[a] for a in env.agents})
        for a in term:
            seen_terminal[a] += term[a]
            assert rew[a] == pytest.approx(info[a]["individual_reward"] + info[a]["group_reward"])
        group_rewards += [info[a]["group_reward"] for a in info if info[a]["group_reward"]]
        if "agent_0" in term and term["agent_0"]:
            assert env.agents == ["agent_1"]
    assert seen_terminal == {"agent_0": 1, "agent_1": 1}
    assert env.agents == []
    assert group_rewards == [pytest.approx(1.0)]  # once, to the agent present at the end
    assert rew["agent_1"] == pytest.approx(-0.01 + 1.0)
    np.testing.assert_allclose(obs["agent_1"], [g1, 1.0, 0.0])  # final obs: both on goal side
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_pettingzoo_rejects_actions_for_departed_or_missing_agents():
    env = GroupParallelEnv(num_agents=2)
    obs, _ = env.reset(seed=3)
    g0 = obs["agent_0"][0]
    for i in range(5):
        env.step({"agent_0": toward(g0), "agent_1": i % 2})
    assert env.agents == ["agent_1"]
    with pytest.raises(ValueError, match=r"not acting \['agent_0'\]"):
        env.step({"agent_0": 1, "agent_1": 1})
    with pytest.raises(ValueError, match=r"missing \['agent_1'\]"):
        env.step({})
    with pytest.raises(ValueError, match="agent_1"):
        env.step({"agent_1": 1.5})


def test_pettingzoo_absorb_mode_keeps_agents_until_group_ends():
    env = GroupParallelEnv(num_agents=2, death_mode="absorb")
    obs, _ = env.reset(seed=3)
    g0, g1 = obs["agent_0"][0], obs["agent_1"][0]
    plan = [(toward(g0), 1), (toward(g0), 0)] + [(toward(g0), toward(g1))] * 5
    for i, (a0, a1) in enumerate(plan):
        obs, rew, term, trunc, info = env.step({"agent_0": a0, "agent_1": a1})
        if 4 < i < 6:  # agent 0 has ended, agent 1 has not
            assert env.agents == ["agent_0", "agent_1"]
            assert rew["agent_0"] == 0.0 and not term["agent_0"]
            np.testing.assert_array_equal(obs["agent_0"], 0.0)
    assert term == {"agent_0": True, "agent_1": True} and env.agents == []


def test_pettingzoo_determinism_over_many_steps():
    def trace(seed):
        env = GroupParallelEnv(num_agents=3, action_sizes=(1, 1))
        rng = np.random.default_rng(0)
        out = [env.reset(seed=seed)[0]]
        for _ in range(200):
            if not env.agents:
                out.append(env.reset()[0])
            acts = {a: {"continuous": rng.uniform(-1, 1, 1).astype(np.float32),
                        "discrete": int(rng.integers(2))} for a in env.agents}
            out.append(env.step(acts)[:2])
        return out

    a, b, c = trace(4), trace(4), trace(5)
    assert repr(a) == repr(b)
    assert repr(a) != repr(c)


def test_pettingzoo_state_and_spaces():
    env = GroupParallelEnv(num_agents=3, action_sizes=(1, 1))
    env.reset(seed=0)
    state = env.state()
    assert env.state_space.contains(state)
    assert state.shape == (3 * (3 + 1),)
    np.testing.assert_array_equal(state.reshape(3, 4)[:, -1], 1.0)  # all alive
    assert env.action_space("agent_0") is env.action_space("agent_2")
    assert set(env.action_space("agent_0").keys()) == {"continuous", "discrete"}
    assert env.metadata["name"] == "goal_v0"


def test_gymnasium_joint_step_reward_is_team_reward():
    env = gymnasium.make("groupenvs/Goal-v0", num_agents=2)
    obs, _ = env.reset(seed=3)
    g = obs["vector"][:, 0]
    total = 0.0
    for _ in range(5):
        obs, reward, terminated, truncated, info = env.step(
            np.array([[toward(g[0])], [toward(g[1])]]))
        total += reward
    assert terminated and not truncated
    assert total == pytest.approx(5 * -0.02 + 1.0)
    np.testing.assert_array_equal(obs["alive"], [0, 0])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.array([[1], [1]]))


def test_gymnasium_truncation():
    env = gymnasium.make("groupenvs/Goal-v0", max_steps=2)
    env.reset(seed=0)
    env.step(np.array([[1], [0]]))
    _, _, terminated, truncated, _ = env.step(np.array([[0], [1]]))
    assert truncated and not terminated


def test_make_vec_is_native_and_auto_resets():
    env = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=8, num_agents=3)
    assert env.num_envs == 8 and isinstance(env.unwrapped, envs.gymnasium.GroupVectorEnv)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(100):
        obs, reward, term, trunc, info = env.step(rng.integers(0, 2, (8, 3, 1)))
        assert reward.shape == (8,) and env.observation_space.contains(obs)
        if "_final_obs" in info:
            done = info["_final_obs"]
            np.testing.assert_array_equal(done, term | trunc)
            assert (info["final_obs"]["vector"][done][..., 1:].sum(-1) > 0).all()
            ended += done.sum()
    assert ended > 8
    env.close()


def test_gymnasium_bad_arguments():
    with pytest.raises(TypeError, match="valid"):
        gymnasium.make("groupenvs/Goal-v0", agents=2)
    with pytest.raises(ValueError, match="render_mode"):
        envs.gymnasium.GroupGymEnv(render_mode="ansi")
    with pytest.raises(ValueError, match="death_mode"):
        GroupParallelEnv(death_mode="zombie")


def test_aec_form_passes_pettingzoo_api_test():
    pzt.api_test(pettingzoo.make("aec", "groupenvs/goal-v0", num_agents=3), num_cycles=200)
