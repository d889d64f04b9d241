"""Encoders for images and entity lists, and LSTM memory over chunked sequences."""

import pytest
import torch

from envs.core import GroupSpec, ObsSpec
from envs.goal import MLAGENTS_PARITY
from poca.adapters import make_env
from poca.config import MemorySettings, NetworkSettings, POCAConfig
from poca.encoders import EntityEncoder, ImageEncoder, ObservationEncoder, RunningNorm
from poca.evaluate import evaluate, load_actor
from poca.networks import Actor, Critic
from poca.trainer import train


def test_entity_encoder_ignores_padding_and_order():
    torch.manual_seed(0)
    enc = EntityEncoder([5, 3], self_size=4, hidden=16)
    own = torch.randn(6, 4)
    a, b = torch.randn(6, 7, 5), torch.randn(6, 4, 3)
    a[:, 5:] = 0  # padding rows
    b[:, 2:] = 0
    out = enc([a, b], own)
    perm = torch.tensor([3, 0, 4, 1, 2, 5, 6])  # shuffle the present rows only
    assert torch.allclose(enc([a[:, perm], b], own), out, atol=1e-5)
    a2 = a.clone()
    a2[:, 5:] = 1e-3  # still padding by the sum-of-squares rule, but not exactly zero
    assert torch.equal(enc([a2, b], own), out)
    assert not torch.allclose(enc([a, b], own + 1), out)


def test_observation_encoder_sizes_and_leading_dims():
    specs = (ObsSpec("vector", "vector", (3,)), ObsSpec("image_0", "image", (20, 20, 3)),
             ObsSpec("entities_0", "entities", (10, 5)))
    enc = ObservationEncoder(specs, hidden=8, normalize=True)
    assert enc.size == 3 + 8 + 8
    obs = [torch.randn(4, 2, 3), torch.randint(0, 256, (4, 2, 20, 20, 3), dtype=torch.uint8),
           torch.randn(4, 2, 10, 5)]
    assert enc(obs).shape == (4, 2, 19)


@pytest.mark.parametrize("kind, side", [("simple", 20), ("nature_cnn", 36), ("resnet", 15),
                                        ("fully_connected", 1)])
def test_image_encoders_accept_their_minimum_size(kind, side):
    enc = ImageEncoder((side, side, 3), 8, kind)
    assert enc(torch.zeros(2, side, side, 3, dtype=torch.uint8)).shape == (2, 8)
    if side > 1:
        with pytest.raises(ValueError, match=rf"needs images of at least {side}x{side} pixels, "
                                              r"got .*encoders that fit: \["):
            ImageEncoder((side - 1, side - 1, 3), 8, kind)


def test_an_image_encoder_too_large_for_memory_is_refused_before_it_is_built():
    """match3 keeps every pixel: on pistonball's 457x120 frame its dense layer would hold 969M
    weights, and the process was killed for memory with no message."""
    with pytest.raises(ValueError, match=r"vis_encode_type 'match3' leaves 7,566,912 features "
                                         r"of a 457x120 image, a dense layer of 968,564,736 "
                                         r"weights .*encoders that fit: \['simple', "
                                         r"'nature_cnn', 'resnet', 'fully_connected'\]"):
        ImageEncoder((457, 120, 3), 128, "match3")
    assert ImageEncoder((84, 84, 3), 128, "fully_connected").out[0].in_features == 84 * 84 * 3


def test_unknown_encoder_type():
    with pytest.raises(ValueError, match="vis_encode_type must be one of"):
        ImageEncoder((20, 20, 3), 8, "vit")


def test_lstm_chunks_from_stored_memories_match_one_pass():
    torch.manual_seed(0)
    spec = GroupSpec(2, (ObsSpec("vector", "vector", (3,)),), 1, (2,), 50)
    net = NetworkSettings(hidden_units=16, num_layers=1,
                          memory=MemorySettings(memory_size=8, sequence_length=4))
    actor, critic = Actor(spec, net), Critic(spec, net)
    torch.nn.init.normal_(critic.head.weight)  # the head starts at 0: give it something to show
    T, E, A = 12, 3, 2
    obs = [torch.randn(T, E, A, 3)]
    alive = torch.rand(T, E, A) > 0.2
    cont, disc = torch.randn(T, E, A, 1), torch.randint(0, 2, (T, E, A, 1))
    starts = torch.rand(T, E, A) < 0.15
    streams = torch.cat([torch.rand(T, E, 1) < 0.1, starts], -1)
    dist, _ = actor(obs, None, torch.zeros(E, A, 8), starts)
    v, b, (before, _) = critic(obs, cont, disc, alive, torch.zeros(E, 3, 8), streams)
    # actor memories as the trainer stores them while acting, one step at a time
    memory, stored = torch.zeros(E, A, 8), []
    for t in range(T):
        stored.append(torch.where(starts[t, ..., None], 0.0, memory))
        _, memory = actor([obs[0][t:t + 1]], None, memory, starts[t:t + 1])
    for t0 in range(0, T, 4):
        chunk = slice(t0, t0 + 4)
        d2, _ = actor([obs[0][chunk]], None, stored[t0], starts[chunk])
        assert torch.allclose(d2.logits[0], dist.logits[0][chunk], atol=1e-5)
        v2, b2, _ = critic([obs[0][chunk]], cont[chunk], disc[chunk], alive[chunk],
                           before[t0], streams[chunk])
        assert torch.allclose(v2, v[chunk], atol=1e-5)
        assert torch.allclose(b2, b[chunk], atol=1e-5)


MEMORY = {"hyperparameters.learning_rate": 1e-3, "hyperparameters.batch_size": 64,
          "hyperparameters.buffer_size": 128, "max_steps": 6000}


def test_memory_task_needs_the_lstm(tmp_path):
    env_kwargs = {"reward_mode": "mlagents", "num_agents": 1}
    with_lstm = train("GoalMemory-v0", POCAConfig.load("mlagents_test").override(
        {**MEMORY, "network_settings.memory": {"memory_size": 16, "sequence_length": 16}}),
        env_kwargs, run_dir=tmp_path / "lstm")
    without = train("GoalMemory-v0", POCAConfig.load("mlagents_test").override(MEMORY),
                    env_kwargs, run_dir=tmp_path / "plain")
    env = make_env("GoalMemory-v0", 400, env_kwargs)
    scores = {name: evaluate(load_actor(r.checkpoint, env), env, seed=1).mean()
              for name, r in (("lstm", with_lstm), ("plain", without))}
    assert scores["lstm"] >= 0.9 and scores["plain"] < 0.9, scores


def test_visual_and_entity_observations_train():
    config = POCAConfig.load("mlagents_test").override({"hyperparameters.learning_rate": 3e-4})
    for task, kw in (("GoalVisual-v0", {}), ("GoalEntities-v0", {"num_vector": 0})):
        result = train(task, config, {**MLAGENTS_PARITY, **kw})
        assert result.mean_return() >= 0.9, (task, result.episode_log[-20:])


def test_module_names_keep_valid_keys_and_escape_the_rest():
    from poca.encoders import _module_names

    assert _module_names(["a", "b.c", "type", "", 3, "obs_1"]) == [
        "a", "obs_1_", "obs_2", "obs_3", "obs_4", "obs_1"]


def test_running_norm_stays_finite_and_exact_for_huge_values_and_long_runs():
    """Observations near 1e17 (a timestamp in ns) overflowed float32 statistics after a few
    thousand steps; a float32 count stops counting single steps past 2**24."""
    norm = RunningNorm(2)
    gen = torch.Generator().manual_seed(0)
    batches = [1.7e18 + 1e17 * torch.randn(4096, 2, generator=gen) for _ in range(20)]
    for x in batches:
        norm.update(x)
    # its prior is one sample of 0 with a squared deviation of 1 (as ML-Agents' normalizer)
    everything = torch.cat([torch.zeros(1, 2)] + batches).double()
    mean = everything.mean(0)
    assert torch.isfinite(norm.m2).all()
    torch.testing.assert_close(norm.mean, mean, rtol=1e-9, atol=0)
    torch.testing.assert_close(norm.m2, ((everything - mean) ** 2).sum(0) + 1, rtol=1e-9, atol=0)
    out = norm(batches[0][:3])
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    norm.count.fill_(2**24)
    norm.update(torch.zeros(1, 2))
    assert norm.count.item() == 2**24 + 1


def test_running_norm_loads_float32_statistics_of_earlier_checkpoints():
    old = {"count": torch.tensor(5.0), "mean": torch.tensor([1.0, 2.0]),
           "m2": torch.tensor([3.0, 4.0])}
    norm = RunningNorm(2)
    norm.load_state_dict(old)
    assert norm.mean.dtype == torch.float64 and norm.mean.tolist() == [1.0, 2.0]
