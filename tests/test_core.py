"""The batched contract: seeding, auto-reset, and clear errors for bad input."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import envs
from envs.core import GroupEnv, GroupSpec, GroupStep, ObsSpec, env_keys


def random_actions(rng, env):
    E, A, (C, branches) = env.num_envs, env.max_agents, env.spec.action_sizes
    act = {}
    if C:
        act["continuous"] = rng.uniform(-1, 1, (E, A, C)).astype(np.float32)
    if branches:
        act["discrete"] = rng.integers(0, 2, (E, A, len(branches)))
    return act


def rollout(env, seed, steps=200, action_seed=0):
    rng = np.random.default_rng(action_seed)
    out = [env.reset(seed=seed)]
    out += [env.step(random_actions(rng, env)) for _ in range(steps)]
    return out


FIELDS = ("alive", "reward", "group_reward", "terminated", "truncated", "group_done")


@pytest.mark.parametrize("kw", [{}, {"action_sizes": (1, 1), "num_agents": 3},
                                {"reward_mode": "mlagents", "action_sizes": (1, 0)}])
def test_same_seed_same_episodes(kw):
    a = rollout(envs.make_group("Goal-v0", num_envs=64, **kw), seed=7)
    b = rollout(envs.make_group("Goal-v0", num_envs=64, **kw), seed=7)
    for x, y in zip(a, b, strict=False):
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f))
        np.testing.assert_array_equal(x.obs[0], y.obs[0])
    assert sum(s.group_done.sum() for s in a) > 100  # many episodes were covered
    c = rollout(envs.make_group("Goal-v0", num_envs=64, **kw), seed=8)
    assert any((x.obs[0] != y.obs[0]).any() for x, y in zip(a, c, strict=False))


def test_env_episodes_do_not_depend_on_batch_size():
    big = envs.make_group("Goal-v0", num_envs=64, num_agents=3, action_sizes=(1, 1))
    small = envs.make_group("Goal-v0", num_envs=1, num_agents=3, action_sizes=(1, 1))
    rng = np.random.default_rng(0)
    a, b = big.reset(seed=11), small.reset(seed=11)
    for _ in range(200):
        np.testing.assert_array_equal(a.obs[0][:1], b.obs[0])
        for f in FIELDS:
            np.testing.assert_array_equal(getattr(a, f)[:1], getattr(b, f))
        act = random_actions(rng, big)
        a, b = big.step(act), small.step({k: v[:1] for k, v in act.items()})


@pytest.mark.parametrize("num_envs", [1, 16, 64, 1024])
def test_seeds_never_share_an_env_stream(num_envs):
    keys = np.concatenate([env_keys(seed, num_envs) for seed in range(256)])
    assert len(np.unique(keys)) == len(keys)
    # and env i's stream does not depend on how many envs run beside it
    np.testing.assert_array_equal(env_keys(5, num_envs), env_keys(5, 1024)[:num_envs])


def test_reset_without_seed_starts_fresh_episodes():
    env = envs.make_group("Goal-v0", num_envs=256)
    first = env.reset(seed=0).obs[0]
    again = env.reset().obs[0]
    assert (first != again).any()
    np.testing.assert_array_equal(env.reset(seed=0).obs[0], first)


def test_auto_reset_keeps_final_obs_and_fresh_obs_elsewhere():
    env = envs.make_group("Goal-v0", num_envs=128)
    steps = rollout(env, seed=1, steps=60)
    done_steps = [s for s in steps[1:] if s.group_done.any()]
    assert done_steps
    for s in done_steps:
        done = s.group_done
        np.testing.assert_array_equal(s.final_obs[0][~done], s.obs[0][~done])
        assert (s.final_obs[0][done][..., 1:].sum(-1) > 0).all()  # scoreboard of the ended one
        np.testing.assert_array_equal(s.obs[0][done][..., 1:], 0.0)  # fresh scoreboard
        assert s.alive[done].all()


def test_returned_arrays_are_not_aliased_with_state():
    env = envs.make_group("Goal-v0", num_envs=4)
    s = env.reset(seed=0)
    s.obs[0][:] = 99
    s.alive[:] = False
    t = env.step({"discrete": np.ones((4, 2, 1), np.int64)})
    assert (t.obs[0] != 99).all() and t.alive.any()


def test_group_step_fields_have_documented_shapes():
    env = envs.make_group("Goal-v0", num_envs=5, num_agents=3, action_sizes=(2, 1))
    s = env.reset(seed=0)
    s = env.step(random_actions(np.random.default_rng(0), env))
    assert isinstance(s, GroupStep)
    assert s.obs[0].shape == (5, 3, 3) and s.obs[0].dtype == np.float32
    assert s.alive.shape == s.reward.shape == s.terminated.shape == s.truncated.shape == (5, 3)
    assert s.group_reward.shape == s.group_done.shape == (5,)
    assert s.reward.dtype == s.group_reward.dtype == np.float32
    assert env.spec.action_sizes == (2, (2,))


# --- bad input ---------------------------------------------------------------------------------


def test_step_before_reset_and_after_close():
    env = envs.make_group("Goal-v0")
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"discrete": np.zeros((1, 2, 1), np.int64)})
    env.reset(seed=0)
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step({"discrete": np.zeros((1, 2, 1), np.int64)})
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


@pytest.mark.parametrize("actions, match", [
    ({"discrete": np.zeros((1, 2), np.int64)}, r"must be int \[1, 2, 1\]"),
    ({"discrete": np.zeros((1, 2, 1), np.float32)}, r"must be int"),
    ({"discrete": np.array([[[0], [2]]])}, r"out of range .* env 0, agent 1"),
    ({"discrete": np.array([[[-1], [0]]])}, r"out of range .* env 0, agent 0"),
    ({}, r"missing \['discrete'\]"),
    ({"discrete": np.zeros((1, 2, 1), np.int64), "cont": 1}, r"unknown \['cont'\]"),
    ({"discrete": np.zeros((1, 2, 1), np.int64), "continuous": np.ones((1, 2, 1))},
     r"no continuous actions"),
])
def test_bad_discrete_actions(actions, match):
    env = envs.make_group("Goal-v0")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        env.step(actions)


def test_bad_continuous_actions():
    env = envs.make_group("Goal-v0", num_envs=2, action_sizes=(2, 0))
    env.reset(seed=0)
    ok = np.zeros((2, 2, 2), np.float32)
    for bad_value in (np.nan, np.inf, -np.inf):
        act = ok.copy()
        act[1, 0, 1] = bad_value
        with pytest.raises(ValueError, match=r"continuous.*NaN/inf.*env 1, agent 0"):
            env.step({"continuous": act})
    with pytest.raises(ValueError, match=r"must be float \[2, 2, 2\]"):
        env.step({"continuous": np.zeros((2, 2, 2), np.int64)})
    with pytest.raises(TypeError, match="must be a dict"):
        env.step(ok)


class Turns(GroupEnv):
    """Two players take turns on a branch of 3 moves (move 2 never allowed) and a branch of 2
    that is always open; the waiting player's first branch allows nothing. Player 1 leaves
    after step 2; the episode lasts 4 steps."""

    def __init__(self, num_envs=2):
        super().__init__(GroupSpec(num_agents=2, obs=(ObsSpec("v", "vector", (1,)),),
                                   continuous_size=0, discrete_branches=(3, 2), max_steps=4),
                         num_envs)

    def _reset_envs(self, idx):
        self.alive[idx] = True

    def _step(self, cont, disc):
        E = self.num_envs
        leaving = np.zeros((E, 2), bool)
        leaving[:, 1] = self.t == 1
        self.alive &= ~leaving
        return np.zeros((E, 2), np.float32), np.zeros(E, np.float32), leaving, leaving & False

    def _observe(self, rows=slice(None)):
        return (np.zeros((self.env_ids[rows].size, 2, 1), np.float32),)

    def _action_mask(self):
        mask = np.ones((self.num_envs, 2, 5), bool)
        mask[..., 2] = False
        both = np.flatnonzero(self.alive.all(axis=1))
        mask[both, 1 - self.t[both] % 2, :3] = False  # the waiting player: no legal move
        return mask


class LivingCost(Turns):
    """Turns with a living cost of 0.01 a step, paid to every slot (`everyone`), or to the
    slots alive when the step began."""

    def __init__(self, everyone):
        super().__init__()
        self.everyone = everyone

    def _step(self, cont, disc):
        paid = np.ones_like(self.alive) if self.everyone else self.alive.copy()
        _, group, terminated, truncated = super()._step(cont, disc)
        return np.float32(-0.01) * paid, group, terminated, truncated


def test_a_task_paying_a_slot_that_is_not_alive_is_refused_naming_it():
    """The PettingZoo view has no agent to pay for such a slot, while the team return would
    count it: the views and the learner would disagree, so it is the task's error."""
    env = LivingCost(everyone=False)
    env.reset(seed=0)
    for _ in range(6):  # player 1 leaves after 2 steps; episodes of 4 steps
        env.step({"discrete": np.zeros((2, 2, 2), np.int64)})
    env = LivingCost(everyone=True)
    env.reset(seed=0)
    env.step({"discrete": np.zeros((2, 2, 2), np.int64)})
    env.step({"discrete": np.zeros((2, 2, 2), np.int64)})  # player 1 leaves, paid on its last step
    with pytest.raises(ValueError, match=r"LivingCost._step paid an individual reward of -0.01 "
                       r"to slot 1 of env 0, where no agent was alive after 2 steps of its "
                       r"episode, nor joined"):
        env.step({"discrete": np.zeros((2, 2, 2), np.int64)})


class FleetingPaid(Turns):
    """Turns where slot 1, once empty, gets an agent that joins and leaves within one step,
    paid 1: no view could show it."""

    def _step(self, cont, disc):
        _, group, terminated, truncated = super()._step(cont, disc)
        reward = np.zeros((self.num_envs, 2), np.float32)
        reward[self.t == 2, 1] = 1.0
        terminated[self.t == 2, 1] = True
        return reward, group, terminated, truncated


def test_a_reward_to_an_agent_that_joins_and_leaves_within_a_step_is_refused():
    env = FleetingPaid()
    env.reset(seed=0)
    noop = {"discrete": np.zeros((2, 2, 2), np.int64)}
    env.step(noop)
    env.step(noop)
    with pytest.raises(ValueError, match="paid an individual reward of 1 to slot 1 of env 0"):
        env.step(noop)


class OneMaskBuffer(Turns):
    """Turns filling one mask buffer in place each step (the docstring asks for a fresh array;
    an easy one to miss)."""

    def _action_mask(self):
        if not hasattr(self, "buffer"):
            self.buffer = np.zeros((self.num_envs, 2, 5), bool)
        self.buffer[...] = super()._action_mask()
        return self.buffer


def test_each_steps_action_mask_stays_what_it_was_when_the_task_reuses_its_buffer():
    """A learner keeps every step's mask (poca's rollout does): a buffer the task fills again
    would rewrite them all to the latest."""
    env = OneMaskBuffer()
    first = env.reset(seed=0).action_mask
    kept = first.copy()
    second = env.step(_turn_actions(env)).action_mask
    np.testing.assert_array_equal(first, kept)
    assert not np.array_equal(first, second)  # the turn moved on


def _turn_actions(env):
    """The first allowed move of each branch (the waiting player's branch allows none: 0)."""
    mask = env._legal.reshape(env.num_envs, 2, 5)
    first = np.stack([mask[..., :3].argmax(-1), mask[..., 3:].argmax(-1)], -1)
    return {"discrete": first.astype(np.int64)}


class Flagging(Turns):
    """Turns whose `_step` gets player 1's leaving wrong (`mistake`): "alive" forgets to clear
    alive (to the core the same as a newcomer put in the slot at once), "stray" flags the
    emptied slot truncated again on the next step, "forgot" clears alive but returns no flag;
    or, harmlessly, "row" flags the whole row terminated when the group ends."""

    def __init__(self, mistake):
        super().__init__()
        self.mistake = mistake

    def _step(self, cont, disc):
        was = self.t.copy()
        reward, group, terminated, truncated = super()._step(cont, disc)
        if self.mistake == "alive":
            self.alive[terminated] = True
        if self.mistake == "stray":
            truncated[was == 2, 1] = True
        if self.mistake == "forgot":
            terminated = np.zeros_like(terminated)
        if self.mistake == "row":
            terminated[was == 3] = True  # the last step: player 0 ends, player 1 left earlier
            self.alive[was == 3] = False
        return reward, group, terminated, truncated


@pytest.mark.parametrize("mistake, message", [
    ("alive", "flagged slot 1 of env 0 terminated on step 2 of its episode, yet left it alive"),
    ("stray", "flagged slot 1 of env 0 truncated on step 3 of its episode, where no agent was "
              "alive before the step"),
    # the PettingZoo view dropped the agent with neither flag, and a group emptied that way
    # played on, empty, to its time limit
    ("forgot", "cleared self.alive for slot 1 of env 0 on step 2 of its episode without an end "
               "flag")])
def test_end_flags_on_agents_that_stay_or_were_not_there_are_refused(mistake, message):
    """An ended agent still listed (the PettingZoo view would report it ended yet acting), or
    a stray truncated flag turning a group's terminal end into a time-limit one, is the task's
    error, named where it happens."""
    env = Flagging(mistake)
    env.reset(seed=0)
    noop = {"discrete": np.zeros((2, 2, 2), np.int64)}
    env.step(noop)
    with pytest.raises(ValueError, match=re.escape(f"Flagging._step {message}")):
        env.step(noop)
        env.step(noop)


class StartsOne(Turns):
    """Turns whose `_reset_envs` switches on only its starting slot, slot 1 joining on the
    first step: it relies on the core clearing the ended episode's slots before any reset."""

    def _reset_envs(self, idx):
        self.alive[idx, 0] = True

    def _step(self, cont, disc):
        joining = self.t == 0
        self.alive[joining, 1] = True
        E = self.num_envs
        return np.zeros((E, 2), np.float32), np.zeros(E, np.float32), *np.zeros((2, E, 2), bool)


def test_every_reset_starts_from_empty_slots_as_an_auto_reset_does():
    """reset() mid-episode (after Gymnasium's TimeLimit, say) kept the last episode's agents
    alive, where an auto-reset cleared them first."""
    env = StartsOne()
    assert env.reset(seed=0).alive.tolist() == [[True, False]] * 2
    assert env.step({"discrete": np.zeros((2, 2, 2), np.int64)}).alive.all()
    assert env.reset().alive.tolist() == [[True, False]] * 2


def test_a_whole_row_flagged_terminated_as_the_group_ends_is_accepted():
    env = Flagging("row")
    env.reset(seed=0)
    noop = {"discrete": np.zeros((2, 2, 2), np.int64)}
    done = [env.step(noop).group_done.all() for _ in range(4)]
    assert done == [False, False, False, True]


class Rebinding(Turns):
    """Turns that assigns self.alive a new array, in `hook`, of the wrong dtype or shape."""

    def __init__(self, hook, array):
        self.hook, self.array = hook, array
        super().__init__()

    def _reset_envs(self, idx):
        super()._reset_envs(idx)
        if self.hook == "_reset_envs":
            self.alive = self.array.copy()

    def _step(self, cont, disc):
        out = super()._step(cont, disc)
        if self.hook == "_step":
            self.alive = self.array.copy()
        return out


@pytest.mark.parametrize("hook", ["_reset_envs", "_step"])
@pytest.mark.parametrize("array, got", [(np.ones((2, 2)), "float64 [2, 2]"),
                                        (np.ones(2, bool), "bool [2]")])
def test_a_hook_that_rebinds_alive_to_another_kind_of_array_is_named(hook, array, got):
    env = Rebinding(hook, array)
    with pytest.raises(ValueError, match=re.escape(f"Rebinding.{hook} made self.alive {got}: "
                                                   "it must stay bool [2, 2]")):
        env.reset(seed=0)
        env.step({"discrete": np.zeros((2, 2, 2), np.int64)})


class Paying(Turns):
    """Turns paying what it is given: `individual` to slot 0 of env 1 and `group` to env 1, on
    the episode's second step (float64, as a task computing in Python floats would)."""

    def __init__(self, individual=0.0, group=0.0, num_envs=2):
        super().__init__(num_envs)
        self.individual, self.group = individual, group

    def _step(self, cont, disc):
        second = self.t == 1
        _, _, terminated, truncated = super()._step(cont, disc)
        reward = np.zeros((self.num_envs, 2))
        reward[1, 0] = self.individual if second[1] else 0.0
        return reward, np.where(second, self.group, 0.0), terminated, truncated


@pytest.mark.parametrize("num_envs", [2, 40])  # one check for a few envs' rewards, one for many
@pytest.mark.parametrize("individual, group, what", [
    (np.nan, 0.0, "an individual reward of nan in env 1, slot 0 on step 2"),
    (-1e39, 0.0, "an individual reward of -inf in env 1, slot 0 on step 2"),  # float32 overflow
    (0.0, np.inf, "a group reward of inf in env 0 on step 2")])
def test_rewards_that_are_not_finite_in_float32_are_refused_naming_env_slot_and_step(
        individual, group, what, num_envs):
    env = Paying(individual, group, num_envs)
    env.reset(seed=0)
    noop = {"discrete": np.zeros((num_envs, 2, 2), np.int64)}
    env.step(noop)
    with pytest.raises(ValueError, match=re.escape(f"Paying._step gave {what} of its episode")):
        env.step(noop)


def test_finite_rewards_whose_sum_overflows_float32_are_accepted():
    env = Paying(3e38, 3e38)
    env.reset(seed=0)
    env.step({"discrete": np.zeros((2, 2, 2), np.int64)})
    step = env.step({"discrete": np.zeros((2, 2, 2), np.int64)})
    assert step.reward[1, 0] == np.float32(3e38) and (step.group_reward == np.float32(3e38)).all()


def test_actions_the_mask_forbids_are_refused_naming_env_agent_and_step():
    env = Turns()
    first = env.reset(seed=0)
    assert first.action_mask[0, 0, :3].tolist() == [True, True, False]
    moves = np.zeros((2, 2, 2), np.int64)
    moves[:, 1, 0] = 2  # player 1 waits: any move of its empty branch is passed on
    env.step({"discrete": moves})
    moves[:] = 0
    moves[:, 0, 0] = 2  # player 0 waits now; player 1 plays a move never allowed in env 1
    moves[1, 1, 0] = 2
    with pytest.raises(ValueError, match=r"\(branch 0: 2\) is not allowed by the action_mask "
                       r"\(allowed there: \[0, 1\]\) for env 1, agent 1 \(episode step 2\)"):
        env.step({"discrete": moves.astype(np.uint64)})  # any integer dtype is checked alike
    moves[1, 1, 0] = 0
    assert not env.step({"discrete": moves}).alive[:, 1].any()  # player 1 has left
    moves[:] = 0
    moves[:, 1, 0] = 2  # forbidden for the player who left: not checked
    assert env.step({"discrete": moves}).alive[:, 0].all()


def test_a_task_mask_of_the_wrong_shape_is_named():
    class Short(Turns):
        def _action_mask(self):
            return super()._action_mask()[..., :3]

    with pytest.raises(ValueError, match=r"Short._action_mask must return bools \[2, 2, 5\], "
                                         r"got bool \[2, 2, 3\]"):
        Short().reset(seed=0)


def test_actions_of_agents_that_are_not_alive_are_ignored():
    env = envs.make_group("Goal-v0", num_agents=2, action_sizes=(1, 0))
    g = env.reset(seed=0).obs[0][0, 0, 0]
    for _ in range(5):
        env.step({"continuous": np.array([[[g], [0.0]]], np.float32)})
    assert not env.alive[0, 0]
    env.step({"continuous": np.array([[[np.nan], [0.0]]], np.float32)})  # agent 0 has left


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=4),
       dtype=st.sampled_from([np.int64, np.int32, np.uint8, np.float32, np.float64, bool]))
def test_fuzzed_action_arrays_are_rejected_or_valid(shape, dtype):
    env = envs.make_group("Goal-v0", num_envs=2, num_agents=3)
    env.reset(seed=0)
    arr = np.zeros(shape, dtype=dtype)
    if tuple(shape) == (2, 3, 1) and np.dtype(dtype).kind in "iu":
        env.step({"discrete": arr})
    else:
        with pytest.raises(ValueError, match="discrete"):
            env.step({"discrete": arr})


@pytest.mark.parametrize("kw, error, match", [
    ({"num_agent": 3}, TypeError, r"unknown argument\(s\) \['num_agent'\]; valid: .*num_agents"),
    ({"num_agents": 0}, ValueError, r"num_agents must be in \[1, 64\]"),
    ({"num_agents": 65}, ValueError, r"num_agents must be in \[1, 64\]"),
    ({"num_agents": 2.0}, TypeError, r"num_agents must be an int"),
    ({"action_sizes": (0, 0)}, ValueError, r"action_sizes"),
    ({"action_sizes": (1,)}, ValueError, r"action_sizes"),
    ({"action_sizes": (-1, 2)}, ValueError, r"action_sizes"),
    ({"step_size": 0}, ValueError, r"step_size"),
    ({"step_size": 1.5}, ValueError, r"step_size"),
    ({"step_size": True}, ValueError, r"step_size must be a number in \(0, 1\], got True"),
    ({"obs_size": 0}, ValueError, r"obs_size"),
    ({"reward_mode": "solo"}, ValueError, r"reward_mode must be one of \['group', 'mlagents'\]"),
    ({"shared_goal": "yes"}, TypeError, r"shared_goal"),
    ({"max_steps": 0}, ValueError, r"max_steps"),
    ({"num_envs": 0}, ValueError, r"num_envs"),
])
def test_bad_constructor_arguments(kw, error, match):
    with pytest.raises(error, match=match):
        envs.make_group("Goal-v0", **kw)


def test_unknown_task_lists_registered_ones():
    with pytest.raises(KeyError, match="Goal-v0"):
        envs.make_group("Gaol-v0")


def test_bad_seed():
    env = envs.make_group("Goal-v0")
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-1)
    with pytest.raises(TypeError, match="seed"):
        env.reset(seed="1")


def test_seeds_of_any_size_as_gymnasium_takes_them():
    """Gymnasium takes any non-negative int (its own np_random_seed is 128-bit): each seed has
    its own streams, a seed 2**64 above another included; seeds below 2**64 keep theirs."""
    seeds = [5, 2**63, 2**64 - 1, 2**64 + 5, 2**128 + 5, 2**200]
    keys = [tuple(env_keys(seed, 3)) for seed in seeds]
    assert len(set(keys)) == len(seeds)
    assert env_keys(np.uint64(2**64 - 1), 3).tolist() == list(keys[2])
    starts = []
    for seed in seeds:
        env = envs.make_group("Goal-v0", num_envs=16)
        starts.append(env.reset(seed=seed).obs[0].tobytes())
    assert len(set(starts)) == len(seeds)


class Sloppy(GroupEnv):
    """A task whose hooks return the wrong shapes (`mistake`), or the right ones (None)."""

    def __init__(self, mistake=None):
        obs = (ObsSpec("v", "vector", (3,)),)
        if mistake == "float_image":
            obs += (ObsSpec("i", "image", (8, 8, 3), 0.0, 255.0),)
        super().__init__(GroupSpec(2, obs, 0, (2,), 10), 4)
        self.mistake = mistake

    def _reset_envs(self, idx):
        self.alive[idx] = True

    def _step(self, cont, disc):
        E, A = self.alive.shape
        out = [np.zeros((E, A), np.float32), np.zeros(E, np.float32), np.zeros((E, A), bool),
               np.zeros((E, A), bool)]
        if self.mistake == "reward":
            out[0] = np.zeros(E, np.float32)
        if self.mistake == "group_reward":
            out[1] = 0.0
        if self.mistake == "three":
            out = out[:3]
        return tuple(out)

    def _observe(self, rows=slice(None)):
        obs = np.zeros((self.num_envs, 2, 3), np.float32)[rows]
        if self.mistake == "obs":
            return (obs[..., :2],)
        if self.mistake == "components":
            return (obs, obs)
        if self.mistake == "float_image":
            return (obs, np.zeros((self.num_envs, 2, 8, 8, 3), np.float32)[rows])
        if self.mistake == "float64":  # not what the views' Box(float32) spaces declare
            return (obs.astype(np.float64),)
        return (obs,)


@pytest.mark.parametrize("mistake, match", [
    ("obs", r"Sloppy._observe: component 'v' has shape \(4, 2, 2\), expected \(4, 2, 3\)"),
    ("components", r"Sloppy._observe returned 2 arrays for 1 observation components"),
    ("reward", r"Sloppy._step: reward has shape \(4,\), expected \(4, 2\)"),
    ("float_image", r"component 'i' must be an image, uint8 \(0-255\), got float32"),
    ("float64", r"Sloppy._observe: component 'v' must be float32, got float64"),
    ("group_reward", r"Sloppy._step: group_reward has shape float, expected \(4,\)"),
    ("three", r"Sloppy._step must return \('reward', 'group_reward', 'terminated', "
              r"'truncated'\), got 3 values"),
])
def test_a_task_hook_with_wrong_shapes_is_named(mistake, match):
    """A task author's shape mistake is an error naming the hook, not a crash in a learner."""
    env = Sloppy(mistake)
    with pytest.raises(ValueError, match=match):
        env.reset(seed=0)
        env.step({"discrete": np.zeros((4, 2, 1), np.int64)})
    ok = Sloppy()
    ok.reset(seed=0)
    assert ok.step({"discrete": np.zeros((4, 2, 1), np.int64)}).obs[0].shape == (4, 2, 3)


@pytest.mark.parametrize("make, match", [
    (lambda: ObsSpec("v", "vector", (0,)), r"observation 'v': each size of its shape \(0,\)"),
    (lambda: ObsSpec("v", "vector", (2, 3)),
     r"observation 'v': kind 'vector' has 1 dims, got shape \(2, 3\)"),
    (lambda: ObsSpec("i", "image", (8, 8)), r"observation 'i': kind 'image' has 3 dims"),
    (lambda: ObsSpec("v", "pixels", (3,)), r"observation 'v': kind must be one of"),
    (lambda: GroupSpec(2, (ObsSpec("v", "vector", (3,)),), 0, (), 10),
     r"a task needs at least one action"),
    (lambda: GroupSpec(0, (ObsSpec("v", "vector", (3,)),), 1, (), 10), r"num_agents must be"),
    (lambda: GroupSpec(2, (), 1, (), 10), r"obs must be a non-empty tuple of ObsSpec"),
    (lambda: GroupSpec(2, (ObsSpec("v", "vector", (3,)),), 0, (2, 0), 10),
     r"each branch size must be >= 1, got 0"),
    (lambda: GroupSpec(2, (ObsSpec("v", "vector", (3,)),), 1, (), 0), r"max_steps must be"),
])
def test_a_spec_a_learner_cannot_use_is_refused_when_made(make, match):
    """Zero-size or misshaped observations, or no action at all, crashed inside the trainer."""
    with pytest.raises(ValueError, match=match):
        make()


def test_step_flags_that_are_not_bools_are_named_at_the_first_step():
    class FloatFlags(Turns):
        def _step(self, cont, disc):
            reward, group, terminated, truncated = super()._step(cont, disc)
            return reward, group, terminated.astype(np.float32), truncated

    env = FloatFlags()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"FloatFlags._step: terminated has dtype float32, "
                                         r"expected bool"):
        env.step({"discrete": np.ones((2, 2, 2), np.int64)})


def test_observation_names_twice_and_inverted_bounds_are_refused():
    v = ObsSpec("v", "vector", (1,))
    with pytest.raises(ValueError, match="the name 'v' is given twice"):
        GroupSpec(num_agents=1, obs=(v, v), continuous_size=1, discrete_branches=(),
                  max_steps=5)
    with pytest.raises(ValueError, match="observation 'w': low 1.0 is above high -1.0"):
        ObsSpec("w", "vector", (1,), 1.0, -1.0)


def test_a_component_named_alive_is_refused_by_the_joint_views():
    from envs.spaces import joint_observation_space

    spec = GroupSpec(num_agents=1, obs=(ObsSpec("alive", "vector", (1,)),), continuous_size=1,
                     discrete_branches=(), max_steps=5)
    with pytest.raises(ValueError, match="named 'alive'.*rename it"):
        joint_observation_space(spec)


def test_image_bounds_default_to_the_uint8_range_and_stay_in_it():
    from envs.spaces import agent_observation_space

    image = ObsSpec("cam", "image", (20, 20, 3))
    assert (image.low, image.high) == (0.0, 255.0)  # so learners divide its pixels by 255
    assert (ObsSpec("v", "vector", (2,)).low, ObsSpec("v", "vector", (2,)).high) == (-1.0, 1.0)
    grid = ObsSpec("grid", "image", (20, 20, 1), 0, 1)
    spec = GroupSpec(num_agents=1, obs=(grid,), continuous_size=1, discrete_branches=(),
                     max_steps=5)
    assert agent_observation_space(spec).high.max() == 1
    with pytest.raises(ValueError, match="within the uint8 range 0..255"):
        ObsSpec("cam", "image", (20, 20, 3), 0, 300)
    with pytest.raises(ValueError, match="must be whole numbers"):  # uint8 spaces hold no 1.5
        ObsSpec("cam", "image", (7, 5, 1), 0.5, 1.5)


@pytest.mark.parametrize("args, message", [
    (("v", "vector", 4), r"observation 'v': shape must be a tuple of sizes, e.g. \(4,\)")])
def test_obs_spec_names_and_shapes_of_the_wrong_kind_are_refused_when_made(args, message):
    with pytest.raises(ValueError, match=message):
        ObsSpec(*args)


def test_a_component_named_action_mask_is_refused_by_the_pettingzoo_view():
    """PettingZoo's api_test and learners read a dict observation's 'action_mask' as the legal
    actions; a component of that name would be taken for one."""
    from envs.spaces import agent_observation_space

    spec = GroupSpec(num_agents=1, obs=(ObsSpec("v", "vector", (1,)),
                                        ObsSpec("action_mask", "vector", (3,))),
                     continuous_size=1, discrete_branches=(), max_steps=5)
    with pytest.raises(ValueError, match="named 'action_mask'.*rename it"):
        agent_observation_space(spec)


class Newcomer(GroupEnv):
    """Two agents; both leave at step 3 (fixed-length episodes: every env ends together, and
    with `env0_alone` env 0's next episode ends at its first step). `mistake`: one a newcomer
    makes."""

    env0_alone = False

    def __init__(self, num_envs=2, mistake=None):
        super().__init__(GroupSpec(2, (ObsSpec("v", "vector", (1,)),), 0, (2,), 100), num_envs)
        self.mistake, self.state = mistake, np.zeros((num_envs, 2, 1), np.float32)

    def _reset_envs(self, idx):
        if self.mistake != "no agent alive":
            self.alive[idx] = True
        self.state[idx] = 0.0

    def _step(self, cont, disc):
        E = self.num_envs
        self.state += 1.0
        end = self.alive & (self.t[:, None] == 2)
        if self.env0_alone and self.t[0] == 0:
            end[0] = self.alive[0]
        self.alive &= ~end
        reward = np.ones((E, 2), np.float64 if self.mistake == "float64" else np.float32)
        return reward, np.zeros(E, np.float32), end, np.zeros((E, 2), bool)

    def _observe(self, rows=slice(None)):
        if self.mistake == "view":
            return (self.state[rows],)
        if self.mistake == "ignores rows":
            return (self.state.copy(),)
        return (self.state[rows].copy(),)


@pytest.mark.parametrize("mistake, message", [
    ("view", "Newcomer._observe: component 'v' is a view of the task's own arrays"),
    ("no agent alive", "Newcomer._reset_envs left no agent alive in env 0"),
])
def test_a_newcomers_task_mistakes_are_named_at_reset(mistake, message):
    with pytest.raises(ValueError, match=message):
        Newcomer(mistake=mistake).reset(seed=0)


def test_observe_is_checked_until_a_reset_of_some_envs_only():
    """Fixed-length episodes end every env together: a task that ignores `rows` was only
    caught when some env first ended alone, by numpy's broadcast error naming nothing."""
    env = Newcomer(mistake="ignores rows")
    env.reset(seed=0)
    for _ in range(6):  # every env ends at steps 3 and 6, together
        env.step({"discrete": np.zeros((2, 2, 1), np.int64)})
    env.env0_alone = True
    with pytest.raises(ValueError, match=r"Newcomer._observe: component 'v' has shape "
                                         r"\(2, 2, 1\), expected \(1, 2, 1\)"):
        env.step({"discrete": np.zeros((2, 2, 1), np.int64)})


def test_rewards_come_back_float32_as_the_step_says():
    env = Newcomer(mistake="float64")
    env.reset(seed=0)
    step = env.step({"discrete": np.zeros((2, 2, 1), np.int64)})
    assert step.reward.dtype == step.group_reward.dtype == np.float32


def test_a_component_name_that_is_not_a_str_is_refused_by_the_views():
    """(poca's adapter takes a PettingZoo Dict with int keys; the views need str keys.)"""
    from envs.spaces import agent_observation_space, joint_observation_space

    spec = GroupSpec(num_agents=1, obs=(ObsSpec("v", "vector", (1,)), ObsSpec(3, "vector", (2,))),
                     continuous_size=1, discrete_branches=(), max_steps=5)
    for space in (agent_observation_space, joint_observation_space):
        with pytest.raises(ValueError, match="name must be a str for the views"):
            space(spec)


class Forwarding(Turns):
    """A task that forwards its arguments to its base (`**kwargs`), as subclasses do."""

    def __init__(self, num_envs=2, **kwargs):
        super().__init__(num_envs, **kwargs)


def test_a_task_taking_kwargs_gets_its_arguments_through_every_view():
    """check_kwargs read `**kwargs` as an argument named 'kwargs' and refused every other one;
    the task's own signature then checks them."""
    from envs.gymnasium import GroupGymEnv, GroupVectorEnv
    from envs.pettingzoo import GroupParallelEnv

    class Sized(Forwarding):
        def __init__(self, num_envs=2, size=1, **kwargs):
            self.size = size
            super().__init__(num_envs, **kwargs)

    assert GroupGymEnv(Sized, size=3).core.size == 3
    assert GroupParallelEnv(Sized, size=3).core.size == 3
    assert GroupVectorEnv(Sized, num_envs=2, size=3).core.size == 3
    with pytest.raises(TypeError, match=r"Sized got an unexpected keyword argument 'bogus': "
                                        r"unknown argument\(s\) \['bogus'\]; valid: "
                                        r"\['render_mode', 'flat', 'size'\]"):
        GroupGymEnv(Sized, bogus=1)

    from envs.goal import GoalGroup

    class MyGoal(GoalGroup):
        def __init__(self, num_envs=1, **kwargs):
            super().__init__(num_envs, **kwargs)

    assert GroupParallelEnv(MyGoal, num_agents=3).core.spec.num_agents == 3
    with pytest.raises(TypeError, match=r"MyGoal got an unexpected keyword argument 'num_agent': "
                                        r"unknown argument\(s\) \['num_agent'\]; "
                                        r"valid: \[.*'num_agents'"):  # its base's, named
        GroupParallelEnv(MyGoal, num_agent=3)


def test_reset_after_close_raises_also_when_the_next_start_is_at_hand():
    """After an episode end the views keep the core's next start; reset() served it from a
    closed env (and step() then raised)."""
    import gymnasium
    import pettingzoo

    import envs  # noqa: F401  (registers the ids)
    env = gymnasium.make("groupenvs/Goal-v0", num_agents=1, step_size=1.0)
    env.reset(seed=0)
    assert env.step(np.ones((1, 1), np.int64))[2]  # one step ends it
    env.close()
    with pytest.raises(RuntimeError, match="is closed"):
        env.reset()
    par = pettingzoo.make("parallel", "groupenvs/goal-v0", num_agents=1, step_size=1.0)
    par.reset(seed=0)
    par.step({"agent_0": 1})
    par.close()
    with pytest.raises(RuntimeError, match="is closed"):
        par.reset()
