"""Tests whose work happens in other processes, started early and run beside the rest.

A test that builds or tests a small project (tests/test_failures.py) spends
its time waiting for a subprocess: run in turn, those waits kept one of the
two cores idle for about 25 s of the suite. Such work is declared here as a
*job*, a function of a fresh temporary folder, with ``@job``, which makes a
session fixture of the same name. After collection, the jobs that selected
tests ask for start in one background thread, one at a time, in the order the
tests will need them (tests/conftest.py calls :func:`start`); the fixture
waits for its job's result. A test run alone (``pytest -k``) gets the same
result; the job then starts when collection is done, or, if nothing started
it, when the fixture is asked for.

A job returns plain data (exit statuses, logs); its assertions stay in the
tests, which is where a failure is reported.
"""

from __future__ import annotations

import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path

import pytest

_JOBS: dict[str, _Job] = {}
_queue: queue.SimpleQueue = queue.SimpleQueue()
_worker: threading.Thread | None = None
_folders: list[Path] = []


class _Job:
    def __init__(self, name: str, work: Callable[[Path], object]):
        self.name, self.work = name, work
        self.future: Future | None = None

    def submit(self) -> Future:
        if self.future is None:
            self.future = Future()
            _queue.put(self)
        return self.future

    def run(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return
        folder = Path(tempfile.mkdtemp(prefix=f"pytest-job-{self.name}-"))
        _folders.append(folder)
        try:
            self.future.set_result(self.work(folder))
        except BaseException as error:  # noqa: BLE001 (handed to the test that waits for it)
            self.future.set_exception(error)


def _work_through_the_queue(after: threading.Event | None) -> None:
    if after is not None:
        after.wait(timeout=600)
    while (item := _queue.get()) is not None:
        item.run()


def _ensure_worker(after: threading.Event | None = None) -> None:
    global _worker
    if _worker is None:
        # A daemon: an interrupted session does not wait for a build nobody will read.
        _worker = threading.Thread(target=_work_through_the_queue, args=(after,), name="pytest-jobs", daemon=True)
        _worker.start()


def job(work: Callable[[Path], object]):
    """Declare ``work(folder)`` a job; the session fixture named like it returns its result."""
    name = work.__name__
    if name in _JOBS:
        raise ValueError(f"two jobs are named {name!r}: give one another name")
    _JOBS[name] = _Job(name, work)

    @pytest.fixture(name=name, scope="session")
    def fixture():
        _ensure_worker()
        return _JOBS[name].submit().result(timeout=900)

    fixture.__doc__ = work.__doc__
    return fixture


def start(items: Iterable[pytest.Item], after: threading.Event | None = None) -> list[str]:
    """Start the jobs these tests ask for, in the tests' order, once ``after`` is set; their names.

    tracemalloc counts every thread's allocations: the session holds the jobs
    back (``after``) until its memory-measuring tests have run.
    """
    started = []
    for item in items:
        for name in getattr(item, "fixturenames", ()):
            if name in _JOBS and name not in started:
                started.append(name)
    if started:
        _ensure_worker(after)
        for name in started:
            _JOBS[name].submit()
    return started


def stop() -> None:
    """Cancel the jobs not started, and remove the jobs' folders (a job still running keeps what it holds open)."""
    for registered in _JOBS.values():
        if registered.future is not None:
            registered.future.cancel()
    if _worker is not None:
        _queue.put(None)
    for folder in _folders:
        shutil.rmtree(folder, ignore_errors=True)
