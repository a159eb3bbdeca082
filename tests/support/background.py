"""Tests whose work happens in other processes, started early and run beside the rest.

A test that builds or tests a small project (tests/test_failures.py) spends
its time waiting for a subprocess: run in turn, those waits kept one of the
two cores idle for about 25 s of the suite. Such work is declared here as a
*job*, a function of a fresh temporary folder, with ``@job``, which makes a
session fixture of the same name. After collection, the jobs that selected
tests ask for start one at a time, in the order the tests will need them
(tests/conftest.py calls :func:`start`); the fixture waits for its job's
result. A test run alone (``pytest -k``) gets the same result; the job then
starts when collection is done, or, if nothing started it, when the fixture
is asked for.

Each job runs in a process of its own (``python background.py MODULE NAME
FOLDER``, which imports the test module and calls the function), in a process
group of its own: the test session's Python runs in one thread (CPython
3.11's ``ast.parse`` is not thread-safe, python/cpython#106905); the thread
here only starts the processes and waits for them. Whatever ends the session,
no job outlives it: :func:`stop` ends each job's whole group (a ``mkdocs
serve`` it started too), and a job whose session died ends its group itself,
because it watches its standard input, which only the session holds open.

A job returns plain data (exit statuses, logs), pickled back to the session;
its assertions stay in the tests, which is where a failure is reported.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path

import pytest

_JOBS: dict[str, _Job] = {}
_queue: queue.SimpleQueue = queue.SimpleQueue()
_worker: threading.Thread | None = None
_folders: list[Path] = []
_running: dict[str, subprocess.Popen] = {}
_TESTS = Path(__file__).resolve().parent.parent


class JobFailed(Exception):
    """A job raised in its process: its traceback, as the process printed it."""


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
        """Run the job's process and wait for it (in the worker thread: no Python of the job runs here)."""
        if not self.future.set_running_or_notify_cancel():
            return
        folder = Path(tempfile.mkdtemp(prefix=f"pytest-job-{self.name}-"))
        _folders.append(folder)
        command = [sys.executable, __file__, self.work.__module__, self.name, str(folder)]
        # The test session's import path (pytest.ini's pythonpath, tests/ for `support`), as the job needs it.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_TESTS.parent), str(_TESTS)])}
        job = subprocess.Popen(command, stdin=subprocess.PIPE, env=env, start_new_session=True)
        _running[self.name] = job
        job.wait()
        job.stdin.close()
        _running.pop(self.name, None)
        self.future.set_result((job.returncode, folder / "result.pickle"))


def _result(name: str):
    """The job's result, unpickled here in the test's own thread; a job that raised raises here."""
    returncode, result = _JOBS[name].future.result(timeout=900)
    if not result.exists():
        raise JobFailed(f"the job {name} exited with {returncode} and left no result")
    outcome, value = pickle.loads(result.read_bytes())
    if outcome == "raised":
        raise JobFailed(f"the job {name} raised:\n{value}")
    return value


def _work_through_the_queue() -> None:
    while (item := _queue.get()) is not None:
        item.run()


def _ensure_worker() -> None:
    global _worker
    if _worker is None:
        # A daemon: an interrupted session does not wait for it (stop() ends the jobs' processes).
        _worker = threading.Thread(target=_work_through_the_queue, name="pytest-jobs", daemon=True)
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
        _JOBS[name].submit()
        return _result(name)

    fixture.__doc__ = work.__doc__
    return fixture


def names() -> list[str]:
    """The names of the jobs declared so far (each is a fixture)."""
    return list(_JOBS)


def start(items: Iterable[pytest.Item]) -> list[str]:
    """Start the jobs these tests ask for, in the tests' order; their names."""
    started = []
    for item in items:
        for name in getattr(item, "fixturenames", ()):
            if name in _JOBS and name not in started:
                started.append(name)
    if started:
        _ensure_worker()
        for name in started:
            _JOBS[name].submit()
    return started


def stop() -> None:
    """Cancel the jobs not started, end the process groups of those running, and remove the jobs' folders."""
    for registered in _JOBS.values():
        if registered.future is not None:
            registered.future.cancel()
    if _worker is not None:
        _queue.put(None)
    for job in list(_running.values()):
        _end_group(job.pid)
    for folder in _folders:
        shutil.rmtree(folder, ignore_errors=True)


def _end_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)


def _watch_the_session() -> None:
    """End this job's whole process group when the session that started it is gone (its pipe closes)."""
    sys.stdin.read()
    _end_group(os.getpgid(0))


def _run_job(module: str, name: str, folder: str) -> None:
    threading.Thread(target=_watch_the_session, daemon=True).start()
    # SIGTERM (from stop(), or from the watcher above) unwinds the job: its `finally` blocks stop what it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    importlib.import_module(module)  # its @job lines register its jobs in this process
    try:
        outcome = "returned", _JOBS[name].work(Path(folder))
    except BaseException:  # noqa: BLE001 (handed to the test that waits for it)
        outcome = "raised", traceback.format_exc()
    (Path(folder) / "result.pickle").write_bytes(pickle.dumps(outcome))


if __name__ == "__main__":
    # Through the module's own name: the test module's @job lines register there.
    from support import background

    background._run_job(*sys.argv[1:4])
