import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import pytest  # noqa: E402  (after the SDL settings, before pygame can be imported)


@pytest.fixture
def batch_evaluation(monkeypatch):
    """Call it to make `poca.evaluate.EVAL_BATCH` 4 and record the `num_envs` of every
    `poca.adapters.make_env` call from then on (the list it returns)."""
    def install() -> list[int]:
        import poca.adapters
        import poca.evaluate

        sizes, make_env = [], poca.adapters.make_env

        def spy(env_id, num_envs, *args, **kwargs):
            sizes.append(num_envs)
            return make_env(env_id, num_envs, *args, **kwargs)

        monkeypatch.setattr(poca.adapters, "make_env", spy)
        monkeypatch.setattr(poca.evaluate, "EVAL_BATCH", 4)
        return sizes

    return install
