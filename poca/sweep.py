"""Independent runs (seeds x critics, seeds x cases) on an existing engine, never a scheduler
of our own: one after another, in local processes (`concurrent.futures`), or as Ray tasks
(`ray.remote` + `ray.get`; `pip install "groupenvs[ray]"`).

Each run is a plain function call `fn(*job)` that returns its record, so the records are the
same whichever engine ran them (training is deterministic per seed); only wall times differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context


def map_runs(fn: Callable, jobs: Sequence[tuple], workers: int = 1,
             ray_address: str | None = None) -> list:
    """`[fn(*job) for job in jobs]`, in order. `ray_address` not None: as Ray tasks, one CPU
    each, on `ray.init(address=ray_address or None)` ("" starts Ray on this machine, or joins
    the cluster in RAY_ADDRESS); else in `workers` spawned processes (1: here, in turn)."""
    if ray_address is not None:
        return _on_ray(fn, jobs, ray_address)
    if workers > 1:
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            return list(pool.map(fn, *zip(*jobs, strict=True)))
    return [fn(*job) for job in jobs]


def _on_ray(fn: Callable, jobs: Sequence[tuple], address: str) -> list:
    try:
        import ray
    except ImportError:
        raise ImportError('--ray needs Ray: pip install "groupenvs[ray]"') from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address or None)
    try:
        task = ray.remote(num_cpus=1)(fn)
        return ray.get([task.remote(*job) for job in jobs])
    finally:
        if started:
            ray.shutdown()
