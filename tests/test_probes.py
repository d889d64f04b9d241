"""The benchmark's probe tasks: CrowdCredit pays answers through the group reward and forced
random fumbles through individual rewards; HiddenHeadcount pays the cued agents' answers and a
bonus per blind helper present. One step each."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.probes import CrowdCredit, HiddenHeadcount


def test_one_step_pays_answers_to_the_group_and_forced_fumbles_to_each_agent():
    env = CrowdCredit(num_envs=5, num_agents=4, num_cues=3, fumble=2.0)
    first = env.reset(seed=7)
    cue = first.obs[0].argmax(-1)
    assert np.array_equal(first.obs[0].sum(-1), np.ones((5, 4)))  # one-hot cues
    mask = first.action_mask
    assert mask.shape == (5, 4, 3 + 2) and mask[..., :3].all()  # any answer is legal
    assert (mask[..., 3:].sum(-1) == 1).all()  # the fumble: only the forced one
    forced = mask[..., 4].astype(np.int64)
    right = (cue * 3 + 1) % 3
    answer = right.copy()
    answer[0] = (right[0] + 1) % 3  # env 0 answers all wrong
    answer[1, :2] = (right[1, :2] + 1) % 3  # env 1: half wrong
    out = env.step({"discrete": np.stack([answer, forced], -1)})
    np.testing.assert_allclose(out.group_reward, [0.0, 0.5, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(out.reward, 2.0 / 4 * (2 * forced - 1))
    assert out.terminated.all() and out.group_done.all() and out.alive.all()  # and reset
    forced = out.action_mask[..., 4].astype(np.int64)  # the next episode's fumbles
    with pytest.raises(ValueError, match=r"branch 1: .* not allowed by the action_mask .* "
                                         r"for env 0, agent 0"):
        env.step({"discrete": np.stack([answer, 1 - forced], -1)})  # the other fumble


@pytest.mark.parametrize("task", [CrowdCredit, HiddenHeadcount])
def test_seeds_give_different_episodes_and_the_same_seed_the_same(task):
    def episode(seed):  # cues, fumbles or who came
        step = task(num_envs=8).reset(seed=seed)
        return np.concatenate([step.obs[0].ravel(), step.action_mask.ravel(),
                               step.alive.ravel()])

    assert np.array_equal(episode(1), episode(1))
    assert not np.array_equal(episode(1), episode(2))


@pytest.mark.parametrize("kwargs, match", [({"num_agents": 0}, "num_agents"),
                                           ({"num_cues": 1}, "num_cues"),
                                           ({"fumble": -1.0}, "fumble")])
def test_bad_arguments_name_themselves(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CrowdCredit(**kwargs)


def test_hidden_headcount_pays_cued_answers_and_a_bonus_per_helper_present():
    env = HiddenHeadcount(num_envs=64, num_agents=6, num_cued=2, num_cues=3, present=0.5,
                          bonus=12.0)
    first = env.reset(seed=3)
    obs, alive, mask = first.obs[0], first.alive, first.action_mask
    assert alive[:, :2].all() and 0 < alive[:, 2:].mean() < 1  # helpers come at random
    assert not obs[:, 2:].any() and np.array_equal(obs[:, :2].sum(-1), np.ones((64, 2)))
    assert mask[:, :2].all() and np.array_equal(mask[:, 2:], np.broadcast_to([1, 0, 0], (64, 4, 3)))
    right = (obs[:, :2].argmax(-1) * 3 + 1) % 3
    answer = np.zeros((64, 6), np.int64)
    answer[:, :2] = right
    answer[:32, 0] = (right[:32, 0] + 1) % 3  # half the envs: one cued agent wrong
    out = env.step({"discrete": answer[..., None]})
    np.testing.assert_allclose(out.group_reward, np.r_[np.full(32, 0.5), np.ones(32)])
    np.testing.assert_allclose(out.reward, 12.0 / 6 * (alive & (np.arange(6) >= 2)))
    assert np.array_equal(out.terminated, alive) and out.group_done.all()


@pytest.mark.parametrize("kwargs, match", [({"num_cued": 0}, "num_cued"),
                                           ({"num_cued": 16}, "num_cued"),
                                           ({"present": 1.5}, "present"),
                                           ({"bonus": float("nan")}, "bonus")])
def test_hidden_headcount_bad_arguments_name_themselves(kwargs, match):
    with pytest.raises(ValueError, match=match):
        HiddenHeadcount(**kwargs)
