"""The MA-POCA paper's tasks (Dungeon Escape, Baton Pass, Push Block): API, rules, policies."""

import warnings

import gymnasium
import numpy as np
import pettingzoo
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo import test as pzt

import envs
from envs import grid
from envs.core import GroupEnv, GroupSpec, ObsSpec
from envs.pettingzoo import GroupParallelEnv, aec_env

PAPER = ["DungeonEscape-v0", "DungeonEscapeHard-v0", "BatonPass-v0", "PushBlock-v0"]
FIELDS = ("alive", "reward", "group_reward", "terminated", "truncated", "group_done")


def no_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    assert not caught, [str(w.message) for w in caught]


def random_actions(rng, env):
    return {"discrete": rng.integers(0, 5, (env.num_envs, env.max_agents, 1))}


def episode_returns(env, policy, seed, episodes_per_env=1):
    """Team return (group + individual rewards) of the first episodes of every env."""
    E = env.num_envs
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    returns = np.zeros((E, episodes_per_env))
    lengths = np.zeros((E, episodes_per_env), np.int64)
    ended = np.zeros(E, np.int64)
    while (ended < episodes_per_env).any():
        step = env.step(env.reference_policy() if policy == "reference"
                        else random_actions(rng, env))
        open_ = ended < episodes_per_env
        rows = np.flatnonzero(open_)
        returns[rows, ended[rows]] += (step.group_reward + step.reward.sum(1))[rows]
        lengths[rows, ended[rows]] += 1
        ended += step.group_done & open_
    return returns, lengths


# --- the task contract -------------------------------------------------------------------------


def test_group_env_is_abstract_and_a_task_needs_every_hook():
    spec = GroupSpec(1, (ObsSpec("vector", "vector", (1,)),), 0, (2,), 5)
    with pytest.raises(TypeError, match="abstract"):
        GroupEnv(spec, 1)

    class Partial(GroupEnv):
        def _reset_envs(self, idx):
            self.alive[idx] = True

        def _observe(self, rows=slice(None)):
            return (np.zeros((len(self.alive[rows]), 1, 1), np.float32),)

    with pytest.raises(TypeError, match="_step"):
        Partial(spec, 1)

    class Tiny(Partial):  # written from the hook docstrings alone: one step and done
        def _step(self, cont, disc):
            done = self.alive.copy()
            self.alive[:] = False
            return (np.zeros((self.num_envs, 1), np.float32), disc[:, 0, 0].astype(np.float32),
                    done, np.zeros_like(done))

    env = Tiny(spec, 3)
    env.reset(seed=0)
    step = env.step({"discrete": np.array([[[1]], [[0]], [[1]]])})
    np.testing.assert_array_equal(step.group_reward, [1, 0, 1])
    assert step.group_done.all() and step.alive.all()  # reset in the same step


# --- API conformance ---------------------------------------------------------------------------


@pytest.mark.parametrize("task", PAPER)
def test_registered_in_both_registries_and_pass_check_env(task):
    assert f"groupenvs/{task}" in gymnasium.registry
    assert envs.pettingzoo_id(task) in pettingzoo.parallel_registry
    assert envs.pettingzoo_id(task) in pettingzoo.aec_registry
    no_warnings(lambda: check_env(gymnasium.make(f"groupenvs/{task}").unwrapped))


@pytest.mark.parametrize("death_mode", ["remove", "absorb"])
@pytest.mark.parametrize("task", PAPER)
def test_pettingzoo_parallel_api_and_seed_tests(task, death_mode):
    pid = envs.pettingzoo_id(task)
    with warnings.catch_warnings():
        if task == "BatonPass-v0":  # slots that never joined end neither terminated nor
            # truncated: PettingZoo warns about that, and it is what a spawning task means
            warnings.filterwarnings("ignore", "No agents present but not all possible_agents")
        pzt.parallel_api_test(pettingzoo.make("parallel", pid, death_mode=death_mode),
                              num_cycles=300)
    pzt.parallel_seed_test(lambda: pettingzoo.make("parallel", pid, death_mode=death_mode))


@pytest.mark.parametrize("task", PAPER)
def test_pettingzoo_aec_api_and_render_tests(task):
    pzt.api_test(pettingzoo.make("aec", envs.pettingzoo_id(task)), num_cycles=200)
    pzt.render_test(lambda render_mode=None: aec_env(task, render_mode=render_mode))


@pytest.mark.parametrize("task", PAPER)
def test_rgb_frames_follow_the_state_and_human_mode_draws(task):
    a = GroupParallelEnv(task, render_mode="rgb_array")
    b = GroupParallelEnv(task, render_mode="rgb_array")
    a.reset(seed=1)
    b.reset(seed=1)
    first = a.render()
    assert first.dtype == np.uint8 and first.ndim == 3 and first.shape[2] == 3
    np.testing.assert_array_equal(first, b.render())
    policy = a.core.reference_policy()["discrete"][0, :, 0]
    a.step({name: int(policy[i]) for i, name in enumerate(a.possible_agents) if name in a.agents})
    moved = a.render()
    assert (moved != first).any()
    b.step({name: int(policy[i]) for i, name in enumerate(b.possible_agents) if name in b.agents})
    np.testing.assert_array_equal(moved, b.render())
    human = gymnasium.make(f"groupenvs/{task}", render_mode="human")
    human.reset(seed=0)
    assert human.render() is None
    human.step(human.action_space.sample())
    human.close()


def test_final_frame_shows_the_ended_episode():
    env = GroupParallelEnv("DungeonEscape-v0", render_mode="rgb_array")
    env.reset(seed=0)
    while env.agents:
        policy = env.core.reference_policy()["discrete"][0, :, 0]
        env.step({a: int(policy[env._slot[a]]) for a in env.agents})
    last = env.render()
    env.reset(seed=0)
    assert (env.render() != last).any()  # the last frame was the won dungeon, not the new one


# --- determinism -------------------------------------------------------------------------------


def rollout(task, seed, num_envs=16, steps=150):
    env = envs.make_group(task, num_envs=num_envs)
    rng = np.random.default_rng(0)
    out = [env.reset(seed=seed)]
    out += [env.step(random_actions(rng, env)) for _ in range(steps)]
    return out


@pytest.mark.parametrize("task", PAPER)
def test_same_seed_same_episodes_different_seed_different(task):
    a, b, c = rollout(task, 7), rollout(task, 7), rollout(task, 8)
    for x, y in zip(a, b, strict=True):
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f))
        np.testing.assert_array_equal(x.obs[0], y.obs[0])
    assert sum(s.group_done.sum() for s in a) > 16  # several episodes per env
    assert any((x.obs[0] != y.obs[0]).any() for x, y in zip(a, c, strict=True))


@pytest.mark.parametrize("task", PAPER)
def test_env_episodes_do_not_depend_on_batch_size(task):
    big, small = envs.make_group(task, num_envs=32), envs.make_group(task, num_envs=1)
    rng = np.random.default_rng(0)
    a, b = big.reset(seed=11), small.reset(seed=11)
    for _ in range(150):
        np.testing.assert_array_equal(a.obs[0][:1], b.obs[0])
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(a, f)[:1], getattr(b, f))
        act = random_actions(rng, big)
        a, b = big.step(act), small.step({"discrete": act["discrete"][:1]})


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task", PAPER)
def test_bad_actions_name_env_and_agent(task):
    env = envs.make_group(task, num_envs=2)
    env.reset(seed=0)
    A = env.max_agents
    act = np.zeros((2, A, 1), np.int64)
    act[1, 0] = 5
    with pytest.raises(ValueError, match=r"out of range .* env 1, agent 0"):
        env.step({"discrete": act})
    with pytest.raises(ValueError, match=rf"must be int \[2, {A}, 1\]"):
        env.step({"discrete": np.zeros((2, A), np.int64)})
    with pytest.raises(ValueError, match="no continuous actions"):
        env.step({"discrete": np.zeros((2, A, 1), np.int64),
                  "continuous": np.zeros((2, A, 1), np.float32)})


@pytest.mark.parametrize("task, kwargs, error, match", [
    ("DungeonEscape-v0", {"agents": 3}, TypeError, "valid"),
    ("DungeonEscape-v0", {"num_dragons": 4}, ValueError, r"num_dragons must be in \[1, 3\]"),
    ("DungeonEscape-v0", {"size": 3}, ValueError, "size must be in"),
    ("DungeonEscape-v0", {"dragon_period": 0}, ValueError, "dragon_period"),
    ("DungeonEscape-v0", {"num_agents": 2.0}, TypeError, "num_agents must be an int"),
    ("DungeonEscape-v0", {"num_agents": 1}, ValueError, r"num_agents must be in \[2, 8\]"),
    ("BatonPass-v0", {"max_agents": 1}, ValueError, "max_agents"),
    ("BatonPass-v0", {"living_cost": -1}, ValueError, "living_cost"),
    ("BatonPass-v0", {"living_cost": float("inf")}, ValueError, "living_cost must be a number"),
    ("BatonPass-v0", {"living_cost": True}, ValueError, "living_cost must be a number"),
    ("BatonPass-v0", {"view_radius": 0}, ValueError, "view_radius"),
    ("PushBlock-v0", {"weights": (1, 4)}, ValueError, "weights"),
    ("PushBlock-v0", {"weights": (1, 2, 3, 1, 2, 3, 1), "size": 6}, ValueError, "distinct"),
    ("PushBlock-v0", {"num_agents": 2}, ValueError, "num_agents must be in"),
    ("PushBlock-v0", {"time_penalty": "0.1"}, ValueError, "time_penalty"),
    ("PushBlock-v0", {"max_steps": 0}, ValueError, "max_steps"),
])
def test_bad_arguments_get_clear_errors(task, kwargs, error, match):
    with pytest.raises(error, match=match):
        envs.make_group(task, **kwargs)
    with pytest.raises(error, match=match):
        gymnasium.make(f"groupenvs/{task}", **kwargs)


def test_numpy_numbers_are_numbers():  # as from a config or a sweep over np.linspace
    assert envs.make_group("BatonPass-v0", living_cost=np.float32(0.5)).living_cost == 0.5
    assert envs.make_group("PushBlock-v0", time_penalty=np.float64(0.25)).time_penalty == 0.25
    assert envs.make_group("Goal-v0", step_size=np.float32(0.5)).step_size == 0.5


# --- scripted and random policies --------------------------------------------------------------


def test_dungeon_escape_scripted_group_always_wins_by_a_sacrifice():
    env = envs.make_group("DungeonEscape-v0", num_envs=256)
    for seed in (0, 1, 2):
        returns, lengths = episode_returns(env, "reference", seed)
        np.testing.assert_array_equal(returns, 1.0)
        assert lengths.max() < 25
    # every win needs a death: the slayer is gone before the group is paid
    env.reset(seed=3)
    deaths = np.zeros(256, np.int64)
    for _ in range(30):
        step = env.step(env.reference_policy())
        paid = step.group_reward > 0
        assert (deaths[paid] >= 1).all()
        deaths += (step.terminated & ~paid[:, None]).sum(1)
        deaths[step.group_done] = 0
    random, _ = episode_returns(envs.make_group("DungeonEscape-v0", num_envs=512), "random", 0)
    assert 0.01 < random.mean() < 0.1  # documented: about 0.045


def test_dungeon_escape_hard_scripted_group_mostly_wins():
    env = envs.make_group("DungeonEscapeHard-v0", num_envs=512)
    returns, _ = episode_returns(env, "reference", 0)
    assert 0.97 < returns.mean() < 0.995  # documented: about 0.98; chasers sometimes corner
    # the carrier (0.983-0.985 on seeds 0-2 of 1000 envs)
    random, _ = episode_returns(env, "random", 0)
    assert random.mean() < 0.02


def test_baton_pass_scripted_relay_gets_the_best_return():
    for max_agents in (2, 4, 7):
        env = envs.make_group("BatonPass-v0", num_envs=64, max_agents=max_agents,
                              max_steps=100)
        returns, lengths = episode_returns(env, "reference", seed=max_agents)
        # each agent but the last lives 7 steps (2 to eat, 4 to press, 1 out); the last eats at 2
        best = max_agents - 0.01 * (7 * (max_agents - 1) + 2)
        np.testing.assert_allclose(returns, best, rtol=1e-5)
        np.testing.assert_array_equal(lengths, 6 * (max_agents - 1) + 2)
    random, _ = episode_returns(envs.make_group("BatonPass-v0", num_envs=512), "random", 0)
    assert -0.2 < random.mean() < 0.3  # documented: about 0.03


def test_push_block_scripted_group_scores_every_block():
    env = envs.make_group("PushBlock-v0", num_envs=256)
    for seed in (0, 1):
        returns, lengths = episode_returns(env, "reference", seed)
        np.testing.assert_allclose(returns, 6 - 0.005 * lengths, atol=1e-4)  # all blocks in
        assert lengths.max() < 60
    paper = envs.make_group("PushBlock-v0", num_envs=64, weights=(1, 1, 2, 2, 3, 3), size=8,
                            max_steps=200)
    returns, lengths = episode_returns(paper, "reference", 0)
    np.testing.assert_allclose(returns, 12 - 0.005 * lengths, atol=1e-4)
    random, _ = episode_returns(envs.make_group("PushBlock-v0", num_envs=512), "random", 0)
    assert random.mean() < 0.5


# --- rules, step by step -----------------------------------------------------------------------


def step_one(env, *moves):
    return env.step({"discrete": np.array(moves, np.int64).reshape(1, -1, 1)})


def test_dungeon_escape_rules():
    S, U, L, R = grid.STAY, grid.UP, grid.LEFT, grid.RIGHT
    env = envs.make_group("DungeonEscape-v0", dragon_period=2)
    env.reset(seed=0)
    env.dragon_pos[0, 0] = [2, 2]
    env.portal[0], env.door[0] = [5, 5], [0, 5]
    env.agent_pos[0] = [[2, 1], [0, 0], [4, 0]]
    s = step_one(env, R, S, S)  # agent 0 walks into the dragon: dies, the key drops
    np.testing.assert_array_equal(s.terminated[0], [True, False, False])
    np.testing.assert_array_equal(s.alive[0], [False, True, True])
    assert not env.dragon_on[0, 0] and env.key_state[0] == 1
    np.testing.assert_array_equal(env.key_pos[0], [2, 2])
    assert s.obs[0][0, 1, -4:-2].tolist() == [0, 0]  # nobody holds the key
    assert s.obs[0][0, 1, -2:].tolist() == [0, 1]  # the door: same row, 5 columns right
    assert s.obs[0][0, 2, -2:].tolist() == pytest.approx([-0.8, 1])
    env.agent_pos[0, 1] = [2, 3]
    s = step_one(env, S, L, S)  # agent 1 picks the key up
    assert env.key_state[0] == 2 and env.holder[0] == 1
    assert s.obs[0][0, 1, -4:-2].tolist() == [1, 0] and s.obs[0][0, 2, -4:-2].tolist() == [0, 1]
    env.agent_pos[0, 1] = [1, 5]
    s = step_one(env, S, U, S)  # ... and carries it to the door: the group wins
    assert s.group_reward[0] == 1.0 and s.group_done[0] and not s.group_truncated[0]
    np.testing.assert_array_equal(s.terminated[0], [False, True, True])

    env.reset(seed=0)  # the dragon reaching its portal ends the episode with nothing
    env.dragon_pos[0, 0], env.portal[0] = [4, 5], [5, 5]
    env.agent_pos[0] = [[0, 0], [0, 1], [0, 2]]
    s = step_one(env, S, S, S)
    assert not s.group_done[0]  # dragons move every second step
    s = step_one(env, S, S, S)
    assert s.group_done[0] and s.group_reward[0] == 0 and s.terminated[0].all()

    env.reset(seed=0)  # a dragon walking onto an agent kills it too
    env.dragon_pos[0, 0], env.portal[0] = [0, 0], [5, 5]
    env.agent_pos[0] = [[1, 0], [3, 3], [4, 4]]
    step_one(env, S, S, S)
    s = step_one(env, S, S, S)
    np.testing.assert_array_equal(s.terminated[0], [True, False, False])
    assert env.key_state[0] == 1

    env.reset(seed=0)  # the portal kills an agent that steps on it (ML-Agents' TouchedHazard)
    env.dragon_pos[0, 0], env.portal[0] = [0, 0], [5, 5]
    env.agent_pos[0] = [[5, 4], [3, 3], [2, 4]]
    s = step_one(env, R, S, S)
    np.testing.assert_array_equal(s.terminated[0], [True, False, False])
    assert not s.group_done[0] and env.dragon_on[0, 0]  # the others go on
    env.key_state[0], env.holder[0], env.dragon_on[0, 0] = 2, 1, False
    env.agent_pos[0, 1] = [4, 5]
    env.key_pos[0] = env.agent_pos[0, 1]
    s = step_one(env, S, grid.DOWN, S)  # with the key: the key is lost, and the game
    assert s.group_done[0] and s.group_reward[0] == 0
    np.testing.assert_array_equal(s.terminated[0], [False, True, True])


def test_dungeon_escape_chasers_hunt_and_a_dead_key_holder_loses_the_key():
    S = grid.STAY
    env = envs.make_group("DungeonEscapeHard-v0", dragon_period=1)
    env.reset(seed=0)
    env.dragon_pos[0] = [[0, 0], [5, 0], [5, 5]]
    env.portal[0] = [0, 5]
    env.key_state[0], env.holder[0], env.dragon_on[0, 0] = 2, 4, False
    env.agent_pos[0] = [[0, 3], [1, 3], [2, 3], [3, 3], [4, 0]]
    env.key_pos[0] = env.agent_pos[0, 4]
    s = step_one(env, S, S, S, S, S)  # the chaser at (5, 0) steps onto the key holder
    assert s.group_done[0] and s.group_reward[0] == 0
    np.testing.assert_array_equal(s.terminated[0], True)


def test_baton_pass_rules():
    S, L, R = grid.STAY, grid.LEFT, grid.RIGHT
    env = envs.make_group("BatonPass-v0", living_cost=0.1, max_agents=3)
    env.reset(seed=0)
    env.food[0], env.button[0] = [3, 1], [3, 5]  # whichever side the seed drew
    np.testing.assert_array_equal(env.alive[0], [True, False, False])
    s = step_one(env, R, S, S)
    assert s.group_reward[0] == pytest.approx(-0.1)
    env.agent_pos[0, 0] = [3, 2]
    s = step_one(env, L, S, S)  # eats: +1, the button gets ready
    assert s.group_reward[0] == pytest.approx(0.9) and env.ready[0] and not env.food_on[0]
    assert s.obs[0][0, 0, -2:].tolist() == [0, 1]
    env.agent_pos[0, 0] = [3, 4]
    s = step_one(env, R, S, S)  # presses: agent 1 joins on the centre cell
    np.testing.assert_array_equal(s.alive[0], [True, True, False])
    assert not s.terminated.any() and env.food_on[0] and not env.ready[0]
    np.testing.assert_array_equal(env.agent_pos[0, 1], [3, 3])
    assert s.obs[0][0, 1, -2:].tolist() == [1, 1]
    s = step_one(env, S, S, S)  # the spent agent 0 stays on the button: nothing happens
    assert s.group_reward[0] == pytest.approx(-0.2)
    s = step_one(env, R, S, S)  # ... and leaves through the exit at (3, 6)
    np.testing.assert_array_equal(s.terminated[0], [True, False, False])
    np.testing.assert_array_equal(s.alive[0], [False, True, False])
    env.agent_pos[0, 1] = [3, 2]
    step_one(env, S, L, S)
    env.agent_pos[0, 1] = [3, 4]
    s = step_one(env, S, R, S)  # agent 1 brings in agent 2, the last slot
    np.testing.assert_array_equal(s.alive[0], [False, True, True])
    assert s.obs[0][0, 2, -2:].tolist() == [1, 0]  # it can eat; there is nobody left to bring
    env.agent_pos[0, 2] = [3, 2]
    s = step_one(env, S, S, L)  # agent 2 eats; nobody can do anything more: the group ends
    assert s.group_done[0] and s.group_reward[0] == pytest.approx(1 - 0.2)
    np.testing.assert_array_equal(s.terminated[0], [False, True, True])


@pytest.mark.parametrize("death_mode, expected", [
    ("remove", [["agent_0"], ["agent_0", "agent_1"], ["agent_1"], ["agent_1", "agent_2"],
                ["agent_2"], []]),
    ("absorb", [["agent_0"], ["agent_0", "agent_1"], ["agent_0", "agent_1", "agent_2"], []]),
])
def test_baton_pass_agents_join_the_pettingzoo_view(death_mode, expected):
    env = GroupParallelEnv("BatonPass-v0", max_agents=3, death_mode=death_mode)
    obs, _ = env.reset(seed=0)
    assert env.agents == ["agent_0"] and list(obs) == ["agent_0"]
    seen, total = [], 0.0
    while env.agents:
        policy = env.core.reference_policy()["discrete"][0, :, 0]
        acting = [a for a in env.agents if env.core.alive[0, env._slot[a]]]
        obs, rew, term, trunc, info = env.step({a: int(policy[env._slot[a]]) for a in acting})
        assert set(obs) == set(rew) == set(term) == set(trunc) == set(info)
        total += info[acting[0]]["group_reward"]  # the same for every agent that acted
        if env.agents not in seen:
            seen.append(list(env.agents))
    assert seen == expected
    assert total == pytest.approx(3 - 0.01 * (7 + 7 + 2))


def test_push_block_rules():
    S, U, L = grid.STAY, grid.UP, grid.LEFT
    env = envs.make_group("PushBlock-v0", time_penalty=0.0)
    env.reset(seed=0)
    env.block_pos[0] = [[2, 0], [2, 2], [3, 4]]  # weights 1, 2, 3
    env.agent_pos[0] = [[3, 2], [3, 2], [5, 5]]
    s = step_one(env, U, S, S)  # one agent cannot move the weight-2 block
    np.testing.assert_array_equal(env.block_pos[0, 1], [2, 2])
    np.testing.assert_array_equal(env.agent_pos[0, 0], [3, 2])
    s = step_one(env, U, U, S)  # two can
    np.testing.assert_array_equal(env.block_pos[0, 1], [1, 2])
    np.testing.assert_array_equal(env.agent_pos[0, :2], [[2, 2], [2, 2]])
    s = step_one(env, U, U, S)  # into the goal row: scored, pays its weight
    assert s.group_reward[0] == 2.0 and not env.block_on[0, 1]
    env.agent_pos[0] = [[4, 4], [4, 4], [5, 5]]
    step_one(env, U, U, S)
    np.testing.assert_array_equal(env.block_pos[0, 2], [3, 4])  # 2 pushers < weight 3
    env.agent_pos[0] = [[4, 4], [4, 4], [4, 4]]
    step_one(env, U, U, U)
    np.testing.assert_array_equal(env.block_pos[0, 2], [2, 4])
    env.agent_pos[0] = [[3, 0], [1, 0], [5, 5]]
    step_one(env, U, S, S)  # agent 1 stands in the light block's way
    np.testing.assert_array_equal(env.block_pos[0, 0], [2, 0])
    env.agent_pos[0] = [[2, 1], [5, 5], [5, 5]]
    step_one(env, L, S, S)  # a block at the edge cannot leave the board
    np.testing.assert_array_equal(env.block_pos[0, 0], [2, 0])
    np.testing.assert_array_equal(env.agent_pos[0, 0], [2, 1])
    env.agent_pos[0] = [[3, 0], [3, 4], [3, 4]]
    s = step_one(env, U, S, S)  # the last two blocks in: the episode ends
    env.agent_pos[0, 0] = [2, 0]
    s = step_one(env, U, U, U)
    assert s.group_reward[0] == 1.0 and not s.group_done[0]
    env.agent_pos[0] = [[3, 4], [3, 4], [3, 4]]
    s = step_one(env, U, U, U)
    s = step_one(env, U, U, U)
    assert s.group_reward[0] == 3.0 and s.group_done[0] and s.terminated[0].all()


def test_egocentric_window_sees_walls_and_things_around_the_agent():
    env = envs.make_group("PushBlock-v0", view_radius=1)
    env.reset(seed=0)
    env.agent_pos[0] = [[0, 0], [5, 5], [5, 5]]
    env.block_pos[0] = [[1, 1], [3, 3], [4, 2]]
    view = env._observe()[0][0, 0].reshape(3, 3, 6).transpose(2, 0, 1)  # wall, agent, ...
    np.testing.assert_array_equal(view[0], [[1, 1, 1], [1, 0, 0], [1, 0, 0]])
    np.testing.assert_allclose(view[1], [[0, 0, 0], [0, 1 / 3, 0], [0, 0, 0]], rtol=1e-6)
    np.testing.assert_array_equal(view[2], [[0, 0, 0], [0, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(view[5], [[0, 0, 0], [0, 1, 1], [0, 0, 0]])
    assert env.spec.obs[0].shape == (6 * 9,)
    crowd = env._observe()[0][0, 1].reshape(3, 3, 6)[..., 1]
    assert crowd[1, 1] == pytest.approx(2 / 3)  # both agents on (5, 5)


def test_navigate_goes_around_obstacles():
    blocked = np.zeros((1, 1, 5, 5), bool)
    blocked[0, 0, 1:4, 2] = True
    pos = np.array([[[2, 1], [2, 4], [0, 2]]])
    moves = grid.navigate(pos, np.full((1, 3, 2), [2, 3]), blocked)
    assert moves[0, 1] == grid.LEFT and moves[0, 2] == grid.RIGHT
    assert moves[0, 0] in (grid.UP, grid.DOWN)  # around the wall, either way
    cut = np.ones((1, 1, 5, 5), bool)
    assert grid.navigate(pos[:, :1], np.full((1, 1, 2), [4, 4]), cut)[0, 0] == grid.STAY


@pytest.mark.parametrize("total", [10, 14, 32])
def test_grid_count_of_a_full_cell_is_exactly_one(total):
    # adding float32 1 / total that many times had rounded past 1, out of the declared Box
    layers = np.zeros((total, 2, 2, 1), np.float32)  # env n holds n + 1 things on cell (0, 0)
    pos = np.zeros((total, total, 2), np.int64)
    mask = np.arange(total)[None, :] <= np.arange(total)[:, None]
    grid.count(layers, 0, pos, mask, total)
    np.testing.assert_array_equal(layers[:, 0, 0, 0],
                                  (np.arange(1, total + 1) / np.float32(total)).astype(np.float32))
    assert layers[-1, 0, 0, 0] == 1.0 and layers[:, 1:].max() == 0 and layers[:, :, 1:].max() == 0
