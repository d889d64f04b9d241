"""Independent runs (seeds x critics, seeds x cases) on an existing engine, never a scheduler
of our own: one after another, in local processes (`concurrent.futures`), or as Ray tasks
(`ray.remote` + `ray.wait`; `pip install "groupenvs[ray]"`).

Each run is a plain function call `fn(*job)` that returns its record, so the records are the
same whichever engine ran them (training is deterministic per seed); only wall times differ.
`done(record)` is called here, in the calling process, as each run finishes (in whatever order
they finish), so a caller writes every finished record at once and an interrupted sweep loses
only the runs still going.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context


def map_runs(fn: Callable, jobs: Sequence[tuple], workers: int = 1,
             ray_address: str | None = None, done: Callable[[object], None] | None = None
             ) -> list:
    """`[fn(*job) for job in jobs]`, in job order, calling `done(record)` as each one finishes.
    `ray_address` not None: as Ray tasks, one CPU each, on `ray.init(address=ray_address or
    None)` ("" starts Ray on this machine, or joins the cluster in RAY_ADDRESS); else in
    `workers` spawned processes (1: here, in turn). An exception from a run (Ctrl-C included)
    stops the sweep: runs not started yet are cancelled, those already going still finish and
    reach `done`, then the first exception is raised here."""
    done = done or (lambda record: None)
    if ray_address is not None:
        return _on_ray(fn, jobs, ray_address, done)
    if workers <= 1:
        records = []
        for job in jobs:
            records.append(fn(*job))
            done(records[-1])
        return records
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"))
    try:
        pending = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        return _gather(pending, lambda futures: wait(futures, return_when=FIRST_COMPLETED)[0],
                       lambda future: future.result(), lambda future: future.cancel(), done)
    finally:  # not waiting for the queued runs of a sweep that stops early
        pool.shutdown(wait=True, cancel_futures=True)


def _gather(pending: dict, finished: Callable, result: Callable, cancel: Callable,
            done: Callable) -> list:
    """The records of `pending` ({handle: job index}) in job order, passed to `done` as they
    finish; after the first failure the rest are cancelled (a run already going finishes)."""
    records, error = [None] * len(pending), None
    while pending:
        for handle in finished(list(pending)):
            index = pending.pop(handle)
            try:
                records[index] = result(handle)
            except BaseException as err:  # a run's own error, Ctrl-C, or cancelled after one
                if error is None:
                    error = err
                    for other in pending:
                        cancel(other)
                continue
            done(records[index])
    if error is not None:
        raise error
    return records


def _on_ray(fn: Callable, jobs: Sequence[tuple], address: str, done: Callable) -> list:
    try:
        import ray
    except ImportError:
        raise ImportError('--ray needs Ray: pip install "groupenvs[ray]"') from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address or None)
    try:
        task = ray.remote(num_cpus=1)(fn)
        pending = {task.remote(*job): i for i, job in enumerate(jobs)}
        return _gather(pending, lambda refs: ray.wait(refs, num_returns=1)[0], ray.get,
                       ray.cancel, done)
    finally:
        if started:
            ray.shutdown()
