"""Gymnasium and PettingZoo views: API conformance, early termination, registration."""

import ast
import re
import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import pettingzoo
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode
from pettingzoo import test as pzt

import envs
from envs.core import GroupEnv, GroupSpec, ObsSpec
from envs.goal import toward
from envs.gymnasium import GroupGymEnv, GroupVectorEnv
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
    # as PettingZoo's reference envs (and what SuperSuit's black_death_v3 relies on)
    assert env.step({}) == ({}, {}, {}, {}, {})
    assert env.step({"agent_0": 1, "agent_1": 0}) == ({}, {}, {}, {}, {})
    with pytest.raises(ValueError, match="unknown agents"):
        env.step({"agent_7": 1})
    with pytest.raises(RuntimeError, match="reset"):
        GroupParallelEnv(num_agents=2).step({})


def test_pettingzoo_ignores_departed_agents_and_rejects_missing_or_unknown():
    def run(extra):
        env = GroupParallelEnv(num_agents=2)
        obs, _ = env.reset(seed=3)
        g0 = obs["agent_0"][0]
        out = []
        for i in range(8):
            acts = {"agent_0": toward(g0), "agent_1": i % 2}
            out.append(env.step({a: v for a, v in acts.items() if a in env.agents or extra}))
        return env, out

    env, with_departed = run(extra=True)  # TorchRL sends an action for every agent
    assert env.agents == ["agent_1"]
    assert repr(with_departed) == repr(run(extra=False)[1])  # departed agents' actions ignored
    assert env.step({"agent_0": "anything", "agent_1": 1})[0].keys() == {"agent_1"}
    with pytest.raises(ValueError, match=r"missing \['agent_1'\]"):
        env.step({})
    with pytest.raises(ValueError, match=r"missing \['agent_1'\]"):
        env.step({"agent_0": 1})
    with pytest.raises(ValueError, match=r"unknown agents \['agent_9'\]"):
        env.step({"agent_1": 1, "agent_9": 1})
    with pytest.raises(ValueError, match="agent_1"):
        env.step({"agent_1": 1.5})


def test_pettingzoo_actions_of_the_wrong_form_name_the_agent():
    env = GroupParallelEnv(num_agents=2, action_sizes=(2, 0))
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"agent_0: continuous action must be float with 2 "
                                         r"entries, got float32 \(3,\)"):  # ragged, not numpy's
        env.step({"agent_0": np.zeros(3, np.float32), "agent_1": np.zeros(2, np.float32)})
    with pytest.raises(TypeError, match="actions must be a dict"):
        env.step([np.zeros(2, np.float32)] * 2)
    env = GroupParallelEnv(num_agents=2)
    env.reset(seed=0)
    same = env.step({"agent_0": np.array([1]), "agent_1": 0})  # each valid, in different forms
    env.reset(seed=0)
    assert repr(same) == repr(env.step({"agent_0": 1, "agent_1": 0}))


def test_pettingzoo_spaces_of_unknown_agents_are_refused():
    env = GroupParallelEnv(num_agents=2)
    assert env.observation_space("agent_1") is env.observation_space("agent_0")
    for space in (env.observation_space, env.action_space):
        with pytest.raises(ValueError, match=r"unknown agent 'agent_7'; agents are \['agent_0'"):
            space("agent_7")


def test_gymnasium_hybrid_actions_need_exactly_both_keys():
    env = gymnasium.make("groupenvs/Goal-v0", action_sizes=(1, 1)).unwrapped
    env.reset(seed=0)
    good = {"continuous": np.ones((2, 1), np.float32), "discrete": np.ones((2, 1), np.int64)}
    for action in ({**good, "typo": 0}, {"continuous": good["continuous"]}):
        with pytest.raises(ValueError, match="exactly the keys 'continuous' and 'discrete'"):
            env.step(action)
    with pytest.raises(TypeError, match="flat must be a bool"):
        gymnasium.make("groupenvs/Goal-v0", flat="False")


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


def test_make_vec_same_step_auto_resets():
    env = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=8, num_agents=3,
                             autoreset_mode=AutoresetMode.SAME_STEP)
    assert env.num_envs == 8 and isinstance(env.unwrapped, envs.gymnasium.GroupVectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
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
            assert all(final is None for final in info["final_obs"][~done])
            assert all(final["vector"][..., 1:].sum() > 0 for final in info["final_obs"][done])
            np.testing.assert_array_equal(obs["vector"][done][..., 1:], 0.0)  # next episode
            ended += done.sum()
    assert ended > 8
    env.close()


def test_make_vec_next_step_is_the_default_and_spends_one_step_on_resets():
    env = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=8, num_agents=3)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    prev_done, restarts = np.zeros(8, bool), 0
    for _ in range(100):
        obs, reward, term, trunc, info = env.step(rng.integers(0, 2, (8, 3, 1)))
        assert env.observation_space.contains(obs) and "final_obs" not in info
        done = term | trunc
        # the step after an end: the next episode's first observation, reward 0, no flags
        assert not done[prev_done].any() and (reward[prev_done] == 0).all()
        np.testing.assert_array_equal(obs["vector"][prev_done][..., 1:], 0.0)
        np.testing.assert_array_equal(obs["alive"][prev_done], 1)
        # terminal view: the agents that ended on this step show the scoreboard, the ones that
        # ended before it are blank (a task's rows for them may hold anything)
        scores, blank = obs["vector"][term][..., 1:].sum(-1), (obs["vector"][term] == 0).all(-1)
        assert (scores.max(-1) > 0).all() and ((scores > 0) | blank).all()
        restarts += prev_done.sum()
        prev_done = done
    assert restarts > 8
    with pytest.raises(ValueError, match="autoreset_mode"):
        gymnasium.make_vec("groupenvs/Goal-v0", autoreset_mode=AutoresetMode.DISABLED)
    # Gymnasium's own vectorizers take it through vector_kwargs, over the single-group env
    sync = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, vectorization_mode="sync",
                              vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    sync.reset(seed=0)
    finals = 0
    for _ in range(60):
        *_, info = sync.step(rng.integers(0, 2, (2, 2, 1)))
        finals += int(info.get("_final_obs", np.zeros(2, bool)).sum())
    assert finals > 0


@pytest.mark.parametrize("kind", ACTION_KINDS)
def test_flat_joint_view_has_1d_spaces(kind):
    env = gymnasium.make("groupenvs/GoalVisual-v0", num_agents=3, flat=True, num_vector=1,
                         action_sizes=ACTION_KINDS[kind])
    assert env.observation_space.shape == (3 * 3 + 3 * 20 * 20 * 3 + 3,)
    check_env(env.unwrapped, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(obs[-3:], 1.0)  # the alive mask closes the vector
    space = env.action_space
    flat_spaces = space.values() if isinstance(space, gymnasium.spaces.Dict) else [space]
    assert all(len(s.shape) == 1 for s in flat_spaces)
    vec = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, num_agents=3, flat=True)
    assert vec.single_action_space == gymnasium.spaces.MultiDiscrete([2, 2, 2])
    vec.reset(seed=0)
    with pytest.raises(ValueError, match=r"action space's shape \(2, 3\), got \(2, 3, 1\)"):
        vec.step(np.zeros((2, 3, 1), np.int64))


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_flat_make_vec_carries_the_same_data(mode):
    kw = {"num_envs": 4, "num_agents": 2, "autoreset_mode": mode}
    flat = gymnasium.make_vec("groupenvs/GoalVisual-v0", num_vector=1, flat=True, **kw)
    nested = gymnasium.make_vec("groupenvs/GoalVisual-v0", num_vector=1, **kw)

    def as_flat(obs):
        return np.concatenate([obs[k].reshape(len(obs[k]), -1)
                               for k in ("vector", "image_0", "alive")], 1)

    a, b = flat.reset(seed=1)[0], nested.reset(seed=1)[0]
    rng = np.random.default_rng(0)
    for _ in range(30):
        np.testing.assert_array_equal(a, as_flat(b))
        action = rng.integers(0, 2, (4, 2, 1))
        a, ra, *_, info_a = flat.step(action.reshape(4, 2))
        b, rb, *_, info_b = nested.step(action)
        np.testing.assert_array_equal(ra, rb)
        if "final_obs" in info_b:
            for e in np.flatnonzero(info_b["_final_obs"]):
                finals = {k: v[None] for k, v in info_b["final_obs"][e].items()}
                np.testing.assert_array_equal(info_a["final_obs"][e], as_flat(finals)[0])


def test_gymnasium_bad_arguments():
    with pytest.raises(TypeError, match="valid"):
        gymnasium.make("groupenvs/Goal-v0", agents=2)
    with pytest.raises(ValueError, match="render_mode"):
        envs.gymnasium.GroupGymEnv(render_mode="ansi")
    with pytest.raises(ValueError, match="death_mode"):
        GroupParallelEnv(death_mode="zombie")


def test_aec_form_passes_pettingzoo_api_test():
    pzt.api_test(pettingzoo.make("aec", "groupenvs/goal-v0", num_agents=3), num_cycles=200)


def test_gymnasium_make_with_num_envs_points_to_make_vec():
    with pytest.raises(TypeError, match=r"use gymnasium.make_vec\('groupenvs/Goal-v0', "
                                        r"num_envs=...\)"):
        gymnasium.make("groupenvs/Goal-v0", num_envs=4)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_native_make_vec_infos_have_the_keys_of_gymnasiums_sync_vectorizer(mode):
    """Each info key comes with its `_key` mask, as Gymnasium's vectorizers give them, so code
    written against those reads the native VectorEnv alike."""
    made = [gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, autoreset_mode=mode),
            gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, vectorization_mode="sync",
                               vector_kwargs={"autoreset_mode": mode})]
    keys = []
    for vec in made:
        vec.reset(seed=0)
        _, _, _, _, info = vec.step(np.ones((2, 2, 1), np.int64))
        keys.append(sorted(info))
    assert keys[0] == keys[1] and "_group_reward" in keys[0], keys


def test_native_make_vec_takes_a_seed_per_group_as_sync_does():
    """reset(seed=[...]) gives group i the episodes of make(id).reset(seed=seeds[i]), as
    Gymnasium's sync vectorizer does with the same list."""
    native = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=3, num_agents=3)
    sync = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=3, vectorization_mode="sync",
                              num_agents=3)
    rng = np.random.default_rng(0)
    for seeds in ([5, 0, 5], np.array([7, 8, 9])):
        runs = [[native.reset(seed=seeds)[0]], [sync.reset(seed=[int(s) for s in seeds])[0]]]
        for _ in range(40):
            action = rng.integers(0, 2, (3, 3, 1))
            for run, vec in zip(runs, (native, sync), strict=True):
                run.append(vec.step(action)[:4])
        for ours, theirs in zip(*runs, strict=True):
            for a, b in zip(ours if isinstance(ours, tuple) else (ours,),
                            theirs if isinstance(theirs, tuple) else (theirs,), strict=True):
                for key in (a if isinstance(a, dict) else [None]):
                    np.testing.assert_array_equal(a if key is None else a[key],
                                                  b if key is None else b[key])
    first = native.reset(seed=[5, 0, 5])[0]["vector"]
    np.testing.assert_array_equal(first[0], first[2])  # the same seed, the same episodes
    with pytest.raises(ValueError, match=r"one seed per env \(3\), got 2"):
        native.reset(seed=[1, 2])
    with pytest.raises(TypeError, match=r"seed\[1\] must be an int, got None"):
        native.reset(seed=[1, None, 2])


class Picky(envs.GroupEnv):
    """Two agents, branches (3, 2); move 0 of the first branch is never allowed, so a view that
    fills ignored actions with 0 would play a forbidden move. Episodes end at the time limit."""

    def __init__(self, num_envs=1, max_steps=3):
        super().__init__(envs.GroupSpec(num_agents=2, obs=(envs.ObsSpec("v", "vector", (2,)),),
                                        continuous_size=0, discrete_branches=(3, 2),
                                        max_steps=max_steps), num_envs)

    def _reset_envs(self, idx):
        self.alive[idx] = True

    def _step(self, cont, disc):
        E = self.num_envs
        no = np.zeros((E, 2), bool)
        return (disc[..., 0] == 2).astype(np.float32), np.zeros(E, np.float32), no, no.copy()

    def _observe(self, rows=slice(None)):
        obs = np.zeros((self.env_ids[rows].size, 2, 2), np.float32)
        obs[..., 0] = self.t[rows, None] / 50  # the time, so that views see something
        obs[..., 1] = 0.5
        return (obs,)

    def _action_mask(self):
        mask = np.ones((self.num_envs, 2, 5), bool)
        mask[..., 0] = False
        return mask


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_view_of_a_masked_task_shows_the_mask_and_restarts_within_it(mode):
    from envs.gymnasium import GroupVectorEnv

    env = GroupVectorEnv(Picky, num_envs=4, autoreset_mode=mode)
    _, infos = env.reset(seed=0)
    expected = np.tile([False, True, True, True, True], (4, 2, 1))
    np.testing.assert_array_equal(infos["action_mask"], expected)
    assert infos["_action_mask"].all()
    legal = np.ones((4, 2, 2), np.int64)
    for _ in range(10):  # three time limits, and the restart steps after them
        *_, infos = env.step(legal)
        np.testing.assert_array_equal(infos["action_mask"], expected)


def test_single_group_view_of_a_masked_task_shows_the_mask():
    from envs.gymnasium import GroupGymEnv

    env = GroupGymEnv(Picky)
    _, info = env.reset(seed=0)
    assert info["action_mask"].tolist() == [[False, True, True, True, True]] * 2
    *_, info = env.step(np.ones((2, 2), np.int64))
    assert info["action_mask"].shape == (2, 5)
    with pytest.raises(TypeError, match=r"GroupVectorEnv\(Picky, num_envs=...\)"):
        GroupGymEnv(Picky, num_envs=2)


class PickyOneLeaves(Picky):
    """Picky, with agent_1 terminating on the first step."""

    def _step(self, cont, disc):
        reward, group_reward, terminated, truncated = super()._step(cont, disc)
        terminated[:, 1] = self.alive[:, 1]
        self.alive[:, 1] = False
        return reward, group_reward, terminated, truncated


@pytest.mark.filterwarnings("ignore:Action space for each agent probably")  # MultiDiscrete
def test_pettingzoo_absorbed_agents_of_a_masked_task_have_a_mask():
    """death_mode="absorb" keeps ended agents in `agents`, so the usual loop samples for each
    with infos[agent]["action_mask"]: an ended one gets every action allowed (it is ignored)."""
    env = GroupParallelEnv(PickyOneLeaves, death_mode="absorb", max_steps=5)
    _, infos = env.reset(seed=0)
    for _ in range(3):
        actions = {a: env.action_space(a).sample(infos[a]["action_mask"]) for a in env.agents}
        *_, infos = env.step(actions)
    assert env.agents == ["agent_0", "agent_1"]
    assert [m.tolist() for m in infos["agent_1"]["action_mask"]] == [[1, 1, 1], [1, 1]]
    assert [m.tolist() for m in infos["agent_0"]["action_mask"]] == [[0, 1, 1], [1, 1]]


@pytest.mark.filterwarnings("ignore:Action space for each agent probably")  # MultiDiscrete
def test_pettingzoo_mask_of_several_branches_is_the_form_sample_takes():
    from envs.pettingzoo import aec_env

    env = GroupParallelEnv(Picky, max_steps=50)
    _, infos = env.reset(seed=0)
    mask = infos["agent_0"]["action_mask"]
    assert [m.tolist() for m in mask] == [[0, 1, 1], [1, 1]]
    for _ in range(20):
        assert env.action_space("agent_0").sample(mask)[0] != 0
    assert env.metadata["name"] == "Picky"
    pzt.api_test(aec_env(Picky, max_steps=50), num_cycles=100)


def test_pettingzoo_view_with_num_envs_points_to_the_batched_forms():
    for kind in ("parallel", "aec"):
        with pytest.raises(TypeError, match=r"num_envs: a PettingZoo env is one group; for 4 "
                                            r"groups .* envs.make_group\('Goal-v0'"):
            pettingzoo.make(kind, "groupenvs/goal-v0", num_envs=4)


def test_make_group_takes_a_task_class_or_a_name_only():
    assert isinstance(envs.make_group(Picky, num_envs=2), Picky)
    with pytest.raises(TypeError, match="a registered task's name or a GroupEnv subclass"):
        envs.make_group(Picky(), num_envs=2)


def _assert_same_infos(native, sync, where):
    assert sorted(native) == sorted(sync), f"{where}: keys {sorted(native)} vs {sorted(sync)}"
    for key, value in sync.items():
        if isinstance(value, dict):
            _assert_same_infos(native[key], value, f"{where} {key}")
        elif value.dtype == object:
            assert native[key].dtype == object, f"{where} {key}"
            for a, b in zip(native[key], value, strict=True):
                assert (a is None) == (b is None), f"{where} {key}"
                if b is not None:
                    _assert_same_infos(a, b, f"{where} {key}") if isinstance(b, dict) else \
                        np.testing.assert_array_equal(a, b, err_msg=f"{where} {key}")
        else:
            np.testing.assert_array_equal(native[key], value, err_msg=f"{where} {key}")
            assert native[key].dtype == value.dtype, f"{where} {key}: dtype"


class JoinsLater(envs.GroupEnv):
    """Slot 0 starts (the only slot `_reset_envs` sets: it relies on every reset starting
    from empty slots), slot 1 joins on the first step and leaves, terminated, on the third."""

    def __init__(self, num_envs=1, max_steps=3):
        super().__init__(envs.GroupSpec(num_agents=2, obs=(envs.ObsSpec("v", "vector", (1,)),),
                                        continuous_size=0, discrete_branches=(2,),
                                        max_steps=max_steps), num_envs)

    def _reset_envs(self, idx):
        self.alive[idx, 0] = True

    def _step(self, cont, disc):
        E = self.num_envs
        leaving = np.zeros((E, 2), bool)
        leaving[:, 1] = self.alive[:, 1] & (self.t == 2)
        self.alive[:, 1] &= ~leaving[:, 1]
        self.alive[self.t == 0, 1] = True
        return disc[..., 0].astype(np.float32), np.zeros(E, np.float32), leaving, leaving & False

    def _observe(self, rows=slice(None)):
        return (np.broadcast_to(self.t[rows, None, None] / 10, (self.env_ids[rows].size, 2, 1)
                                ).astype(np.float32),)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("task", ["Goal-v0", "flat", Picky, JoinsLater])
def test_native_make_vec_plays_and_reports_what_gymnasiums_sync_vectorizer_does(task, mode):
    """Two envs, one seed each, play the same episodes in both, also across unseeded resets
    right after an end (a group that ended plays the episode the core already started, as
    gymnasium.make's reset does) and mid-episode, so every observation, reward, flag and info
    (final_obs and final_info of SAME_STEP included, in Gymnasium's layout) must match, value
    and dtype."""
    from envs.gymnasium import GroupGymEnv, GroupVectorEnv

    kwargs = {"flat": True, "task": "Goal-v0"} if task == "flat" else {"task": task}
    kwargs["max_steps"] = 4  # many time limits, and Goal's own ends
    native = GroupVectorEnv(num_envs=2, autoreset_mode=mode, **kwargs)
    sync = gymnasium.vector.SyncVectorEnv([lambda: GroupGymEnv(**kwargs)] * 2,
                                          autoreset_mode=mode)

    def same(native_out, sync_out, where):
        for a, b in zip(native_out, sync_out, strict=True):
            if isinstance(b, dict):
                _assert_same_infos(a, b, where)
            else:
                np.testing.assert_array_equal(a, b, err_msg=where)
                assert a.dtype == b.dtype, f"{where}: dtype"

    same(native.reset(seed=[3, 4]), sync.reset(seed=[3, 4]), "reset")
    rng = np.random.default_rng(0)
    finals = ends = resets = 0
    for t in range(60):
        action = sync.action_space.sample()
        if task is Picky:
            action = np.stack([rng.integers(1, 3, (2, 2)), rng.integers(0, 2, (2, 2))], -1)
        out_native, out_sync = native.step(action), sync.step(action)
        same(out_native, out_sync, f"step {t}")
        finals += "final_obs" in out_sync[-1]
        ended = out_sync[2] | out_sync[3]
        ends += ended.any()
        if (ended.any() and ends % 2) or t == 30:  # after every other end, and mid-episode
            same(native.reset(), sync.reset(), f"reset after step {t}")
            resets += 1
    assert resets >= 4 and (finals >= 5 or mode == AutoresetMode.NEXT_STEP)


def test_make_vec_takes_a_time_limit_as_make_does():
    """gymnasium.make_vec passes max_episode_steps (the caller's or the registration's) to the
    native VectorEnv: the sooner of it and the task's max_steps ends episodes, as make's
    TimeLimit does."""
    def lengths(vec, steps=30):
        vec.reset(seed=0)
        done_at = []
        for t in range(steps):
            *_, term, trunc, _ = vec.step(np.zeros((2, 2, 1), np.int64))  # never scores
            if (term | trunc).any():
                done_at.append(t)
        return done_at

    assert lengths(gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, max_episode_steps=5)) \
        == [4, 10, 16, 22, 28]  # NEXT_STEP: the step after an end restarts
    assert lengths(gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, max_steps=3,
                                      max_episode_steps=50)) == [2, 6, 10, 14, 18, 22, 26]
    gymnasium.register("test/Goal5-v0", entry_point="envs.gymnasium:GroupGymEnv",
                       vector_entry_point="envs.gymnasium:GroupVectorEnv",
                       kwargs={"task": "Goal-v0"}, max_episode_steps=5)
    try:
        assert lengths(gymnasium.make_vec("test/Goal5-v0", num_envs=2))[0] == 4
    finally:
        del gymnasium.registry["test/Goal5-v0"]
    with pytest.raises(ValueError, match="max_episode_steps"):
        gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, max_episode_steps=0)


def test_make_vec_terminating_on_the_limits_step_is_truncated_too_as_with_time_limit():
    """A group that terminates on the step max_episode_steps ends is flagged terminated and
    truncated, as TimeLimit (gymnasium.make) and the sync vectorizer flag it."""
    up = np.ones((1, 2, 1), np.int64)  # both agents walk to their edge: done on step 5
    for limit, kwargs, flagged in [(5, {}, (True, True)),
                                   (10, {"max_steps": 5}, (True, False))]:  # the task's own end
        flags = {}
        for mode in ("vector_entry_point", "sync"):
            vec = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=1, vectorization_mode=mode,
                                     max_episode_steps=limit, **kwargs)
            vec.reset(seed=0)
            flags[mode] = [tuple(bool(x[0]) for x in vec.step(up)[2:4]) for _ in range(7)]
        assert flags["vector_entry_point"] == flags["sync"]
        assert flags["sync"][4] == flagged
    env = gymnasium.make("groupenvs/Goal-v0", max_episode_steps=5)
    env.reset(seed=0)
    assert [env.step(up[0])[2:4] for _ in range(5)][-1] == (True, True)


@pytest.mark.parametrize("make", [lambda: gymnasium.make("groupenvs/Goal-v0"),
                                  lambda: gymnasium.make_vec("groupenvs/Goal-v0", num_envs=3)])
def test_unseeded_episodes_are_those_of_the_seed_gymnasium_reports(make):
    """After reset() without a seed, reset(seed=env.np_random_seed) plays the same episodes:
    the seed a user logs is the one the episodes came from."""
    def episodes(env, seed):
        views = [env.reset(seed=seed)[0]]
        action = np.ones(env.action_space.shape, np.int64)
        for _ in range(12):  # through an episode's end (the next one unseeded in both)
            obs, _, terminated, truncated, _ = env.step(action)
            views.append(obs)
            if np.ndim(terminated) == 0 and (terminated or truncated):
                views.append(env.reset()[0])
        return np.concatenate([np.ravel(part) for view in views for part in view.values()])

    env = make()
    unseeded = episodes(env, None)
    reported = env.unwrapped.np_random_seed if hasattr(env, "unwrapped") else env.np_random_seed
    assert reported > 0  # Gymnasium's entropy seed (128-bit)
    np.testing.assert_array_equal(episodes(make(), reported), unseeded)
    other = make()
    other.reset()
    assert other.np_random_seed != reported


def test_pettingzoo_actions_are_checked_agent_by_agent_whatever_the_others_send():
    """Stacking agents' actions promotes types (a bool beside an int is an int); each agent's
    value is accepted or refused on its own."""
    discrete = pettingzoo.make("parallel", "groupenvs/goal-v0")
    continuous = pettingzoo.make("parallel", "groupenvs/goal-v0", action_sizes=(1, 0))
    for env, actions, match in [
            (discrete, {"agent_0": True, "agent_1": 0}, "agent_0: discrete action must be int"),
            (continuous, {"agent_0": np.array([1]), "agent_1": np.zeros(1)},
             "agent_0: continuous action must be float"),
            (continuous, {"agent_0": np.zeros(1), "agent_1": True},
             "agent_1: continuous action must be float")]:
        env.reset(seed=0)
        with pytest.raises(ValueError, match=match):
            env.step(actions)
    discrete.reset(seed=0)
    discrete.step({"agent_0": np.int32(1), "agent_1": 0})  # ints of two kinds are ints


def test_pettingzoo_takes_max_cycles_as_its_name_for_max_steps():
    """PettingZoo's keyword for the episode's step limit (its max_cycles_test and SuperSuit
    pass it); with max_steps as well it is refused, not silently one of the two."""
    env = pettingzoo.make("parallel", "groupenvs/goal-v0", max_cycles=3)
    assert env.spec.max_steps == 3
    pzt.max_cycles_test(envs.pettingzoo)  # PettingZoo's module convention: parallel_env, env
    env.reset(seed=0)
    for _ in range(3):
        *_, truncs, _ = env.step(dict.fromkeys(env.agents, 0))
    assert all(truncs.values()) and env.agents == []
    with pytest.raises(TypeError, match="max_steps or max_cycles"):
        pettingzoo.make("parallel", "groupenvs/goal-v0", max_cycles=3, max_steps=4)


def test_the_package_names_its_own_views_not_the_libraries():
    """`from envs import pettingzoo` is this package's view module, not the PettingZoo library
    that the package imports to register its tasks (a public name would shadow it). In a fresh
    process: here the views are imported already, which rebinds the names."""
    code = ("import envs\n"
            "from envs import gymnasium, pettingzoo\n"
            "print(gymnasium.__name__, pettingzoo.__name__)\n"
            "print(type(pettingzoo.parallel_env(task='PushBlock-v0')).__name__)\n"
            "print(pettingzoo.env().unwrapped.metadata['name'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["envs.gymnasium", "envs.pettingzoo", "GroupParallelEnv",
                                  "goal_v0"]


def test_render_needs_a_running_env():
    """render() before reset() raises, as step() and state() do; after close() too."""
    env = pettingzoo.make("parallel", "groupenvs/goal-v0", render_mode="rgb_array")
    with pytest.raises(RuntimeError, match="before reset"):
        env.render()
    env.reset(seed=0)
    assert env.render().ndim == 3
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.render()


def test_gymnasium_joint_action_of_the_wrong_shape_names_the_spaces_shape():
    env = gymnasium.make("groupenvs/Goal-v0")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must have the action space's shape \(2, 1\), "
                                         r"got \(2,\)"):
        env.step(np.array([1, 0]))
    hybrid = gymnasium.make("groupenvs/Goal-v0", action_sizes=(1, 1))
    hybrid.reset(seed=0)
    with pytest.raises(ValueError, match=r"action\['continuous'\] must have"):
        hybrid.step({"continuous": np.zeros(2, np.float32), "discrete": np.zeros((2, 1), int)})
    vec = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2)
    _, infos = vec.reset(seed=0)
    assert infos["group_reward"].dtype == vec.step(vec.action_space.sample())[4][
        "group_reward"].dtype == np.float64  # as sync


class Leaver(GroupEnv):
    """Agent 1 leaves on the first step, agent 0 on the third; rows of agents gone hold 1e30
    (allowed), each agent's row on the step it ends its last view. Bounds 0.5..2 leave out 0."""

    def __init__(self, num_envs=1):
        spec = GroupSpec(2, (ObsSpec("v", "vector", (2,), 0.5, 2.0),), 0, (2,), 10)
        super().__init__(spec, num_envs)
        self._gone = np.zeros((num_envs, 2), bool)

    def _reset_envs(self, idx):
        self.alive[idx], self._gone[idx] = True, False

    def _step(self, cont, disc):
        E = self.num_envs
        leave = self.alive & (self.t[:, None] == np.array([2, 0]))
        self.alive &= ~leave
        return np.zeros((E, 2), np.float32), np.zeros(E, np.float32), leave, np.zeros((E, 2), bool)

    def _observe(self, rows=slice(None)):
        obs = np.ones((self.num_envs, 2, 2), np.float32)
        obs[self._gone] = 1e30
        self._gone |= ~self.alive
        return (obs[rows],)


@pytest.mark.parametrize("flat", [False, True])
def test_joint_views_blank_the_rows_of_agents_gone(flat):
    """A task may leave anything in the rows of slots that are not alive; the joint views show
    them blank (the bound nearest 0), so every observation stays inside its space, and show
    an agent's own row on the step it ends (its last view)."""
    env = GroupGymEnv(Leaver, flat=flat)
    obs, _ = env.reset(seed=0)
    views = [obs] + [env.step(np.zeros(env.action_space.shape, np.int64))[0] for _ in range(3)]
    assert all(env.observation_space.contains(v) for v in views)
    rows = [np.asarray(v["v"] if not flat else v[:4].reshape(2, 2)) for v in views]
    np.testing.assert_array_equal(rows[1], [[1, 1], [1, 1]])  # agent 1's last view
    np.testing.assert_array_equal(rows[2], [[1, 1], [0.5, 0.5]])  # then blank
    if not flat:  # the space's key order (gymnasium's Dict sorts its keys)
        assert list(obs) == list(env.observation_space.spaces)
    for mode in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
        vec = GroupVectorEnv(Leaver, num_envs=2, autoreset_mode=mode, flat=flat)
        vec.reset(seed=0)
        for _ in range(7):
            obs, *_, info = vec.step(np.zeros(vec.action_space.shape, np.int64))
            assert vec.observation_space.contains(obs)
            finals = info["final_obs"][info["_final_obs"]] if "final_obs" in info else []
            assert all(vec.single_observation_space.contains(final) for final in finals)
    absorbing = GroupParallelEnv(Leaver, death_mode="absorb")
    absorbing.reset(seed=0)
    for _ in range(2):
        obs, *_ = absorbing.step({"agent_0": 0, "agent_1": 0})
    assert absorbing.observation_space("agent_1").contains(obs["agent_1"])


def test_aec_form_refuses_a_bad_action_on_its_own_turn():
    """A bad action raises on the turn that gives it, naming the agent, and the env stays
    usable (PettingZoo's plain conversion stored it, raised on the last agent's turn, and then
    on every retry until reset)."""
    aec = pettingzoo.make("aec", "groupenvs/goal-v0")
    aec.reset(seed=0)
    for bad in (7, "left", np.array([0.5])):
        with pytest.raises(ValueError, match="agent_0"):
            aec.step(bad)
        assert aec.agent_selection == "agent_0"
    aec.step(1)
    aec.step(0)  # agent_1's turn completes the step
    assert aec.agent_selection == "agent_0" and aec.rewards.keys() == {"agent_0", "agent_1"}


class OnlyOne(GroupEnv):
    """Two agents, three moves, of which the action mask allows only move 1."""

    def __init__(self, num_envs=1):
        super().__init__(GroupSpec(2, (ObsSpec("v", "vector", (1,)),), 0, (3,), 5), num_envs)

    def _reset_envs(self, idx):
        self.alive[idx] = True

    def _step(self, cont, disc):
        E = self.num_envs
        return (np.zeros((E, 2), np.float32), np.zeros(E, np.float32), np.zeros((E, 2), bool),
                np.zeros((E, 2), bool))

    def _observe(self, rows=slice(None)):
        return (np.zeros((self.num_envs, 2, 1), np.float32)[rows],)

    def _action_mask(self):
        return np.tile(np.array([False, True, False]), (self.num_envs, 2, 1))


def test_aec_form_refuses_a_masked_move_on_its_own_turn():
    aec = envs.pettingzoo.aec_env(OnlyOne)
    aec.reset(seed=0)
    with pytest.raises(ValueError, match=r"not allowed by the action_mask \(allowed there: \[1\]\) "
                                         r"for env 0, agent_0"):
        aec.step(2)
    aec.step(1)
    with pytest.raises(ValueError, match="agent_1"):
        aec.step(0)
    aec.step(1)
    assert aec.agent_selection == "agent_0"


@pytest.mark.parametrize("sizes, action, message", [
    ((0, 1), np.array([[0.0], [1.0]]), r"action must hold ints, as its space "
                                       r"MultiDiscrete\(\[\[2\] \[2\]\]\) does, got float64"),
    ((0, 1), np.array([[True], [False]]), "action must hold ints.*got bool"),
    ((1, 0), np.array([[1], [0]]), r"action must hold floats, as its space Box\(.*got int64"),
    ((1, 1), (np.zeros((2, 1), np.float32), np.zeros((2, 1), np.int64)),
     r"action must be a dict with keys \['continuous', 'discrete'\].*got tuple"),
])
def test_joint_view_errors_speak_of_the_callers_action_space(sizes, action, message):
    """Not of the core's batched arrays ("actions['discrete'] must be int [1, 2, 1]")."""
    env = gymnasium.make("groupenvs/Goal-v0", action_sizes=sizes)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=message):
        env.step(action)
    if not isinstance(action, tuple):  # the batched view says the same of its batch
        vec = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, action_sizes=sizes)
        vec.reset(seed=0)
        with pytest.raises(ValueError, match=message.split(" as its space")[0]):
            vec.step(np.stack([action, action]))


@pytest.mark.parametrize("death_mode", ["remove", "absorb"])
def test_pettingzoo_observation_dicts_follow_the_spaces_key_order(death_mode):
    """Code that zips obs.values() with space.spaces.values() must not pair an image with the
    vector's space: reset, step, agents that ended (absorb) alike."""
    env = pettingzoo.make("parallel", "groupenvs/goal_visual-v0", num_agents=3,
                          death_mode=death_mode)
    keys = list(env.observation_space("agent_0").spaces)
    assert keys == sorted(keys) and len(keys) == 2
    obs, _ = env.reset(seed=0)
    seen = [obs]
    for _ in range(30):
        if not env.agents:
            obs, _ = env.reset()
        obs, *_ = env.step({a: 1 for a in env.agents})
        seen.append(obs)
    assert all(list(o) == keys for step_obs in seen for o in step_obs.values())


class HybridPicky(Picky):
    """Picky with a continuous action beside its two branches."""

    def __init__(self, num_envs=1, max_steps=3):
        envs.GroupEnv.__init__(self, envs.GroupSpec(
            num_agents=2, obs=(envs.ObsSpec("v", "vector", (2,)),), continuous_size=1,
            discrete_branches=(3, 2), max_steps=max_steps), num_envs)


def test_pettingzoo_masks_of_hybrid_actions_are_what_the_dict_space_samples_with():
    env = GroupParallelEnv(HybridPicky)
    _, infos = env.reset(seed=0)
    mask = infos["agent_0"]["action_mask"]
    assert mask["continuous"] is None and [m.tolist() for m in mask["discrete"]] == [
        [0, 1, 1], [1, 1]]
    for _ in range(20):
        assert env.action_space("agent_0").sample(mask=mask)["discrete"][0] != 0
    with warnings.catch_warnings():  # its advice for any space besides Box and Discrete
        warnings.filterwarnings("ignore", "Action space for each agent probably")
        pzt.api_test(envs.pettingzoo.aec_env(HybridPicky, max_steps=6), num_cycles=10)


class Reused(envs.GroupEnv):
    """Slot 0's agent leaves on the first step; a newcomer takes slot 0 after three steps."""

    def __init__(self, num_envs=1, max_steps=6):
        super().__init__(envs.GroupSpec(2, (envs.ObsSpec("v", "vector", (1,)),), 0, (2,),
                                        max_steps), num_envs)

    def _reset_envs(self, idx):
        self.alive[idx] = True

    def _step(self, cont, disc):
        leave = np.zeros((self.num_envs, 2), bool)
        leave[:, 0] = self.alive[:, 0] & (self.t == 0)
        self.alive &= ~leave
        self.alive[self.t == 2, 0] = True
        return (np.zeros((self.num_envs, 2), np.float32), np.zeros(self.num_envs, np.float32),
                leave, np.zeros_like(leave))

    def _observe(self, rows=slice(None)):
        return (np.full((self.env_ids[rows].size, 2, 1), 0.5, np.float32),)


@pytest.mark.parametrize("death_mode", ["remove", "absorb"])
def test_pettingzoo_refuses_an_agent_brought_back_in_its_old_slot(death_mode):
    """A PettingZoo agent that ended never returns; the joint view takes the reused slot."""
    env = GroupParallelEnv(Reused, death_mode=death_mode)
    env.reset(seed=0)
    env.step({"agent_0": 0, "agent_1": 0})
    assert (env.agents == ["agent_1"]) == (death_mode == "remove")
    env.step({"agent_1": 0})
    with pytest.raises(ValueError, match=r"Reused put a new agent in slot 0 after 3 steps, where "
                       r"agent_0 ended earlier in the episode"):
        env.step({"agent_1": 0})
    joint = GroupGymEnv(Reused)
    joint.reset(seed=0)
    alive = [joint.step(joint.action_space.sample())[0]["alive"][0] for _ in range(3)]
    assert alive == [False, False, True]


def test_pettingzoo_reset_without_a_seed_plays_the_next_episode_as_the_gymnasium_view():
    """The core starts a group's next episode when it ends; reset() with no seed shows that
    one, as the Gymnasium view does, instead of skipping it."""
    firsts = {}
    for view in ("gymnasium", "pettingzoo"):
        env = (GroupGymEnv("DungeonEscape-v0", max_steps=2) if view == "gymnasium" else
               GroupParallelEnv("DungeonEscape-v0", max_steps=2))
        obs, _ = env.reset(seed=123)
        firsts[view] = []
        for _ in range(4):
            for _ in range(2):
                if view == "gymnasium":
                    env.step(np.zeros(env.action_space.shape, np.int64))
                else:
                    env.step({a: 0 for a in env.agents})
            obs, _ = env.reset()
            firsts[view].append(obs["vector"][0] if view == "gymnasium" else obs["agent_0"])
    for joint, own in zip(firsts["gymnasium"], firsts["pettingzoo"], strict=True):
        np.testing.assert_array_equal(joint, own)
    assert len({o.tobytes() for o in firsts["pettingzoo"]}) > 1
    env = GroupParallelEnv("PushBlock-v0", max_steps=2)  # a time penalty every step
    env.reset(seed=0)
    for _ in range(2):
        _, rewards, *_ = env.step({a: 0 for a in env.agents})
    assert all(r != 0 for r in rewards.values())
    _, infos = env.reset()  # nothing earned yet: not the last step's rewards
    assert {(i["individual_reward"], i["group_reward"]) for i in infos.values()} == {(0.0, 0.0)}


def test_native_vector_env_refuses_a_partial_reset_it_cannot_do():
    vec = gymnasium.make_vec("groupenvs/PushBlock-v0", num_envs=2,
                             vectorization_mode="vector_entry_point")
    vec.reset(seed=0, options={})
    with pytest.raises(ValueError, match=r"options \['reset_mask'\]: this vector env takes none"):
        vec.reset(options={"reset_mask": np.array([True, False])})


class PaidNewcomer(Reused):
    """Slot 0 acts; slot 1 joins after one step, paid 2 on joining."""

    def _reset_envs(self, idx):
        self.alive[idx] = [True, False]

    def _step(self, cont, disc):
        joining = ~self.alive[:, 1] & (self.t == 0)
        self.alive[joining, 1] = True
        reward = np.zeros((self.num_envs, 2), np.float32)
        reward[joining, 1] = 2.0
        no = np.zeros((self.num_envs, 2), bool)
        return reward, np.full(self.num_envs, 0.5, np.float32), no, no.copy()


@pytest.mark.parametrize("death_mode", ["remove", "absorb"])
@pytest.mark.parametrize("max_steps", [6, 1])
def test_an_agent_joining_gets_its_individual_reward_in_every_view(max_steps, death_mode):
    """The team return counts a joiner's reward; the PettingZoo view pays it too, except to one
    joining on the episode's last step, which it does not report (PettingZoo's AEC conversion
    and API tests cannot take an agent that appears already ended)."""
    pz = GroupParallelEnv(PaidNewcomer, max_steps=max_steps, death_mode=death_mode)
    pz.reset(seed=0)
    _, rewards, terms, truncs, infos = pz.step({"agent_0": 0})
    if max_steps == 1:
        assert rewards == {"agent_0": 0.5} and truncs == {"agent_0": True}
    else:
        assert rewards == {"agent_0": 0.5, "agent_1": 2.0} and pz.agents == ["agent_0",
                                                                            "agent_1"]
        assert infos["agent_1"] == {"individual_reward": 2.0, "group_reward": 0.0}
    joint = GroupGymEnv(PaidNewcomer, max_steps=max_steps)
    joint.reset(seed=0)
    assert joint.step(joint.action_space.sample())[1] == 2.5
    with warnings.catch_warnings():  # agents that never act before the episode ends
        warnings.filterwarnings("ignore",
                                "No agents present|.*was never terminated|Observation is a")
        pzt.api_test(envs.pettingzoo.aec_env(PaidNewcomer, max_steps=max_steps,
                                             death_mode=death_mode), num_cycles=20)
        pzt.parallel_api_test(GroupParallelEnv(PaidNewcomer, max_steps=max_steps,
                                               death_mode=death_mode), num_cycles=20)


@pytest.mark.parametrize("make, own", [
    (lambda **kw: gymnasium.make("groupenvs/Goal-v0", **kw), ["render_mode", "flat"]),
    (lambda **kw: pettingzoo.make("parallel", "groupenvs/goal-v0", **kw),
     ["death_mode", "render_mode", "max_cycles"]),
    (lambda **kw: gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, **kw),
     ["render_mode", "flat", "autoreset_mode", "max_episode_steps", "num_envs"])])
def test_an_unknown_argument_lists_what_that_view_takes(make, own):
    """A typo of a view's own argument (flat, death_mode, ...) is pointed at it; num_envs is
    listed only where it is taken."""
    with pytest.raises(TypeError, match=r"unknown argument\(s\) \['flatt'\]") as err:
        make(flatt=True)
    valid = ast.literal_eval(re.search(r"valid: (\[.*?\])", str(err.value)).group(1))
    assert set(own) <= set(valid) and "num_agents" in valid
    assert ("num_envs" in valid) == ("num_envs" in own)


def test_autoreset_mode_given_to_the_sync_vectorizers_envs_says_where_it_goes():
    with pytest.raises(TypeError, match="autoreset_mode is an argument of make_vec's native "
                                        "VectorEnv: for vectorization_mode='sync'"):
        gymnasium.make_vec("groupenvs/Goal-v0", num_envs=2, vectorization_mode="sync",
                           autoreset_mode=AutoresetMode.SAME_STEP)
