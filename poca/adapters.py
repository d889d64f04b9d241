"""Environments for the trainer: everything becomes an `envs.core.GroupEnv`.

An environment ID is either one of ours (`groupenvs/Goal-v0` or `Goal-v0`) or a `module:attr`
path to a callable that takes `num_envs` (and keyword arguments) and returns a `GroupEnv`.
"""

from __future__ import annotations

import importlib

from envs.core import GroupEnv


def make_env(env_id: str, num_envs: int, env_kwargs: dict | None = None) -> GroupEnv:
    env_kwargs = dict(env_kwargs or {})
    if ":" in env_id:
        module_name, _, attr = env_id.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"cannot load environment {env_id!r}: {err}") from err
        env = factory(num_envs=num_envs, **env_kwargs)
        if not isinstance(env, GroupEnv):
            raise TypeError(f"{env_id} returned {type(env).__name__}, not an envs.core.GroupEnv")
        return env
    import envs

    try:
        return envs.make_group(env_id, num_envs=num_envs, **env_kwargs)
    except KeyError as err:
        raise ValueError(f"{err.args[0]}; or give a 'module:factory' path") from None
