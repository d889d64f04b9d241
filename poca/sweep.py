"""Independent runs (seeds x critics, seeds x cases) on an existing engine, never a scheduler
of our own: one after another, in local processes (`concurrent.futures`), or as Ray tasks
(`ray.remote` + `ray.wait`; `pip install "groupenvs[ray]"`).

Each run is a plain function call `fn(*job)` that returns its record, so the records are the
same whichever engine ran them (training is deterministic per seed); only wall times differ.
`done(record)` is called here, in the calling process, as each run finishes (in whatever order
they finish), so a caller writes every finished record at once and an interrupted sweep loses
only the runs that were going.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context


def map_runs(fn: Callable, jobs: Sequence[tuple], workers: int = 1,
             ray_address: str | None = None, done: Callable[[object], None] | None = None
             ) -> list:
    """`[fn(*job) for job in jobs]`, in job order, calling `done(record)` as each one finishes.
    `ray_address` not None: as Ray tasks, one CPU each, on `ray.init(address=ray_address or
    None)` ("" starts Ray on this machine, or joins the cluster in RAY_ADDRESS); else in
    `workers` spawned processes (1: here, in turn).

    An exception from a run, or Ctrl-C (or, in processes, SIGTERM), stops the sweep and is
    raised here once the runs going at that moment are over: no further run starts, and the
    runs going are interrupted as by a Ctrl-C (each trainer stops, saved, at its next update)
    and waited for. In processes each worker gets a SIGINT, again every second while a run is
    still starting (POSIX; elsewhere the runs going finish), and a second Ctrl-C ends them with
    SIGTERM (a checkpoint being written is finished first); on Ray the tasks are cancelled
    (`ray.cancel`) and a second Ctrl-C stops waiting. A run that finishes all the same reaches
    `done`."""
    done = done or (lambda record: None)
    if ray_address is not None:
        return _on_ray(fn, jobs, ray_address, done)
    if workers <= 1:
        records = []
        for job in jobs:
            records.append(fn(*job))
            done(records[-1])
        return records
    # workers ignore SIGINT until a run's trainer takes it over (poca.runfolder.Interrupts): an
    # idle worker killed by a terminal's Ctrl-C would break the pool, which then SIGTERMs the
    # busy ones in the middle of saving their checkpoints
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"),
                               initializer=signal.signal, initargs=(signal.SIGINT,
                                                                    signal.SIG_IGN))
    submitted, stopping = [], False

    def submit(job):
        submitted.append(pool.submit(fn, *job))
        return submitted[-1]

    def stop(futures):
        nonlocal stopping
        stopping = True
        _interrupt(pool)

    def finished(futures):
        ready = wait(futures, timeout=1.0, return_when=FIRST_COMPLETED)[0]
        if stopping and not ready:  # a run still starting ignores SIGINT until its trainer
            _interrupt(pool)        # runs (poca.runfolder.Interrupts): tell it again
        return ready

    try:  # never more runs submitted than workers: a submitted run cannot be held back
        with _sigterm_as_ctrl_c():
            return _gather(jobs, submit, workers, finished, lambda future: future.result(),
                           stop, done)
    except BaseException:
        if any(not future.done() for future in submitted):  # runs still going:
            # after a second Ctrl-C, end them (a checkpoint being written is finished first:
            # the trainer holds SIGTERM while it saves); else (a signal inside done()) stop them
            _interrupt(pool, signal.SIGTERM if stopping else signal.SIGINT)
        raise
    finally:
        pool.shutdown(wait=True)


def _interrupt(pool: ProcessPoolExecutor, signum: int = signal.SIGINT) -> None:
    """`signum` to each worker of `pool`: SIGINT, as a terminal's Ctrl-C sends it, makes a run's
    trainer stop at its next update, saved, and an idle worker ignores it. Without this, a sweep
    stopped by one run's failure (or by a signal to this process alone) waited for the others'
    whole budgets. `_processes` is the executor's own table of workers: it has no public one."""
    if os.name != "posix":
        return
    workers = getattr(pool, "_processes", None) or {}
    for process in list(workers.values()):
        with contextlib.suppress(OSError):  # one that has just exited
            os.kill(process.pid, signum)


@contextlib.contextmanager
def _sigterm_as_ctrl_c():
    """SIGTERM to this process raises KeyboardInterrupt here, as Ctrl-C does, so that the runs
    going are stopped, saved, and waited for. By default SIGTERM ended this process alone and
    left its workers training on, orphaned, to the end of their budgets."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _gather(jobs: Sequence[tuple], submit: Callable, limit: int, finished: Callable,
            result: Callable, stop: Callable, done: Callable) -> list:
    """Run `jobs` with at most `limit` submitted at once; the records in job order, each
    passed to `done` as it finishes. After the first failure (a run's, or a Ctrl-C here) nothing
    more is submitted, `stop(handles still going)` is called, the runs going are waited for (a
    second Ctrl-C stops waiting) and those that finish reach `done`; then the failure is
    raised."""
    records, error, pending = [None] * len(jobs), None, {}
    queue = iter(enumerate(jobs))
    while True:
        while error is None and len(pending) < limit:
            index, job = next(queue, (None, None))
            if job is None:
                break
            pending[submit(job)] = index
        if not pending:
            break
        try:
            ready = finished(list(pending))
        except BaseException as err:  # Ctrl-C here, in the caller
            if error is not None:  # a second one: stop waiting for the runs going
                raise
            error = err
            stop(list(pending))
            continue
        for handle in ready:
            index = pending.pop(handle)
            try:
                records[index] = result(handle)
            except BaseException as err:  # a run's own error, or Ctrl-C
                if error is None:
                    error = err
                    stop(list(pending))
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
        try:
            ray.init(address=address or None)
        except ConnectionError as err:  # no cluster at that address: one line, not Ray's trace
            raise ConnectionError(
                f"--ray {address or ''}: no Ray cluster to join ({str(err).splitlines()[0]}); "
                "start one (`ray start --head`) or give --ray without an address to run on a "
                "local one") from None
    try:
        task = ray.remote(num_cpus=1)(fn)  # all submitted: Ray schedules them on its CPUs

        def result(ref):
            try:
                return ray.get(ref)
            except ray.exceptions.TaskCancelledError:  # how a task's Ctrl-C comes back
                raise KeyboardInterrupt("a run was interrupted or cancelled") from None

        return _gather(jobs, lambda job: task.remote(*job), len(jobs),
                       lambda refs: ray.wait(refs, num_returns=1)[0], result,
                       lambda refs: [ray.cancel(ref) for ref in refs], done)
    finally:
        if started:
            ray.shutdown()
