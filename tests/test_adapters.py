"""Training on any PettingZoo ParallelEnv through ParallelEnvGroup."""

import dataclasses
import functools
import warnings

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv

import envs
import envs.goal
from envs.pettingzoo import GroupParallelEnv
from poca.adapters import ParallelEnvGroup, _encode, make_env
from poca.config import POCAConfig
from poca.trainer import train


class Leaving(ParallelEnv):
    """Three agents; agent k leaves after k + 2 steps; rewards 1 for action 1."""

    metadata = {"name": "leaving_v0"}

    def __init__(self):
        self.possible_agents = ["a_0", "a_1", "a_2"]

    @functools.cache
    def observation_space(self, agent):
        return spaces.Box(-1, 1, (2,), np.float32)

    @functools.cache
    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, list(self.possible_agents)
        return {a: np.array([0, i], np.float32) for i, a in enumerate(self.agents)}, {
            a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs = {a: np.array([self.t / 10, int(a[-1])], np.float32) for a in actions}
        rew = {a: float(actions[a]) for a in actions}
        term = {a: self.t >= int(a[-1]) + 2 for a in actions}
        trunc = {a: False for a in actions}
        self.agents = [a for a in self.agents if not term[a]]
        return obs, rew, term, trunc, {a: {} for a in actions}


class Spawning(Leaving):
    """Starts with one agent; a new name joins every step up to 4; all truncate at t = 6."""

    def __init__(self):
        self.possible_agents = ["b_0"]

    def reset(self, seed=None, options=None):
        self.t, self.agents, self.born = 0, ["b_0"], 1
        return {"b_0": np.zeros(2, np.float32)}, {"b_0": {}}

    def step(self, actions):
        self.t += 1
        obs = {a: np.array([self.t / 10, 0.5], np.float32) for a in actions}
        if self.born < 4:
            new = f"b_{self.born}"
            self.born += 1
            self.agents.append(new)
            obs[new] = np.zeros(2, np.float32)
        trunc = {a: self.t >= 6 for a in self.agents}
        rew = {a: float(actions.get(a, 0)) for a in self.agents}
        out = (obs, rew, {a: False for a in self.agents}, trunc, {a: {} for a in self.agents})
        if self.t >= 6:
            self.agents = []
        return out


class Masked(Leaving):
    """Dict observations whose action mask allows only action 2 of 3."""

    @functools.cache
    def observation_space(self, agent):
        return spaces.Dict({"observation": spaces.Box(-1, 1, (2,), np.float32),
                            "action_mask": spaces.MultiBinary(3)})

    @functools.cache
    def action_space(self, agent):
        return spaces.Discrete(3)

    def _wrap(self, obs):
        return {a: {"observation": o, "action_mask": np.array([0, 0, 1], np.int8)}
                for a, o in obs.items()}

    def reset(self, seed=None, options=None):
        obs, infos = super().reset(seed, options)
        return self._wrap(obs), infos

    def step(self, actions):
        assert all(v == 2 for v in actions.values()), actions
        obs, rew, term, trunc, infos = super().step({a: 1 for a in actions})
        return self._wrap(obs), rew, term, trunc, infos


class Mismatched(Leaving):
    """a_2 has three actions, the others two: agents of different kinds."""

    render_mode = None  # SuperSuit's wrappers read it

    @functools.cache
    def action_space(self, agent):
        return spaces.Discrete(2 if agent != "a_2" else 3)

    def step(self, actions):
        wrong = {a: v for a, v in actions.items() if not self.action_space(a).contains(v)}
        assert not wrong, f"actions outside the agents' own spaces: {wrong}"
        return super().step(actions)


def act(env, value=1):
    return {"discrete": np.full((env.num_envs, env.max_agents, 1), value)}


def test_agents_that_leave_mid_episode():
    env = ParallelEnvGroup(Leaving, num_envs=2)
    step = env.reset(seed=0)
    assert step.alive.all() and step.obs[0].shape == (2, 3, 2)
    ends = []
    for _ in range(4):
        step = env.step(act(env))
        ends.append(step.terminated[0].tolist())
    assert ends[:3] == [[False] * 3, [True, False, False], [False, True, False]]
    assert ends[3] == [False, False, True] and step.group_done.all()
    assert not step.group_truncated.any()
    np.testing.assert_allclose(step.final_obs[0][0, 2], [0.4, 2])
    assert step.alive.all()  # reset, next episode


class Listed(Leaving):
    """Agents z, a, m at reset and y, b joining at step 1, listed in the order `ordered` gives
    (names kept in a set are listed in hash order, which differs between processes)."""

    ordered = staticmethod(list)

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, self.ordered(["z", "a", "m"])
        return {a: np.zeros(2, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        self.agents = self.ordered(self.agents + ["y", "b"]) if self.t == 1 else self.agents
        done = {a: self.t >= 3 for a in self.agents}
        out = ({a: np.full(2, self.t / 10, np.float32) for a in self.agents},
               {a: 0.0 for a in self.agents}, done, {a: False for a in self.agents},
               {a: {} for a in self.agents})
        self.agents = [] if self.t >= 3 else self.agents
        return out


def test_slots_of_new_names_do_not_follow_the_order_agents_are_listed_in():
    slots = []
    for ordered in (list, lambda names: names[::-1]):
        env = ParallelEnvGroup(type("Order", (Listed,), {"ordered": staticmethod(ordered)}),
                               num_envs=1, max_agents=5)
        env.reset(seed=0)
        env.step(act(env))
        slots.append(env.slots[0])
    assert slots[0] == slots[1] == {"a": 0, "m": 1, "z": 2, "b": 3, "y": 4}


def test_new_agent_names_up_to_max_agents():
    env = ParallelEnvGroup(Spawning, num_envs=1, max_agents=4)
    step = env.reset(seed=0)
    assert step.alive[0].tolist() == [True, False, False, False]
    for t in range(1, 6):
        step = env.step(act(env))
        assert step.alive[0].sum() == min(t + 1, 4)
    step = env.step(act(env))
    assert step.group_done[0] and step.group_truncated[0]
    assert step.truncated[0].all() and not step.terminated.any()
    with pytest.raises(ValueError, match=r"env copy 0, episode step 2: agent 'b_2' is agent 3 "
                                         r"of this episode, more than max_agents=2 \(raise "
                                         r"--max-agents\)"):
        small = ParallelEnvGroup(Spawning, num_envs=1, max_agents=2)
        small.reset(seed=0)
        small.step(act(small))
        small.step(act(small))
    with pytest.raises(ValueError, match=r"env copy 0, episode step 1: agent 'b_1' is not in "
                                         r"possible_agents; .* \(--max-agents N, or max_agents\)"):
        fixed = ParallelEnvGroup(Spawning, num_envs=1)
        fixed.reset(seed=0)
        fixed.step(act(fixed))


class SpawnBonus(Spawning):
    """Spawning, with a reward (`bonus`) to each agent on the step it joins."""

    bonus = 100.0

    def step(self, actions):
        before = set(self.agents)
        obs, rew, term, trunc, infos = super().step(actions)
        for name in rew:
            if name not in before:
                rew[name] = self.bonus
        return obs, rew, term, trunc, infos


def test_a_reward_on_the_step_an_agent_joins_counts_and_is_checked():
    env = ParallelEnvGroup(SpawnBonus, num_envs=1, max_agents=4)
    env.reset(seed=0)
    step = env.step(act(env))
    assert step.reward[0].tolist() == [1.0, 100.0, 0.0, 0.0]  # b_1 joined, with its bonus
    bad = type("NaNBonus", (SpawnBonus,), {"bonus": float("nan")})
    env = ParallelEnvGroup(bad, num_envs=1, max_agents=4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="episode step 1: agent 'b_1': reward is nan"):
        env.step(act(env))


class JoinsAsItEnds(Leaving):
    """a_0 and a_1 play 3 steps; on the last, 'late' joins with reward 5 and every listed agent,
    'late' included, is truncated (and stays listed, which ends the episode all the same)."""

    def __init__(self):
        self.possible_agents = ["a_0", "a_1", "late"]

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, ["a_0", "a_1"]
        return {a: np.zeros(2, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        if self.t == 3:
            self.agents = self.possible_agents[:]
        rew = {a: float(actions.get(a, 5)) for a in self.agents}
        obs = {a: np.full(2, self.t / 10, np.float32) for a in self.agents}
        ended = {a: self.t == 3 for a in self.agents}
        return obs, rew, {a: False for a in self.agents}, ended, {a: {} for a in self.agents}


def test_the_reward_of_an_agent_joining_on_the_last_step_counts():
    env = ParallelEnvGroup(JoinsAsItEnds, num_envs=1)
    env.reset(seed=0)
    steps = [env.step(act(env)) for _ in range(3)]
    assert [s.group_done[0] for s in steps] == [False, False, True]
    assert steps[-1].reward[0].tolist() == [1.0, 1.0, 5.0]


def _group_returns(death_mode, steps=400):
    env = ParallelEnvGroup(functools.partial(GroupParallelEnv, "Goal-v0", death_mode=death_mode))
    env.reset(seed=0)
    rng, total, returns = np.random.default_rng(0), 0.0, []
    for _ in range(steps):
        step = env.step({"discrete": rng.integers(0, 2, size=(1, 2, 1))})
        total += float(step.group_reward[0])
        if step.group_done[0]:
            returns.append(total)
            total = 0.0
    return returns


def test_agents_absorbed_or_joining_do_not_erase_the_group_reward():
    """groupenvs' absorb view reports group_reward 0 for agents that already ended, in the step
    the group is paid: the adapter keeps the group's reward, as with the remove view."""
    removed = _group_returns("remove")
    assert any(removed) and _group_returns("absorb") == removed


class TwoGroupRewards(Leaving):
    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        for k, name in enumerate(infos):
            infos[name] = {"individual_reward": 0.0, "group_reward": float(k + 1)}
            rew[name] = float(k + 1)
        return obs, rew, term, trunc, infos


class NaNBesideTheParts(GroupParallelEnv):
    """groupenvs' view, whose rewards dict gets NaN beside the infos' two parts."""

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        return obs, {a: float("nan") for a in rew}, term, trunc, infos


def test_a_nan_reward_is_an_error_also_where_the_infos_give_the_parts():
    env = ParallelEnvGroup(NaNBesideTheParts, num_envs=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="episode step 1: agent 'agent_0': reward is nan"):
        env.step(act(env))


class Negated(GroupParallelEnv):
    """A reward wrapper's work: groupenvs' view with its rewards negated, its infos left."""

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        return obs, {a: -r for a, r in rew.items()}, term, trunc, infos


def test_rewards_that_disagree_with_the_infos_split_are_an_error_not_undone():
    """poca learns from the infos' split; a wrapper that changed the rewards alone (SuperSuit's
    reward_lambda_v0, a negation) trained on the unwrapped rewards, silently."""
    env = ParallelEnvGroup(functools.partial(Negated, "Goal-v0"), num_envs=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"episode step 1: agent 'agent_0': reward 0.01 is not "
                                         r"infos\['individual_reward'\] \+ "
                                         r"infos\['group_reward'\] \(-0.01 \+ 0\)"):
        env.step(act(env))


def test_the_split_check_allows_rounding_of_the_rewards_own_dtype():
    """Parts that nearly cancel leave a float32 sum whose rounding is large next to itself;
    a float16 reward rounds more still. Neither is a changed reward."""
    from poca.adapters import _same_sum

    assert _same_sum(np.float32(100.1) + np.float32(-100.0), 100.1, -100.0)
    assert _same_sum(np.float16(0.3) + np.float16(0.1), 0.3, 0.1)
    assert _same_sum(1.3, 0.3, 1.0) and _same_sum(2, 1, 1)
    assert not _same_sum(-1.3, 0.3, 1.0) and not _same_sum(130.0, 0.3, 1.0)
    assert not _same_sum(np.float32(1.31), 0.3, 1.0)


def test_slot_order_is_natural_so_numbered_names_keep_their_order():
    from poca.adapters import slot_order

    pistons = [f"piston_{i}" for i in range(12)]
    assert slot_order(reversed(pistons)) == pistons
    assert slot_order(["b", "a_10", "a_9", 3, "a"]) == [3, "a", "a_9", "a_10", "b"]


def test_different_group_rewards_in_one_step_are_an_error():
    env = ParallelEnvGroup(TwoGroupRewards)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="agent 'a_1': infos\\['group_reward'\\] is 2.0, another "
                                         "agent of this group reported 1.0"):
        env.step(act(env))


def test_dict_observations_with_action_masks_train():
    env = ParallelEnvGroup(Masked, num_envs=2)
    step = env.reset(seed=0)
    assert step.action_mask.shape == (2, 3, 3)
    assert step.action_mask[..., 2].all() and not step.action_mask[..., :2].any()
    config = POCAConfig().override({"hyperparameters.batch_size": 32,
                                    "hyperparameters.buffer_size": 64, "num_envs": 2,
                                    "network_settings.hidden_units": 16, "max_steps": 300})
    result = train(Masked, config)  # the env asserts that only allowed actions arrive
    assert result.episodes > 0


def test_turn_based_envs_train_with_the_waiting_player_masked_out():
    """PettingZoo's turn-based wrapper keeps the waiting player in `agents` with an all-zero
    action mask: its action is ignored and must neither stop training nor teach anything."""
    tictactoe = pytest.importorskip("pettingzoo.classic.tictactoe_v3")
    from pettingzoo.utils.conversions import turn_based_aec_to_parallel

    def make():
        return turn_based_aec_to_parallel(tictactoe.env())

    step = ParallelEnvGroup(make, num_envs=2).reset(seed=0)
    assert step.alive.all() and not step.action_mask[:, 1].any()  # player 2 waits
    result = train(make, POCAConfig().override({"max_steps": 600, "num_envs": 2}))
    assert result.episodes > 0


def test_mismatched_spaces_fail_naming_the_agents_and_the_way_out():
    with pytest.raises(ValueError, match=r"agents 'a_0' and 'a_2' have different spaces") as err:
        ParallelEnvGroup(Mismatched)
    assert ("ss.agent_indicator_v0(ss.pad_action_space_v0(ss.pad_observations_v0(env)))"
            in str(err.value))
    assert "not opposing teams" in str(err.value)  # padding them trains on the sum of rewards


def test_mismatched_spaces_train_once_padded_as_the_error_says():
    ss = pytest.importorskip("supersuit")

    def padded():
        return ss.agent_indicator_v0(ss.pad_action_space_v0(ss.pad_observations_v0(Mismatched())))

    env = ParallelEnvGroup(padded, num_envs=2)
    assert env.spec.discrete_branches == (3,)
    obs = env.reset(seed=0).obs[0]
    assert obs.shape == (2, 3, 2 + 3)  # observation + one-hot agent indicator
    np.testing.assert_array_equal(obs[:, :, 2:], np.broadcast_to(np.eye(3), (2, 3, 3)))
    step = env.step(act(env, 2))  # action 2 exists only for a_2: the others get 0
    np.testing.assert_array_equal(step.reward, [[0, 0, 2]] * 2)
    config = POCAConfig().override({"hyperparameters.batch_size": 32,
                                    "hyperparameters.buffer_size": 64, "num_envs": 2,
                                    "network_settings.hidden_units": 16, "max_steps": 300})
    assert train(padded, config).episodes > 0


class Frames(Leaving):
    """uint8 (20, 20, channels) observations (stacked frames: any channel count)."""

    channels = 5

    @functools.cache
    def observation_space(self, agent):
        return spaces.Box(0, 255, (20, 20, self.channels), np.uint8)

    def _frames(self, obs):
        return {a: np.full((20, 20, self.channels), 10 * o[0] + o[1], np.uint8)
                for a, o in obs.items()}

    def reset(self, seed=None, options=None):
        obs, infos = super().reset(seed, options)
        return self._frames(obs), infos

    def step(self, actions):
        obs, *rest = super().step(actions)
        return self._frames(obs), *rest


@pytest.mark.parametrize("channels", [1, 5])
def test_uint8_hwc_observations_are_images_of_any_channel_count(channels):
    factory = type("Stacked", (Frames,), {"channels": channels})
    env = ParallelEnvGroup(factory, num_envs=2)
    assert [(o.kind, o.shape) for o in env.spec.obs] == [("image", (20, 20, channels))]
    obs = env.reset(seed=0).obs[0]
    assert obs.shape == (2, 3, 20, 20, channels) and obs.dtype == np.uint8
    np.testing.assert_array_equal(obs[0, :, 0, 0, 0], [0, 1, 2])  # each agent's own frame
    config = POCAConfig().override({"hyperparameters.batch_size": 32,
                                    "hyperparameters.buffer_size": 64, "num_envs": 2,
                                    "network_settings.hidden_units": 16, "max_steps": 200})
    assert train(factory, config).episodes > 0


class LooseFrames(Frames):
    """Frames of another dtype in a uint8 image space: whole numbers 0..255 are fine."""

    channels, values = 1, (0.0, 255.0)

    def _frames(self, obs):
        frame = np.full((20, 20, 1), self.values[1])
        frame[0] = self.values[0]
        return dict.fromkeys(obs, frame)


@pytest.mark.parametrize(("values", "fragment"), [
    ((0.0, 255.0), None), ((0, 300), "float64 values in \\[0.0, 300.0\\]"),
    ((0.0, 0.5), "that are not whole numbers"), ((-1, 3), "values in \\[-1.0, 3.0\\]")])
def test_image_values_that_uint8_cannot_hold_are_an_error(values, fragment):
    factory = type("Loose", (LooseFrames,), {"values": tuple(map(float, values))})
    env = ParallelEnvGroup(factory)
    if fragment is None:
        assert env.reset(seed=0).obs[0][0, 0, :2, 0, 0].tolist() == [0, 255]
        return
    with pytest.raises(ValueError, match="env copy 0, reset: agent 'a_0': observation must "
                                         "hold the uint8 values 0..255 of its Box.*" + fragment):
        env.reset(seed=0)


def test_discrete_observations_are_one_hot():
    space = spaces.Discrete(5, start=-2)
    assert _encode(space, np.int64(0), "obs").tolist() == [0, 0, 1, 0, 0]
    assert _encode(spaces.Discrete(1 << 20), 7, "obs").sum() == 1  # no n x n table


class Offsets(Leaving):
    """Action spaces that start at offsets: Discrete(2, start=-1) or MultiDiscrete([2, 3],
    start=[5, -2]); the env asserts every action is in its space and pays its first entry."""

    multi = False

    @functools.cache
    def action_space(self, agent):
        if self.multi:
            return spaces.MultiDiscrete([2, 3], start=[5, -2])
        return spaces.Discrete(2, start=-1)

    def step(self, actions):
        wrong = {a: v for a, v in actions.items() if not self.action_space(a).contains(v)}
        assert not wrong, f"actions outside the agents' own spaces: {wrong}"
        return super().step({a: np.ravel(v)[0] for a, v in actions.items()})


@pytest.mark.parametrize("multi", [False, True])
def test_actions_reach_spaces_that_start_at_offsets(multi):
    factory = type("Shifted", (Offsets,), {"multi": multi})
    env = ParallelEnvGroup(factory, num_envs=2)
    env.reset(seed=0)
    branches = env.spec.discrete_branches
    step = env.step({"discrete": np.ones((2, 3, len(branches)), np.int64)})  # index 1 everywhere
    np.testing.assert_array_equal(step.reward, np.full((2, 3), 6.0 if multi else 0.0))


class Bounded(Leaving):
    """Box actions; the env asserts each is finite and inside its space."""

    bounds = (-0.3, 0.9)

    @functools.cache
    def action_space(self, agent):
        return spaces.Box(*self.bounds, (2,), np.float32)

    def step(self, actions):
        for a, v in actions.items():
            assert np.isfinite(v).all() and self.action_space(a).contains(v), (a, v)
        return super().step({a: 1 for a in actions})


F32 = float(np.finfo(np.float32).max)


@pytest.mark.parametrize("bounds", [(-0.3, 0.9), (-F32, F32), (0.5, F32)])
def test_box_actions_stay_finite_and_inside_any_finite_bounds(bounds):
    factory = type("Box", (Bounded,), {"bounds": bounds})
    env = ParallelEnvGroup(factory, num_envs=2)
    env.reset(seed=0)
    for value in (1.0, -1.0, 0.3):  # the ends are where rounding and overflow bite
        env.step({"continuous": np.full((2, 3, 2), value, np.float32)})


class WholeNumbers(Bounded):
    """Box(0, 3, int64) actions."""

    @functools.cache
    def action_space(self, agent):
        return spaces.Box(0, 3, (2,), np.int64)


def test_integer_box_actions_are_the_nearest_whole_number():
    """The policy's [-1, 1] scaled onto [0, 3] and rounded (a cast truncated: 0.99 played 2)."""
    env = ParallelEnvGroup(WholeNumbers, num_envs=1)
    played = [env._to_env_action(np.full(2, u, np.float32), None)[0]
              for u in (-1.0, -0.5, -0.2, 0.0, 0.2, 0.5, 0.99, 1.0)]
    assert played == [0, 1, 1, 2, 2, 2, 3, 3]  # -0.2 -> 1.2, 0.0 -> 1.5 (to even: 2), 0.2 -> 1.8


def test_bool_box_actions_are_the_nearest_of_false_and_true():
    """Box(0, 1, bool): the scaled value rounded, as an integer Box's (a cast made every output
    but exactly -1 True)."""
    space = spaces.Box(0, 1, (2,), bool)
    factory = type("Switches", (WholeNumbers,), {"action_space": lambda self, agent: space})
    env = ParallelEnvGroup(factory, num_envs=1)
    played = [bool(env._to_env_action(np.full(2, u, np.float32), None)[0])
              for u in (-1.0, -0.5, -0.1, 0.1, 0.5, 1.0)]
    assert played == [False, False, False, True, True, True]


I64, U64 = np.iinfo(np.int64), np.iinfo(np.uint64)


@pytest.mark.parametrize("low, high, dtype", [(0, I64.max, np.int64), (I64.min, I64.max, np.int64),
                                              (0, U64.max, np.uint64)])
def test_integer_box_actions_at_the_dtype_extremes_keep_their_order(low, high, dtype):
    """float64(2**63 - 1) is 2**63: the cast had wrapped +1 to the lowest int64."""
    space = spaces.Box(np.array([low, low], dtype), np.array([high, high], dtype), (2,), dtype)
    factory = type("Extreme", (WholeNumbers,), {"action_space": lambda self, agent: space})
    env = ParallelEnvGroup(factory, num_envs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "invalid value encountered in cast"
        played = [int(env._to_env_action(np.full(2, u, np.float32), None)[0])
                  for u in (-1.0, 0.0, 0.9999, 1.0)]
    assert played == sorted(played) and played[0] == low and high - played[-1] <= 2048
    assert all(space.contains(np.full(2, p, dtype)) for p in played)


def test_an_empty_box_action_space_names_the_agent():
    factory = type("NoAction", (WholeNumbers,), {
        "action_space": lambda self, agent: spaces.Box(0, 1, (0,), np.float32)})
    with pytest.raises(ValueError, match=r"a_0: the action space Box\(.*\) is empty"):
        ParallelEnvGroup(factory, num_envs=1)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_an_integer_box_made_with_infinite_bounds_is_refused(dtype):
    """Gymnasium keeps -inf/inf as the dtype's extremes, which np.isfinite let through."""
    space = spaces.Box(-np.inf, np.inf, (2,), dtype)
    factory = type("Unbounded", (WholeNumbers,), {"action_space": lambda self, agent: space})
    with pytest.raises(ValueError, match="continuous actions need finite Box bounds "
                                         r"\(an integer Box made with -inf/inf"):
        ParallelEnvGroup(factory, num_envs=1)


def test_a_float_box_with_an_infinite_bound_set_after_construction_is_refused():
    space = spaces.Box(-1, 1, (2,), np.float32)
    space.low[0] = -np.inf  # is_bounded() keeps the flags of construction and says True
    factory = type("Edited", (WholeNumbers,), {"action_space": lambda self, agent: space})
    with pytest.raises(ValueError, match=r"continuous actions need finite Box bounds, got"):
        ParallelEnvGroup(factory, num_envs=1)


class UndeclaredMask(Masked):
    """Masked, with the action_mask sent but left out of the Dict space."""

    @functools.cache
    def observation_space(self, agent):
        return spaces.Dict({"observation": spaces.Box(-1, 1, (2,), np.float32)})


def test_observation_keys_the_dict_space_does_not_declare_are_an_error():
    """An undeclared action_mask was dropped in silence and forbidden actions were played."""
    with pytest.raises(ValueError, match=r"agent 'a_0': observation holds key\(s\) "
                                         r"\['action_mask'\] that its Dict space does not "
                                         r"declare: declare it in the Dict space"):
        ParallelEnvGroup(UndeclaredMask, num_envs=1).reset(seed=0)


class HugeRewards(Leaving):
    """Each reward inside float32's range; in float32, as the trainer adds them, the first two
    add up beyond it (the whole sum, 3e38, would not)."""

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        return obs, dict(zip(rew, (3e38, 3e38, -3e38), strict=True)), term, trunc, infos


def test_rewards_whose_sum_float32_cannot_hold_are_an_error_naming_the_step():
    env = ParallelEnvGroup(HugeRewards, num_envs=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"env copy 0, episode step 1: the step's rewards add "
                                         r"up beyond float32's range"):
        env.step({"discrete": np.ones((1, 3, 1), np.int64)})


class VastRewards(Leaving):
    """Rewards float32 holds, whose returns and squared errors it does not."""

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        return obs, dict.fromkeys(rew, 3e37), term, trunc, infos


def test_training_that_diverges_on_vast_rewards_says_how_large_they_were():
    from poca.trainer import TrainingDiverged

    config = POCAConfig().override({"hyperparameters.batch_size": 16, "max_steps": 400,
                                    "hyperparameters.buffer_size": 32, "num_envs": 2,
                                    "network_settings.hidden_units": 16})
    with pytest.raises(TrainingDiverged, match=r"the team rewards reached 9e\+37 a step: scale "
                                               r"them down"):
        train(VastRewards, config)


def test_float16_observations_are_checked_without_overflow():
    from poca.adapters import _encode

    space = spaces.Box(-np.inf, np.inf, (2,), np.float16)
    np.testing.assert_array_equal(_encode(space, np.ones(2, np.float16), "x"), [1, 1])
    with pytest.raises(ValueError, match="x holds NaN/inf"):
        _encode(space, np.array([np.inf, 0], np.float16), "x")


def test_unsupported_spaces_say_what_is_supported():
    class Texty(Leaving):
        def observation_space(self, agent):
            return spaces.Text(5)

    with pytest.raises(TypeError, match="supported: Box"):
        ParallelEnvGroup(Texty)
    for space in (spaces.MultiBinary(3), spaces.MultiDiscrete([[2, 2], [2, 2]]),
                  spaces.Tuple([spaces.Discrete(2)] * 2)):
        class Acting(Leaving):
            def action_space(self, agent, space=space):
                return space

        with pytest.raises(TypeError) as info:  # the action rules only, and the way out
            ParallelEnvGroup(Acting)
        assert "MultiDiscrete with a 1-D nvec; for Dict, Tuple or MultiBinary actions, " \
               "flatten them" in str(info.value) and "one-hot" not in str(info.value)


def test_render_returning_none_says_so():
    class Blind(Leaving):
        render_mode = "rgb_array"

        def render(self):
            return None

    env = ParallelEnvGroup(Blind, num_envs=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"Blind.render\(\) returned None; expected an "):
        env.frame(0, 0.0)


class QuietReset(GroupParallelEnv):
    """groupenvs' PettingZoo view, its reset infos empty (as most envs leave them): only its
    step infos show the group reward."""

    def reset(self, seed=None, options=None):
        obs, infos = super().reset(seed, options)
        return obs, {agent: {} for agent in infos}


def test_a_group_reward_shown_only_in_step_infos_makes_the_group_return_the_headline():
    env = ParallelEnvGroup(lambda: QuietReset(num_agents=2), num_envs=2)
    env.reset(seed=0)
    assert not env.pays_group_reward  # nothing shown yet
    env.step(act(env))
    assert env.pays_group_reward


class IndividualGoal(envs.goal.GoalGroup):
    """Goal, declared to pay no group reward (only its attribute matters here)."""

    pays_group_reward = False


def test_the_pettingzoo_view_of_a_task_paying_no_group_reward_keeps_the_team_return_headline():
    """The view's infos carry a group_reward (of 0) for every task; its `pays_group_reward`
    says that this one pays none, so the team return stays the headline, as on the native
    path."""
    env = ParallelEnvGroup(lambda: GroupParallelEnv(IndividualGoal), num_envs=2)
    env.reset(seed=0)
    for _ in range(30):  # episodes end: infos of steps, ends and resets
        env.step(act(env))
    assert not env.pays_group_reward
    goal = ParallelEnvGroup(lambda: GroupParallelEnv("Goal-v0"), num_envs=1)
    goal.reset(seed=0)
    assert goal.pays_group_reward


def test_an_env_without_a_render_of_its_own_says_so():
    """PettingZoo's base render() raises a bare NotImplementedError (an empty message)."""
    class Unseen(Leaving):
        render_mode = "rgb_array"

    env = ParallelEnvGroup(Unseen, num_envs=1)
    env.reset(seed=0)
    with pytest.raises(NotImplementedError, match=r"Unseen has no render\(\) of its own"):
        env.frame(0, 0.0)


def test_copies_are_seeded_independently_and_reproducibly():
    a = ParallelEnvGroup(lambda: GroupParallelEnv(num_agents=2), num_envs=4)
    b = ParallelEnvGroup(lambda: GroupParallelEnv(num_agents=2), num_envs=4)
    sa, sb = a.reset(seed=3), b.reset(seed=3)
    np.testing.assert_array_equal(sa.obs[0], sb.obs[0])
    goals = sa.obs[0][:, :, 0]
    assert len({tuple(g) for g in goals}) > 1  # copies draw different goals
    seen = []

    class Recording(GroupParallelEnv):
        def reset(self, seed=None, options=None):
            seen.append(seed)
            return super().reset(seed, options)

    for seed in range(64):
        ParallelEnvGroup(Recording, num_envs=16).reset(seed=seed)
    assert len(set(seen)) == len(seen) == 64 * 16  # no two copies of any seeds share a seed
    assert all(0 <= seed < 2**32 for seed in seen)  # what np.random.seed(seed) accepts


class LegacySeeded(Leaving):
    """Seeds numpy's legacy global generator, as older envs do (it takes seeds below 2**32)."""

    def reset(self, seed=None, options=None):
        np.random.seed(seed)
        return super().reset(seed, options)


def test_envs_seeded_with_legacy_numpy_train():
    config = POCAConfig().override({"max_steps": 300, "num_envs": 4, "seed": 2**32 - 1})
    assert train(LegacySeeded, config).agent_steps >= 300


def test_make_env_from_factory_paths():
    env = make_env("tests.test_adapters:Leaving", 3)
    assert isinstance(env, ParallelEnvGroup) and env.num_envs == 3
    with pytest.raises(TypeError, match="expected a PettingZoo ParallelEnv"):
        make_env(lambda: 5, 1)
    with pytest.raises(ValueError, match="cannot load"):
        make_env("tests.nowhere:Env", 1)


def test_goal_through_the_adapter_learns_like_the_native_path():
    config = POCAConfig.load("goal")
    adapted = train(lambda: GroupParallelEnv(num_agents=2), config)
    assert adapted.mean_return() >= 0.9


class PaysTheGone(Leaving):
    """Keeps reporting a reward for agents that left: 0 (nothing lost) or 5 (lost)."""

    payment = 5.0

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        return obs, {**{a: self.payment for a in self.possible_agents}, **rew}, term, trunc, \
            infos


def test_a_reward_for_an_agent_not_in_the_episode_is_an_error_not_dropped():
    class ReportsZero(PaysTheGone):
        payment = 0.0

    env = ParallelEnvGroup(ReportsZero, num_envs=1)
    env.reset(seed=0)
    assert [env.step(act(env)).group_done[0] for _ in range(4)] == [False] * 3 + [True]
    env = ParallelEnvGroup(PaysTheGone, num_envs=1)
    env.reset(seed=0)
    env.step(act(env))
    env.step(act(env))  # a_0 leaves here
    with pytest.raises(ValueError, match=r"env copy 0, episode step 3: agent 'a_0' is not in "
                                         r"the episode .* but has reward 5.0: it would be lost"):
        env.step(act(env))


def test_an_env_whose_reset_ignores_the_seed_is_warned_about():
    class Unseeded(Leaving):
        def reset(self, seed=None, options=None):
            obs, infos = super().reset(seed, options)
            noise = np.random.default_rng()  # not from `seed`: every episode differs
            return {a: o + noise.uniform(0, 0.1, 2).astype(np.float32) for a, o in
                    obs.items()}, infos

    with pytest.warns(RuntimeWarning, match=r"Unseeded.*reset\(seed=12345\) twice gave "
                                            r"different observations.*self.np_random"):
        make_env(Unseeded, 2)
    make_env(Leaving, 2)  # seeded (here: no randomness at all): no warning (pytest: an error)

    def unseeded_goal(num_envs):  # a GroupEnv factory (it takes num_envs) is checked too
        env = envs.make_group("Goal-v0", num_envs=num_envs)
        reset = env.reset

        def noisy(seed=None):
            out = reset(seed=seed)
            out.obs[0][:] += np.random.default_rng().uniform(0, 0.01, out.obs[0].shape)
            return out

        env.reset = noisy
        return env

    with pytest.warns(RuntimeWarning, match="unseeded_goal.*twice gave different.*"
                                            "self.random_bits, self.uniform"):
        make_env(unseeded_goal, 2)

    class ObservationsOnly(Leaving):  # the pre-1.22 reset: still the adapter's clear error
        def reset(self, seed=None, options=None):
            return super().reset(seed, options)[0]

    with pytest.raises(ValueError, match=r"reset\(\) must return \(observations, infos\)"):
        make_env(ObservationsOnly, 2)


class BranchMasked(Leaving):
    """MultiDiscrete([3, 2]) actions with the mask in infos in Gymnasium's per-branch form (a
    tuple of arrays, as MultiDiscrete.sample(mask=...) takes): only (2, 0) is allowed."""

    mask = (np.array([0, 0, 1], np.int8), np.array([1, 0], np.int8))

    @functools.cache
    def action_space(self, agent):
        return spaces.MultiDiscrete([3, 2])

    def _infos(self, infos):
        return {a: {**info, "action_mask": self.mask} for a, info in infos.items()}

    def reset(self, seed=None, options=None):
        obs, infos = super().reset(seed, options)
        return obs, self._infos(infos)

    def step(self, actions):
        assert all(list(v) == [2, 0] for v in actions.values()), actions
        obs, rew, term, trunc, infos = super().step({a: 1 for a in actions})
        return obs, rew, term, trunc, self._infos(infos)


def test_multidiscrete_masks_per_branch_are_read_as_gymnasium_gives_them():
    step = ParallelEnvGroup(BranchMasked, num_envs=2).reset(seed=0)
    np.testing.assert_array_equal(step.action_mask[0, 0], [False, False, True, True, False])
    config = POCAConfig().override({"hyperparameters.batch_size": 32,
                                    "hyperparameters.buffer_size": 64, "num_envs": 2,
                                    "network_settings.hidden_units": 16, "max_steps": 300})
    assert train(BranchMasked, config).episodes > 0  # the env asserts only (2, 0) arrives


@pytest.mark.parametrize("mask, fragment", [
    ((np.ones(3, np.int8), np.ones(3, np.int8)), "agent 'a_0': infos['action_mask']: per branch, "
                                                 "its parts must hold [3, 2] bools, got [3, 3]"),
    (np.ones(4, np.int8), "agent 'a_0': infos['action_mask'] must hold 5 bools, or a tuple of 2 "
                          "arrays of [3, 2] bools (one per branch); got int8 [4]"),
    ([np.ones(3), np.ones((2, 2))], "infos['action_mask'] must hold 5 bools"),
])
def test_masks_of_the_wrong_size_name_both_accepted_forms(mask, fragment):
    factory = type("WrongMask", (BranchMasked,), {"mask": mask})
    with pytest.raises(ValueError, match="agent 'a_0'") as info:
        ParallelEnvGroup(factory, num_envs=1).reset(seed=0)
    assert fragment in str(info.value), str(info.value)


def test_masks_of_the_right_size_are_read_flat_in_any_shape_or_per_single_branch():
    one_branch = type("OneBranch", (BranchMasked,), {
        "mask": (np.array([0, 0, 1], np.int8),),
        "action_space": functools.cache(lambda self, agent: spaces.MultiDiscrete([3]))})
    step = ParallelEnvGroup(one_branch, num_envs=1).reset(seed=0)
    np.testing.assert_array_equal(step.action_mask[0, 0], [False, False, True])
    column = type("Column", (BranchMasked,), {"mask": np.array([[0], [0], [1], [1], [0]])})
    step = ParallelEnvGroup(column, num_envs=1).reset(seed=0)
    np.testing.assert_array_equal(step.action_mask[0, 0], [False, False, True, True, False])


@pytest.mark.parametrize("space", [spaces.Box(-1, 1, (0,), np.float32),
                                   spaces.Box(0, 255, (20, 20, 0), np.uint8)])  # had numpy's
def test_an_empty_box_observation_is_one_clear_error(space):  # zero-size reduction error
    factory = type("Empty", (Leaving,), {"observation_space": lambda self, agent: space})
    with pytest.raises(ValueError, match="the observation 'obs' is empty"):
        ParallelEnvGroup(factory, num_envs=1)


def test_a_dict_observation_of_only_an_action_mask_is_one_clear_error():
    factory = type("OnlyMask", (Leaving,), {"observation_space": functools.cache(
        lambda self, agent: spaces.Dict({"action_mask": spaces.MultiBinary(3)}))})
    with pytest.raises(ValueError, match="holds no observation besides its action_mask"):
        ParallelEnvGroup(factory, num_envs=1)


class OddKeys(Frames):
    """A Dict observation whose keys are valid for Gymnasium but not as torch module names."""

    @functools.cache
    def observation_space(self, agent):
        return spaces.Dict({"camera.rgb": spaces.Box(0, 255, (20, 20, 1), np.uint8),
                            "type": spaces.Box(-1, 1, (2,), np.float32),
                            "": spaces.Discrete(2)})

    def _frames(self, obs):
        return {a: {"camera.rgb": np.full((20, 20, 1), 10 * o[1], np.uint8), "type": o, "": 1}
                for a, o in obs.items()}


def test_dict_keys_that_are_not_module_names_train_and_reload(tmp_path):
    config = POCAConfig().override({"hyperparameters.batch_size": 32, "num_envs": 2,
                                    "hyperparameters.buffer_size": 64, "max_steps": 200,
                                    "network_settings.hidden_units": 16,
                                    "network_settings.normalize": True})
    result = train(OddKeys, config, run_dir=tmp_path / "run")
    assert result.episodes > 0
    from poca.evaluate import checkpoint_returns

    group, team, _ = checkpoint_returns(result.checkpoint,
                                        functools.partial(ParallelEnvGroup, OddKeys), 2)
    assert len(team) == 2


def test_an_agent_reported_terminated_and_truncated_is_terminal():
    """Gymnasium reads the pair as terminal: no bootstrap from a value beyond the end."""

    class Both(Leaving):
        def step(self, actions):
            obs, rew, term, trunc, infos = super().step(actions)
            return obs, rew, term, {a: term[a] for a in actions}, infos

    env = ParallelEnvGroup(Both)
    env.reset(seed=0)
    step = env.step({"discrete": np.zeros((1, 3, 1), np.int64)})
    step = env.step({"discrete": np.zeros((1, 3, 1), np.int64)})  # a_0 leaves, flagged both
    assert step.terminated[0].tolist() == [True, False, False]
    assert not step.truncated.any()
    for _ in range(2):  # a_1, then a_2 (ending the group) flagged both
        step = env.step({"discrete": np.zeros((1, 3, 1), np.int64)})
    assert step.group_done[0] and not step.group_truncated[0]


class GridImage(Frames):
    """A 0/1 occupancy grid as uint8 (high 1), not a photo (high 255)."""

    channels = 1

    @functools.cache
    def observation_space(self, agent):
        return spaces.Box(0, 1, (20, 20, 1), np.uint8)

    def _frames(self, obs):
        return {a: np.full((20, 20, 1), int(o[1]) % 2, np.uint8) for a, o in obs.items()}


def test_uint8_images_are_scaled_by_their_high_not_by_255():
    import torch

    from poca.encoders import ObservationEncoder

    (spec,) = ParallelEnvGroup(GridImage).spec.obs
    assert (spec.kind, spec.high) == ("image", 1.0)
    grid = ObservationEncoder((spec,), 8, normalize=False)
    photo = ObservationEncoder((dataclasses.replace(spec, high=255.0),), 8, normalize=False)
    photo.load_state_dict(grid.state_dict())
    ones = torch.ones(1, 20, 20, 1, dtype=torch.uint8)
    torch.testing.assert_close(grid([ones]), photo([ones * 255]))
    assert not torch.allclose(grid([ones]), photo([ones]))


def test_a_channels_first_image_is_named_with_the_way_out():
    class ChannelsFirst(Frames):
        @functools.cache
        def observation_space(self, agent):
            return spaces.Box(0, 255, (3, 32, 32), np.uint8)

        def _frames(self, obs):
            return dict.fromkeys(obs, np.zeros((3, 32, 32), np.uint8))

    config = POCAConfig().override({"max_steps": 100, "num_envs": 1})
    with pytest.raises(ValueError, match=r"observation 'obs': vis_encode_type 'simple' needs .*"
                                         r"got 3x32 \(shape \(3, 32, 32\)\); images are read as "
                                         r"\(height, width, channels\).*moveaxis"):
        train(ChannelsFirst, config)


def test_an_aec_env_from_a_factory_is_pointed_to_aec_to_parallel():
    from pettingzoo.utils.conversions import parallel_to_aec

    with pytest.raises(TypeError, match="it is an AEC env, convert it with .*aec_to_parallel"):
        make_env(lambda: parallel_to_aec(type("Rendered", (Leaving,), {"render_mode": None})()),
                 1)


def test_a_turn_based_aec_env_is_pointed_to_turn_based_aec_to_parallel():
    """aec_to_parallel refuses an env that is not parallelizable, as tictactoe is."""
    tictactoe = pytest.importorskip("pettingzoo.classic.tictactoe_v3")
    with pytest.raises(TypeError, match="not marked is_parallelizable .* convert it with "
                                        "pettingzoo.utils.conversions.turn_based_aec_to_parallel"):
        make_env(tictactoe.env, 1)


@pytest.mark.parametrize("metadata", ["unset", None])
def test_an_aec_env_without_metadata_gets_the_same_hint(metadata):
    from pettingzoo import AECEnv

    bare = type("Bare", (AECEnv,), {"possible_agents": ["a"]} | (
        {} if metadata == "unset" else {"metadata": metadata}))
    with pytest.raises(TypeError, match="it is an AEC env not marked is_parallelizable"):
        make_env(bare, 1)


def test_unsupported_spaces_are_named_on_one_line():
    class Grid(Leaving):
        @functools.cache
        def action_space(self, agent):
            return spaces.MultiDiscrete([[2, 3], [4, 5]])

    with pytest.raises(TypeError, match=r"MultiDiscrete\(\[\[2 3\] \[4 5\]\]\)") as err:
        ParallelEnvGroup(Grid)
    assert "\n" not in str(err.value)


def test_an_evaluation_that_never_ends_says_why(monkeypatch):
    from poca import evaluate
    from poca.networks import Actor

    class Endless(Leaving):
        def step(self, actions):
            obs, rew, term, trunc, infos = super().step(actions)
            self.agents = list(self.possible_agents)
            return ({a: np.zeros(2, np.float32) for a in self.agents}, dict.fromkeys(
                self.agents, 0.0), dict.fromkeys(self.agents, False),
                {a: self.t >= 60 for a in self.agents}, dict.fromkeys(self.agents, {}))

    monkeypatch.setattr(evaluate, "STILL_RUNNING_AFTER", 50)
    env = ParallelEnvGroup(Endless, num_envs=2)
    actor = Actor(env.spec, POCAConfig().network_settings)
    with pytest.warns(RuntimeWarning, match="2 of 2 evaluation episodes still running after 50 "
                                            "steps.*--max-episode-steps"):
        evaluate.episode_returns(actor, env)


def test_vector_bounds_beyond_1e9_and_pixels_above_an_image_s_high():
    from poca.adapters import _obs_spec

    stamp = _obs_spec("t", spaces.Box(1.5e9, 2e9, (2,), np.float64), "x")
    assert (stamp.low, stamp.high) == (1e9, 1e9)
    with pytest.raises(ValueError, match=r"holds 255, above its space's high 1 \(the networks "
                                         r"divide its pixels by 1\)"):
        _encode(spaces.Box(0, 1, (2, 2, 1), np.uint8), np.full((2, 2, 1), 255, np.uint8), "obs")


def test_a_factory_that_returns_one_env_for_every_copy_is_refused():
    """Every copy would step that one env once per batch step: garbage episodes, no error."""
    shared = Leaving()
    with pytest.raises(ValueError, match="returned the same env object for several of the 4 "
                                         "copies: it must build a new env on each call"):
        make_env(lambda: shared, 4)
    assert make_env(lambda: shared, 1).num_envs == 1


def test_a_groupenv_factory_must_take_num_envs_by_name_and_heed_it():
    """A factory taking **kwargs was told it returned no GroupEnv (it did); one that ignored
    num_envs trained on another batch size than the run's, silently."""
    from envs.goal import GoalGroup

    with pytest.raises(TypeError, match="returned a GroupEnv \\(GoalGroup\\) but has no "
                                        "parameter named num_envs"):
        make_env(lambda **kwargs: GoalGroup(**kwargs), 4)
    with pytest.raises(ValueError, match="returned a GoalGroup of 3 envs: pass num_envs on"):
        make_env(lambda num_envs: GoalGroup(3), 8)
    assert make_env(lambda num_envs, **kw: GoalGroup(num_envs, **kw), 8).num_envs == 8


class Growing(Leaving):
    """possible_agents gains an agent at a reset once `grow` is set (PettingZoo keeps it
    fixed)."""

    grow = False

    def reset(self, seed=None, options=None):
        if self.grow:
            self.possible_agents = ["a_0", "a_1", "a_2", "a_3"]
        return super().reset(seed, options)


def test_possible_agents_that_change_are_named_not_an_index_error():
    env = make_env(Growing, 1)
    env.reset(seed=0)
    env.copies[0].grow = True
    with pytest.raises(ValueError, match=r"env copy 0, reset: possible_agents is \['a_0', "
                                         r"'a_1', 'a_2', 'a_3'\], not \['a_0', 'a_1', 'a_2'\]"
                                         r".*--max-agents"):
        env.reset(seed=1)


class MaskedBox(Masked):
    """An action_mask in the observation, but Box actions: nothing for it to mask."""

    @functools.cache
    def action_space(self, agent):
        return spaces.Box(-1, 1, (3,), np.float32)


def test_an_action_mask_beside_continuous_actions_is_not_ignored_silently():
    with pytest.warns(RuntimeWarning, match=r"'action_mask' is ignored: the action space "
                                            r"Box\(.*\) has no discrete actions to mask"):
        make_env(MaskedBox, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_env(Masked, 1)


class Unflagged(Leaving):
    """Leaving whose agents leave `agents` with both flags left False."""

    def step(self, actions):
        obs, rew, term, trunc, infos = super().step(actions)
        return obs, rew, {a: False for a in term}, trunc, infos


def test_an_agent_leaving_without_a_flag_is_an_error_not_read_as_terminal():
    """Read as terminated, a time-limit end nobody flagged was bootstrapped as terminal."""
    env = ParallelEnvGroup(Unflagged)
    env.reset(seed=0)
    env.step(act(env))
    with pytest.raises(ValueError, match="episode step 2: agent 'a_0': left agents with neither "
                                         "terminations nor truncations set"):
        env.step(act(env))


class Reordered(Leaving):
    """Leaving listing its agents in another order (a set's, say, which follows string hashing
    and so differs between processes)."""

    def __init__(self):
        self.possible_agents = ["a_2", "a_0", "a_1"]


def test_slots_follow_agent_names_not_the_order_possible_agents_lists_them_in():
    """Otherwise the same seed gives another run in another process, env workers disagree, and a
    resume permutes the slots (the absorbing critic reads them in order)."""
    env = ParallelEnvGroup(Reordered)
    first = env.reset(seed=0).obs[0]  # Leaving's reset shows each agent its place in the list
    assert env.slots[0] == {"a_0": 0, "a_1": 1, "a_2": 2}
    np.testing.assert_array_equal(first[0, :, 1], [1, 2, 0])  # a_0, a_1, a_2
