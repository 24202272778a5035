"""engine/torch_threads.py: jobs run on threads that exit once idle (their OpenMP workers with them), results
and errors reach the caller, up to `most` jobs run at once, and no job is left without a thread when jobs come
just as idle threads give up."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from conch.engine import torch_threads
from conch.engine.torch_threads import Lingering


@pytest.fixture
def short_linger(monkeypatch):
    monkeypatch.setattr(torch_threads, "LINGER_S", 0.02)


def _until(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


def test_a_job_runs_on_a_thread_of_its_own_and_errors_reach_the_caller(short_linger):
    pool = Lingering("t")
    assert pool.submit(threading.current_thread).result(5) is not threading.current_thread()
    with pytest.raises(ValueError, match="bad"):
        pool.submit(int, "bad").result(5)
    assert asyncio.run(pool.run(sum, [1, 2, 3])) == 6


def test_idle_threads_exit_and_the_next_job_starts_another(short_linger):
    pool = Lingering("t")
    first = pool.submit(threading.current_thread).result(5)
    assert _until(lambda: pool.threads == 0 and not first.is_alive())
    second = pool.submit(threading.current_thread).result(5)
    assert second is not first and pool.threads <= 1


def test_jobs_run_at_once_up_to_most(monkeypatch):
    monkeypatch.setattr(torch_threads, "LINGER_S", 30.0)      # the two threads still idle at the third job
    pool, started, release = Lingering("t", most=2), threading.Barrier(3, timeout=5), threading.Event()

    def job():
        started.wait()                         # returns only once both jobs and this test have arrived
        release.wait(5)
        return threading.current_thread()

    futures = [pool.submit(job) for _ in range(2)]
    started.wait()
    release.set()
    assert len({f.result(5) for f in futures}) == 2
    third = pool.submit(threading.current_thread)         # the two threads idle: one of them takes it
    assert third.result(5) in {f.result() for f in futures} and pool.threads == 2


def test_no_job_is_lost_while_threads_come_and_go(short_linger):
    pool = Lingering("t", most=3)
    for round_ in range(60):                   # submits land before, during and after the threads' linger
        futures = [pool.submit(pow, i, 2) for i in range(round_ % 4)]
        assert [f.result(5) for f in futures] == [i * i for i in range(round_ % 4)]
        time.sleep(0.02 * (round_ % 3) / 2)
    assert _until(lambda: pool.threads == 0)
