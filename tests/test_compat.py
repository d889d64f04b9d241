"""The views inside clients nobody here wrote: Gymnasium's vector wrappers, Stable-Baselines3,
SuperSuit, TorchRL. Each README "Use with other tools" snippet is executed from README.md itself.

Optional clients (`pip install -e ".[compat]"`) are imported with `pytest.importorskip`, so these
tests skip cleanly where a client is not installed. Select the group with `pytest -m compat`.
"""

import re
from pathlib import Path

import gymnasium
import numpy as np
import pettingzoo
import pytest
from gymnasium.vector import AutoresetMode

import envs  # noqa: F401

pytestmark = pytest.mark.compat

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The clients' networks are tiny: one thread is faster, and fair to a shared machine."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def readme_snippet(title: str) -> str:
    """The python block after the bold `title` line in README's "Use with other tools"."""
    text = README.read_text()
    section = text[text.index("### Use with other tools"):]
    match = re.search(r"\*\*" + re.escape(title) + r"\*\*.*?```python\n(.*?)```", section,
                      re.DOTALL)
    assert match, f"README has no snippet titled {title!r}"
    return match.group(1)


def run_snippet(title: str) -> dict:
    namespace: dict = {}
    exec(compile(readme_snippet(title), f"README.md: {title}", "exec"), namespace)
    return namespace


# --- Gymnasium (a core dependency: these always run) ---------------------------------------------


def test_readme_gymnasium_vector_wrappers():
    ns = run_snippet("Gymnasium vector wrappers")
    vec, obs = ns["vec"], ns["obs"]
    assert vec.unwrapped.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert obs.shape == (16, 3 * 3 + 3) and np.isfinite(obs).all()


@pytest.mark.parametrize("wrap", ["flatten", "filter", "normalize"])
def test_vector_observation_wrappers_take_the_native_make_vec(wrap):
    from gymnasium.wrappers import vector as wrappers

    vec = gymnasium.make_vec("groupenvs/GoalVisual-v0", num_envs=4, num_vector=1)
    vec = {"flatten": lambda v: wrappers.FlattenObservation(v),
           "filter": lambda v: wrappers.FilterObservation(v, ["image_0", "alive"]),
           "normalize": lambda v: wrappers.NormalizeObservation(
               wrappers.FlattenObservation(v))}[wrap](vec)
    obs, _ = vec.reset(seed=0)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(40):
        obs, _, term, trunc, _ = vec.step(rng.integers(0, 2, (4, 2, 1)))
        assert vec.observation_space.contains(obs) or wrap == "normalize"
        ends += (term | trunc).sum()
    assert ends > 0
    if wrap == "filter":
        assert set(obs) == {"image_0", "alive"}


def _trace_single(seed, actions, max_steps):
    """(obs, reward, terminated, truncated) of gymnasium.make, reset() once per episode."""
    env = gymnasium.make("groupenvs/Goal-v0", max_steps=max_steps)
    obs, _ = env.reset(seed=seed)
    out = [("start", obs)]
    for action in actions:
        obs, reward, term, trunc, _ = env.step(action)
        out.append((obs, float(reward), bool(term), bool(trunc)))
        if term or trunc:
            out.append(("start", env.reset()[0]))
    return out


def _trace_vector_env0(seed, actions, mode, max_steps):
    """The same, for env 0 of a native make_vec of 4 groups (the others act at random)."""
    vec = gymnasium.make_vec("groupenvs/Goal-v0", num_envs=4, max_steps=max_steps,
                             autoreset_mode=mode)
    first = lambda obs: {k: v[0] for k, v in obs.items()}  # noqa: E731
    obs, _ = vec.reset(seed=seed)
    out = [("start", first(obs))]
    rng = np.random.default_rng(1)
    pending = list(actions)
    while True:
        batch = rng.integers(0, 2, vec.action_space.shape)
        restarting = mode == AutoresetMode.NEXT_STEP and out[-1][0] != "start" and (
            out[-1][2] or out[-1][3])
        if not (pending or restarting):
            return out
        if not restarting:
            batch[0] = pending.pop(0)
        obs, reward, term, trunc, info = vec.step(batch)
        if restarting:  # NEXT_STEP: the reset step, action ignored
            assert reward[0] == 0 and not term[0] and not trunc[0]
            out.append(("start", first(obs)))
            continue
        done = bool(term[0] or trunc[0])
        view = info["final_obs"][0] if done and mode == AutoresetMode.SAME_STEP else first(obs)
        out.append((view, float(reward[0]), bool(term[0]), bool(trunc[0])))
        if done and mode == AutoresetMode.SAME_STEP:
            out.append(("start", first(obs)))


@pytest.mark.parametrize("max_steps", [12, 1])  # 1: the ignored NEXT_STEP step ends it again
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_make_and_make_vec_env0_play_the_same_episodes(mode, max_steps):
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 2, (2, 1)) for _ in range(150)]
    single = _trace_single(7, actions, max_steps)
    vector = _trace_vector_env0(7, actions, mode, max_steps)
    assert sum(1 for step in single if step[0] == "start") > 8  # many episodes, some truncated
    assert len(single) == len(vector)
    for i, (a, b) in enumerate(zip(single, vector, strict=True)):
        assert repr(a) == repr(b), f"step {i}: make {a} vs make_vec env 0 {b}"


# --- Stable-Baselines3 --------------------------------------------------------------------------


def test_readme_sb3_ppo_trains_on_the_flat_joint_view():
    pytest.importorskip("stable_baselines3")
    ns = run_snippet("Stable-Baselines3 on the joint view")
    model = ns["model"]
    assert model.num_timesteps >= 2048
    episodes = list(model.ep_info_buffer)
    assert len(episodes) >= 10 and all(np.isfinite(e["r"]) for e in episodes)
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    # a random policy scores about -0.56 here; the best possible is +0.90 (1 - 10 steps x 0.01)
    mean, _ = evaluate_policy(model, Monitor(ns["env"]), n_eval_episodes=10, deterministic=True)
    assert mean >= 0.5, f"SB3 PPO did not learn on the joint view: {mean:+.2f}"


@pytest.mark.filterwarnings("ignore:The `render_mode` attribute is not defined")  # SB3 on SuperSuit
def test_readme_supersuit_black_death_concat_vec_sb3_ppo():
    pytest.importorskip("supersuit")
    pytest.importorskip("stable_baselines3")
    ns = run_snippet("SuperSuit + Stable-Baselines3")
    model = ns["model"]
    assert model.num_timesteps >= 2048
    assert model.get_env().num_envs == 8  # 4 copies x 2 agents
    assert len(model.ep_info_buffer) >= 20  # every group episode ended and was reset


# --- TorchRL ------------------------------------------------------------------------------------

TORCHRL_WARNING = "ignore:PettingZoo in TorchRL is tested"


@pytest.mark.filterwarnings(TORCHRL_WARNING)
def test_readme_torchrl_rollout():
    pytest.importorskip("torchrl")
    ns = run_snippet("TorchRL")
    rollout = ns["rollout"]
    assert rollout.batch_size == (1000,) and rollout["next", "done"].sum() > 10


def test_torchrl_gymenv_builds_the_gymnasium_ids():
    """TorchRL's GymEnv passes frameskip to every env and drops it only when the error says
    Python's 'unexpected keyword argument' (our own wording made it re-raise)."""
    pytest.importorskip("torchrl")
    from torchrl.envs import GymEnv

    env = GymEnv("groupenvs/Goal-v0", flat=True)
    assert env.rollout(5, break_when_any_done=False).batch_size == (5,)


@pytest.mark.filterwarnings(TORCHRL_WARNING)
@pytest.mark.parametrize("death_mode", ["remove", "absorb"])
def test_torchrl_episodes_are_the_groups_episodes(death_mode):
    pytest.importorskip("torchrl")
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper
    from torchrl.envs.utils import check_env_specs

    par = pettingzoo.make("parallel", "groupenvs/goal-v0", num_agents=2, death_mode=death_mode)
    group_ends, group_rewards = [], []
    step = par.step

    def counting_step(actions):  # what the group itself did, under TorchRL
        out = step(actions)
        if out[0] and not par.agents:
            group_ends.append(1)
            group_rewards.append(next(iter(out[4].values()))["group_reward"])
        return out

    par.step = counting_step
    env = PettingZooWrapper(par, use_mask=death_mode == "remove", done_on_any=False,
                            categorical_actions=True, seed=0)
    check_env_specs(env, seed=0)
    group_ends.clear()
    group_rewards.clear()
    rollout = env.rollout(1000, break_when_any_done=False)
    done = rollout["next", "done"].reshape(-1)
    assert int(done.sum()) == len(group_ends) > 20  # one TorchRL episode per group episode
    if death_mode == "remove":  # agents that left are masked out, not sent zero observations
        assert (~rollout["next", "agent", "mask"]).any()
    # the group reward reaches TorchRL on the step each group ends
    paid = rollout["next", "agent", "info", "group_reward"][done].numpy()  # [ends, agents]
    assert all(np.isclose(row, r).any() for row, r in zip(paid, group_rewards, strict=True))
    assert any(r != 0 for r in group_rewards)
