"""The headline score follows the env (group return where it pays one, team return otherwise),
and `poca play` shows and records `module:factory` envs."""

import json
import re
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv

from poca.cli import main
from poca.trainer import _MetricsWriter


class Scored(ParallelEnv):
    """Two agents, 5 steps; each is paid 1 per step it takes action 1 (no group reward)."""

    metadata = {"name": "scored_v0", "render_modes": ["rgb_array"], "render_fps": 10}
    steps_taken = 0  # over every instance: tells whether anything was played

    def __init__(self, render_mode=None):
        self.possible_agents = ["a_0", "a_1"]
        self.render_mode = render_mode
        self._obs, self._act = spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2)

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, list(self.possible_agents)
        return {a: np.zeros(2, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        Scored.steps_taken += 1
        self.t += 1
        obs = {a: np.array([self.t / 5, i], np.float32) for i, a in enumerate(self.agents)}
        rew = {a: float(actions[a]) for a in self.agents}
        ended = {a: self.t >= 5 for a in self.agents}
        self.agents = [] if self.t >= 5 else self.agents
        return obs, rew, ended, dict.fromkeys(ended, False), {a: {} for a in ended}

    def render(self):
        frame = np.zeros((30, 45, 3), np.uint8)  # odd sizes on purpose (mp4 wants even ones)
        frame[:, : 9 * self.t] = 200
        return frame


class Endless(Scored):
    """Scored without a time limit: its episodes never end."""

    def step(self, actions):
        obs, rew, _, trunc, infos = super().step(actions)
        self.agents = list(self.possible_agents)
        return obs, rew, dict.fromkeys(trunc, False), trunc, infos


class Growing(Scored):
    """Scored whose frames grow wider each step (a recording cannot hold that)."""

    def render(self):
        return np.zeros((30, 45 + self.t, 3), np.uint8)


@pytest.fixture(scope="module")
def third_party(tmp_path_factory):
    """A trained checkpoint of a PettingZoo env importable as `scored_pz:Scored`."""
    module = types.ModuleType("scored_pz")
    module.Scored, module.Growing, module.Endless = Scored, Growing, Endless
    sys.modules["scored_pz"] = module
    run = tmp_path_factory.mktemp("scored")
    yield run
    del sys.modules["scored_pz"]


def test_third_party_train_and_eval_lead_with_the_team_return(third_party, capsys):
    assert main(["train", "scored_pz:Scored", "--run-dir", str(third_party), "--no-progress",
                 "--max-steps", "800", "--num-envs", "4",
                 "--set", "hyperparameters.buffer_size=200",
                 "--set", "hyperparameters.batch_size=50"]) == 0
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if s.startswith("last 20 episodes"))
    assert line.index("team return") < line.index("group return"), line
    team = float(line.split("team return (sum of all rewards) ")[1].split(";")[0])
    assert 0 <= team <= 10 and line.endswith("mean group return +0.000")
    checkpoint = str(third_party / "checkpoints" / "latest.pt")
    before = Scored.steps_taken
    assert main(["eval", "scored_pz:Scored", "--checkpoint", checkpoint, "--episodes", "8",
                 "--json"]) == 0
    assert Scored.steps_taken - before == 8 * 5  # both returns from one pass of 8 episodes
    result = json.loads(capsys.readouterr().out)
    assert result["score"] == "team return" and result["group_mean"] == 0.0
    assert result["mean"] == result["team_mean"] > 0  # random-ish policies still score
    # what the numbers came from: enough to measure them again
    assert (result["checkpoint"], result["seed"], result["deterministic"]) == (
        checkpoint, 12345, False)
    assert result["agent_steps"] > 0 and result["env_kwargs"] == {}
    assert result["max_agents"] is None and result["max_episode_steps"] is None
    assert len(result["returns"]) == 8 and np.mean(result["returns"]) == pytest.approx(
        result["mean"])
    assert main(["eval", "scored_pz:Scored", "--checkpoint", checkpoint, "--episodes", "8"]) == 0
    assert capsys.readouterr().out.startswith("team return (sum of all rewards) over 8 episodes")
    assert main(["eval", "scored_pz:Scored", "--checkpoint", checkpoint, "--episodes", "1"]) == 0
    assert capsys.readouterr().out.startswith("team return (sum of all rewards) over 1 episode:")


@pytest.mark.parametrize("pays_group_reward", [True, False])
def test_progress_bar_leads_with_the_env_score_and_stops_at_its_total(pays_group_reward):
    writer = _MetricsWriter(None, True, total=1000, initial=0)
    trainer = SimpleNamespace(agent_steps=1180, episodes=3, episode_log=[(500, 0.5)],
                              team_log=[2.0], env=SimpleNamespace(
                                  pays_group_reward=pays_group_reward))
    stats = {"approx_kl": 0.01, "explained_variance_baseline": 0.5}
    writer.progress(trainer, stats)
    assert writer.bar.n == 1000  # the last rollout overshoots max_steps; the bar does not
    keys = writer.bar.postfix.split(", ")
    names = [k.split("=")[0] for k in keys if "return" in k]
    assert names == (["group_return", "team_return"] if pays_group_reward
                     else ["team_return", "group_return"])
    writer.close()


def test_play_module_factory_records_gif_and_checks_the_format_first(third_party, tmp_path,
                                                                      capsys):
    pytest.importorskip("PIL")
    from PIL import Image

    checkpoint = str(third_party / "checkpoints" / "latest.pt")
    if not (third_party / "checkpoints" / "latest.pt").exists():
        pytest.skip("needs the checkpoint trained by the train/eval test")
    gif = tmp_path / "scored.gif"
    assert main(["play", "scored_pz:Scored", "--checkpoint", checkpoint, "--episodes", "2",
                 "--record", str(gif)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"episode 1: team return [+-]\d+\.\d{3}; group return [+-]\d+\.\d{3}\n", out)
    with Image.open(gif) as image:
        assert image.n_frames == 12 and image.size == (45, 30)  # copy 0's own frames:
        image.seek(0)  # each episode's from its reset (t = 0: all black) to its last step
        assert not np.asarray(image.convert("RGB")).any()
        image.seek(1)
        assert np.asarray(image.convert("RGB")).any()
    before = Scored.steps_taken
    assert main(["play", "scored_pz:Scored", "--checkpoint", checkpoint,
                 "--record", str(tmp_path / "scored.avi")]) == 2
    assert ".gif or .mp4" in capsys.readouterr().err
    assert Scored.steps_taken == before and not (tmp_path / "scored.avi").exists()
    assert main(["play", "scored_pz:Scored", "--checkpoint", checkpoint,
                 "--record", str(tmp_path / "no_such_folder" / "scored.gif")]) == 2
    assert "is not a writable folder" in capsys.readouterr().err
    assert Scored.steps_taken == before
    (tmp_path / "a_folder.gif").mkdir()  # refused before playing, not written over at the end
    assert main(["play", "scored_pz:Scored", "--checkpoint", checkpoint,
                 "--record", str(tmp_path / "a_folder.gif")]) == 2
    assert "exists and is not a file that can be overwritten" in capsys.readouterr().err
    assert Scored.steps_taken == before
    assert main(["play", "scored_pz:Growing", "--checkpoint", checkpoint,
                 "--record", str(tmp_path / "growing.gif")]) == 2
    assert "episode 0, step 1: the frame is 46x30, the first was 45x30; a recording needs " \
           "frames of one size" in capsys.readouterr().err
    assert not (tmp_path / "growing.gif").exists()
    before = Scored.steps_taken
    # conftest runs pygame with SDL_VIDEODRIVER=dummy: no window can be shown, and play says so
    assert main(["play", "scored_pz:Scored", "--checkpoint", checkpoint,
                 "--render", "human"]) == 2
    assert "needs a display" in capsys.readouterr().err and Scored.steps_taken == before


def test_play_records_mp4_with_imageio(third_party, tmp_path, capsys):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    pytest.importorskip("imageio")
    checkpoint = third_party / "checkpoints" / "latest.pt"
    if not checkpoint.exists():
        pytest.skip("needs the checkpoint trained by the train/eval test")
    mp4 = tmp_path / "scored.mp4"
    assert main(["play", "scored_pz:Scored", "--checkpoint", str(checkpoint), "--episodes", "1",
                 "--record", str(mp4)]) == 0
    assert mp4.read_bytes()[4:8] == b"ftyp"  # an MP4 container
    # (imageio's ffmpeg reader leaks file handles, so count frames with ffmpeg itself)
    assert imageio_ffmpeg.count_frames_and_secs(str(mp4)) == (6, 0.6)  # reset + 5 steps, 10 fps


def test_a_run_shorter_than_an_episode_says_so_rather_than_nan(tmp_path, capsys):
    # step_size 0.001: no agent reaches an edge within the 100-step time limit, so in 200
    # agent-steps (25 steps of 4 envs of 2 agents) no episode ends
    assert main(["train", "groupenvs/Goal-v0", "--env-kwargs", '{"step_size": 0.001}',
                 "--run-dir", str(tmp_path / "run"), "--no-progress", "--max-steps", "200",
                 "--num-envs", "4", "--set", "hyperparameters.buffer_size=100",
                 "--set", "hyperparameters.batch_size=50"]) == 0
    out = capsys.readouterr().out
    assert "0 episodes" in out and "+nan" not in out
    assert "no episode has ended yet (an episode is longer than this run" in out


def test_eval_and_play_cap_episodes_of_an_env_without_a_time_limit(third_party, tmp_path,
                                                                    capsys):
    pytest.importorskip("PIL")
    from PIL import Image

    checkpoint = third_party / "checkpoints" / "latest.pt"
    if not checkpoint.exists():
        pytest.skip("needs the checkpoint trained by the train/eval test")
    before = Scored.steps_taken
    assert main(["eval", "scored_pz:Endless", "--checkpoint", str(checkpoint), "--episodes",
                 "3", "--max-episode-steps", "7", "--json"]) == 0
    assert Scored.steps_taken - before == 3 * 7 and json.loads(capsys.readouterr().out)[
        "episodes"] == 3
    gif = tmp_path / "endless.gif"
    assert main(["play", "scored_pz:Endless", "--checkpoint", str(checkpoint), "--episodes",
                 "2", "--max-episode-steps", "4", "--record", str(gif)]) == 0
    with Image.open(gif) as image:
        assert image.n_frames == 2 * (1 + 4)
    assert main(["eval", "Goal-v0", "--checkpoint", str(checkpoint),
                 "--max-episode-steps", "7"]) == 2
    assert "Goal-v0 is a GroupEnv, whose spec.max_steps already ends" in capsys.readouterr().err
    out = tmp_path / "cmp"  # compare evaluates its runs the same way
    assert main(["compare", "scored_pz:Endless", "--critics", "attention", "--seeds", "1",
                 "--max-steps", "200", "--set", "num_envs=2", "--eval-episodes", "2",
                 "--max-episode-steps", "5", "--out", str(out)]) == 0
    assert json.loads((out / "attention-seed0.json").read_text())["eval_episodes"] == 2
    with pytest.raises(SystemExit):
        main(["eval", "scored_pz:Endless", "--checkpoint", str(checkpoint),
              "--max-episode-steps", "0"])
    assert "argument --max-episode-steps: must be >= 1, got 0" in capsys.readouterr().err


def test_eval_runs_many_episodes_in_batches_of_env_copies(third_party, batch_evaluation,
                                                          capsys):
    """A thousand copies of a big PettingZoo env do not fit in memory: at most EVAL_BATCH at
    once, in equal batches; up to EVAL_BATCH episodes, the same episodes as ever."""
    checkpoint = third_party / "checkpoints" / "latest.pt"
    if not checkpoint.exists():
        pytest.skip("needs the checkpoint trained by the train/eval test")
    argv = ["eval", "scored_pz:Scored", "--checkpoint", str(checkpoint), "--json"]
    assert main([*argv, "--episodes", "4"]) == 0
    whole = json.loads(capsys.readouterr().out)
    sizes = batch_evaluation()
    assert main([*argv, "--episodes", "4"]) == 0
    assert json.loads(capsys.readouterr().out) == whole and sizes == [4]
    sizes.clear()
    assert main([*argv, "--episodes", "10"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 10 and sizes == [4, 4, 4]


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_play_stopped_with_ctrl_c_keeps_what_was_played(tmp_path, suffix):
    """Each episode is reported as it ends; Ctrl-C leaves the recording of the episodes
    played (it was written only when all had played); an error leaves none."""
    pytest.importorskip("PIL" if suffix == ".gif" else "imageio_ffmpeg")
    from poca.adapters import make_env
    from poca.config import POCAConfig
    from poca.evaluate import check_record_path, play
    from poca.networks import Actor

    check_record_path(tmp_path / f"x{suffix}")  # its writer is installed
    env = make_env("Goal-v0", 1)
    actor = Actor(env.spec, POCAConfig().network_settings)
    ended = []

    def stop_after_two(episode, group, team):
        ended.append(episode)
        if episode == 1:
            raise KeyboardInterrupt

    stopped, whole = tmp_path / f"stopped{suffix}", tmp_path / f"whole{suffix}"
    with pytest.raises(KeyboardInterrupt):
        play(actor, env, 5, record=stopped, episode_done=stop_after_two)
    assert ended == [0, 1]
    play(actor, env, 2, record=whole)  # the same two episodes (seeds 0 and 1), played out
    assert stopped.stat().st_size == whole.stat().st_size > 0

    def fail(episode, group, team):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        play(actor, env, 2, record=tmp_path / f"failed{suffix}", episode_done=fail)
    assert not (tmp_path / f"failed{suffix}").exists()
    (tmp_path / f"kept{suffix}").write_bytes(b"the user's")  # an error leaves it as it was
    with pytest.raises(RuntimeError, match="boom"):
        play(actor, env, 2, record=tmp_path / f"kept{suffix}", episode_done=fail)
    assert (tmp_path / f"kept{suffix}").read_bytes() == b"the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"kept{suffix}", f"stopped{suffix}", f"whole{suffix}"])  # no partial file left


def test_play_deterministic_plays_what_eval_deterministic_scores(tmp_path, capsys):
    """An untrained (near-uniform) policy, so that sampled and most likely actions differ:
    play --deterministic plays eval --deterministic's episode, plain play does not."""
    from poca.trainer import train

    run = tmp_path / "run"
    train("Goal-v0", "goal", run_dir=run, until=lambda trainer: True)  # one update
    latest = str(run / "checkpoints" / "latest.pt")
    played = {}
    for flags in ([], ["--deterministic"]):
        assert main(["eval", "Goal-v0", "--checkpoint", latest, "--episodes", "1", "--seed",
                     "5", "--json", *flags]) == 0
        scored = json.loads(capsys.readouterr().out)["returns"]
        assert main(["play", "Goal-v0", "--checkpoint", latest, "--episodes", "6", "--seed",
                     "5", "--record", str(tmp_path / "x.gif"), *flags]) == 0
        played[bool(flags)] = [float(x) for x in re.findall(
            r"group return ([+-]\d+\.\d+)", capsys.readouterr().out)]
        if flags:
            assert played[True][0] == pytest.approx(scored[0], abs=1e-3)
    assert len(played[True]) == 6 and played[True] != played[False]


def test_play_of_a_pettingzoo_env_paying_a_group_reward_leads_with_it(tmp_path, capsys):
    """The adapter learns that an env pays a group reward from its infos, at a reset: play
    read it before any, and led with the team return where eval led with the group's."""
    pytest.importorskip("PIL")
    from poca.trainer import train

    factory, kwargs = "envs.pettingzoo:parallel_env", ["--env-kwargs", '{"task": "Goal-v0"}']
    run = tmp_path / "run"
    train(factory, "goal", {"task": "Goal-v0"}, run_dir=run, until=lambda trainer: True)
    latest = str(run / "checkpoints" / "latest.pt")
    assert main(["play", factory, *kwargs, "--checkpoint", latest, "--episodes", "2",
                 "--record", str(tmp_path / "x.gif")]) == 0
    assert re.search(r"episode 0: group return [+-]\d+\.\d{3}; team return",
                     capsys.readouterr().out)
