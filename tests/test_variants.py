"""Goal's observation variants (memory, visual, entity lists) and rendering."""

import itertools
import sys
import warnings

import gymnasium
import numpy as np
import pettingzoo
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo import test as pzt

import envs
from envs.pettingzoo import GroupParallelEnv, aec_env
from envs.play import main as play_main

VARLEN = [dict(num_visual=v, num_vector=n, num_entity_lists=k, reward_mode="mlagents")
          for v, n, k in itertools.product((0, 1), (0, 1), (1, 2))]


def no_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    assert not caught, [str(w.message) for w in caught]


@pytest.mark.parametrize("task", sorted(t for t in envs.TASKS if t.startswith("Goal")))
def test_every_goal_variant_passes_both_api_checks(task):  # paper tasks: test_paper_tasks.py
    no_warnings(lambda: check_env(gymnasium.make(f"groupenvs/{task}").unwrapped))
    par = pettingzoo.make("parallel", envs.pettingzoo_id(task), num_agents=3)
    pzt.parallel_api_test(par, num_cycles=100)


@pytest.mark.parametrize("kw", VARLEN, ids=lambda k: f"vis{k['num_visual']}-vec{k['num_vector']}"
                                                     f"-ent{k['num_entity_lists']}")
def test_mlagents_var_len_combinations_pass_both_api_checks(kw):
    no_warnings(lambda: check_env(gymnasium.make("groupenvs/GoalEntities-v0", **kw).unwrapped))
    par = pettingzoo.make("parallel", "groupenvs/goal_entities-v0", **kw)
    assert isinstance(par.observation_space("agent_0"), gymnasium.spaces.Dict) or \
        sum(kw[k] for k in ("num_visual", "num_vector", "num_entity_lists")) == 1
    pzt.parallel_api_test(par, num_cycles=100)


def test_memory_variant_hides_the_goal_after_show_steps():
    env = envs.make_group("GoalMemory-v0", num_envs=64, num_visual=1, show_steps=3,
                          max_steps=50)
    step = env.reset(seed=0)
    goal = step.obs[0][:, :, 0].copy()
    assert set(np.unique(goal)) == {-1.0, 1.0}
    for t in range(6):
        vec, img = step.obs[0], step.obs[1]
        if t < 3:
            np.testing.assert_array_equal(vec[:, :, 0], goal)
            assert (img.reshape(64, 2, -1).max(-1) == 255).all()
        else:
            np.testing.assert_array_equal(vec[:, :, 0], 0.0)
            assert img.max() == 0
        np.testing.assert_array_equal(vec[:, :, 1:], 0.0)  # nobody finished: empty scoreboard
        step = env.step({"discrete": np.full((64, 2, 1), t % 2)})  # wiggle: nobody finishes
    with pytest.raises(ValueError, match="entity lists"):
        envs.make_group("GoalMemory-v0", num_entity_lists=1)


def test_no_fixed_pixel_reveals_the_goal_but_the_image_does():
    env = envs.make_group("GoalVisual-v0", num_envs=2048, num_agents=1, reward_mode="mlagents")
    step = env.reset(seed=0)
    goal = step.obs[0][:, 0, 0]
    images = np.concatenate([step.obs[1][:, 0], env.step(
        {"discrete": np.ones((2048, 1, 1), np.int64)}).obs[1][:, 0]])
    goals = np.concatenate([goal, goal])  # the second step keeps the goals (nobody finished)
    lit = images[..., 0] > 0  # [n, H, W]
    # best single-pixel rule: predict -1 if lit (or +1 if lit), else the other side
    per_pixel = np.maximum(((lit & (goals[:, None, None] < 0)) | (~lit & (goals[:, None, None]
                            > 0))).mean(0), ((lit & (goals[:, None, None] > 0)) |
                           (~lit & (goals[:, None, None] < 0))).mean(0))
    assert per_pixel.max() <= 0.6
    W, pixels = images.shape[2], images.astype(np.int64)
    brightness = pixels[..., :W // 2, :].sum((1, 2, 3)) - pixels[..., W // 2:, :].sum((1, 2, 3))
    np.testing.assert_array_equal(np.where(brightness > 0, -1.0, 1.0), goals)
    assert images.dtype == np.uint8 and images.shape[1:] == (20, 20, 3)


def test_entity_list_padding_rules():
    env = envs.make_group("GoalEntities-v0", num_envs=256, num_entity_lists=2, max_entities=7,
                          entity_size=4, reward_mode="mlagents")
    step = env.reset(seed=0)
    counts = []
    for _ in range(3):
        goal = step.obs[0][:, :, 0]
        for lists in step.obs[1:]:
            assert lists.shape == (256, 2, 7, 4) and lists.dtype == np.float32
            present = (lists ** 2).sum(-1) > 0.01  # how a learner finds present rows
            n = present.sum(-1)
            assert (n >= 1).all() and (n <= 7).all()
            np.testing.assert_array_equal(present, np.arange(7) < n[..., None])  # front-packed
            np.testing.assert_array_equal(lists[present], np.repeat(
                np.broadcast_to(goal[..., None], present.shape)[present][:, None], 4, 1))
            assert (lists[~present] == 0).all()
            counts.append(n)
        step = env.step({"discrete": np.ones((256, 2, 1), np.int64)})
    counts = np.concatenate([c.ravel() for c in counts])
    assert set(np.unique(counts)) == set(range(1, 8))  # every size occurs
    assert (step.obs[1] != step.obs[2]).any()  # the two lists are drawn independently


def test_variant_arguments_are_checked():
    with pytest.raises(ValueError, match="needs num_vector=1"):
        envs.make_group("Goal-v0", num_vector=0, num_visual=1)
    with pytest.raises(ValueError, match="at least one observation"):
        envs.make_group("Goal-v0", num_vector=0, reward_mode="mlagents")
    with pytest.raises(ValueError, match="num_visual must be in"):
        envs.make_group("GoalVisual-v0", num_visual=3)
    for size in ((20, 20, 2), ("a", 20, 3), (20.0, 20, 3), (3, 20, 3)):
        with pytest.raises(ValueError, match="visual_size must be"):
            envs.make_group("GoalVisual-v0", visual_size=size)


def test_rgb_array_frames_follow_the_state():
    a = GroupParallelEnv(render_mode="rgb_array", num_agents=2)
    b = GroupParallelEnv(render_mode="rgb_array", num_agents=2)
    a.reset(seed=0)
    b.reset(seed=0)
    first = a.render()
    assert first.dtype == np.uint8 and first.ndim == 3 and first.shape[2] == 3
    np.testing.assert_array_equal(first, b.render())
    a.step({"agent_0": 1, "agent_1": 1})
    moved = a.render()
    assert (moved != first).any()
    b.step({"agent_0": 1, "agent_1": 1})
    np.testing.assert_array_equal(moved, b.render())


def test_pettingzoo_render_test_and_human_mode():
    pzt.render_test(lambda render_mode=None: aec_env(render_mode=render_mode))
    env = gymnasium.make("groupenvs/Goal-v0", render_mode="human")
    env.reset(seed=0)
    assert env.render() is None
    env.step(env.action_space.sample())
    env.close()
    env.close()


def test_play_writes_a_frame_of_each_episodes_start_and_one_per_step(tmp_path, capsys):
    play_main(["groupenvs/GoalVisual-v0", "--episodes", "2", "--render", "rgb_array", "--save",
               str(tmp_path)])  # the Gymnasium ID, as the bare task name
    steps = [int(line.split(" in ")[1].split()[0]) for line in capsys.readouterr().out.splitlines()
             if line.startswith("episode ")]
    assert len(steps) == 2
    assert len(list(tmp_path.glob("frame_*.png"))) == sum(steps) + 2 > 3


def test_play_counts_the_group_reward_when_agents_that_left_report_none(monkeypatch):
    """With death_mode="absorb" the agents that left stay listed and report a group reward of 0
    (the first listed agent is often one of them): play's returns are what the core paid."""
    from envs.core import GroupEnv
    from envs.play import play

    paid, step = [], GroupEnv.step

    def recorded(self, actions):
        out = step(self, actions)
        paid.append(float(out.group_reward[0]))
        return out

    monkeypatch.setattr(GroupEnv, "step", recorded)
    returns = play("Goal-v0", 30, 0, {"death_mode": "absorb"})
    assert sum(paid) != 0 and sum(returns) == pytest.approx(sum(paid)), (returns, paid)


@pytest.mark.parametrize("task, held, expected", [
    ("DungeonEscape-v0", "K_DOWN", 2), ("PushBlock-v0", "K_LEFT", 3),
    ("BatonPass-v0", "K_RIGHT", 4), ("BatonPass-v0", "K_UP", 1), ("DungeonEscape-v0", None, 0),
    ("Goal-v0", "K_RIGHT", 1), ("Goal-v0", "K_LEFT", 0),
])
def test_keyboard_play_steers_agent_0_with_each_tasks_moves(monkeypatch, task, held, expected):
    """Grid tasks: each arrow is its move (0 stay, 1 up, 2 down, 3 left, 4 right), none held
    stays; Goal: left -, right +."""
    import pygame

    from envs.play import _keyboard_action

    env = GroupParallelEnv(task)
    pressed = {getattr(pygame, held)} if held else set()
    monkeypatch.setattr(pygame.event, "pump", lambda: None)
    monkeypatch.setattr(pygame.key, "get_pressed", lambda: type(
        "Keys", (), {"__getitem__": lambda self, key: key in pressed})())
    action = _keyboard_action(env.action_space("agent_0"), getattr(env.core, "ARROW_MOVES", None))
    assert np.asarray(action).tolist() == expected
    assert env.action_space("agent_0").contains(action)


@pytest.mark.parametrize("argv, message", [
    (["NoSuchTask-v0"], "unknown task 'NoSuchTask-v0'; registered: ["),
    (["Goal-v0", "--episodes", "0"], "--episodes must be >= 1, got 0"),
    (["Goal-v0", "--env-kwargs", "[3]"], "--env-kwargs must be a JSON object"),
    # conftest runs pygame with SDL_VIDEODRIVER=dummy: a window would silently show nothing
    (["Goal-v0", "--render", "human"], "--render human needs a display, but SDL_VIDEODRIVER"),
    (["Goal-v0", "--render", "rgb_array", "--save", "{file}"], "File exists"),
    (["Goal-v0", "--env-kwargs", '{"bogus": 3}'],
     "GoalGroup got an unexpected keyword argument 'bogus': unknown argument(s) ['bogus']"),
    (["Goal-v0", "--seed", "-1"], "--seed must be in [0, "),
    (["Goal-v0", "--env-kwargs", '{"render_mode": "human"}'], "give the render mode with "
                                                              "--render"),
])
def test_play_refuses_bad_input_before_playing(argv, message, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as stop:
        play_main([a.replace("{file}", str(tmp_path / "file")) for a in argv])
    assert stop.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err and "episode 0" not in captured.out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11's DISPLAY")
def test_a_display_with_no_server_behind_it_is_refused(monkeypatch):
    """A stale DISPLAY (an old ssh forward): SDL falls back to drawing off-screen without a
    word, and a played episode would show nowhere."""
    import pygame

    from envs.render import check_display

    monkeypatch.delenv("SDL_VIDEODRIVER", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("DISPLAY", ":987")  # no X server listens there
    pygame.display.quit()
    with pytest.raises(ValueError, match="no window could be opened on ':987'.*; do this"):
        check_display("do this")
    assert not pygame.display.get_init()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11's DISPLAY")
def test_a_display_driver_that_is_not_there_is_one_clear_error(monkeypatch):
    """SDL_VIDEODRIVER=x11 with no X server: pygame.error, not the ValueError a CLI reports in
    one line."""
    import pygame

    from envs.render import check_display

    monkeypatch.setenv("SDL_VIDEODRIVER", "x11")
    monkeypatch.setenv("DISPLAY", ":987")
    pygame.display.quit()
    with pytest.raises(ValueError, match="no window could be opened on ':987' \\("):
        check_display("do this")
