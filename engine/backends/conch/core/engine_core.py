"""The engine thread's core: it applies the inbox's commands, then steps -- schedule -> forward ->
verify/sample -> update -> observe -- and hands each step's deltas to the event loop. Its failure policy: a
failed step fails its batch; MAX_FAILED_STEPS failed steps in a row mean the engine itself is broken, and it
stops (fails everything held, refuses what comes later) rather than spin.

The engine thread lives while the model has work: after LINGER_S with none it parks (exits, and libgomp's
workers for it with it: engine/torch_threads.py says why a thread with no work must not keep them), and the
next command starts another. The first one also runs the model's load (`launch`).

Invariant: only the engine thread touches the scheduler, the runner and the sampler (one engine thread at a
time: a thread parks only under `_exit_lock` with nothing in the inbox, and `send` starts the next one under
the same lock); the asyncio side reaches them through `send` (commands.py) alone.
"""
from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from typing import Any, Callable

from conch.engine.errors import BackendUnavailable
from conch.engine.backends.conch.core.commands import Abort, Add, Call, Command
from conch.engine.backends.conch.kv import huge_pages
from conch.engine.backends.conch.runners.runner import Runner
from conch.engine.backends.conch.core.sampler import Sampler
from conch.engine.backends.conch.core.scheduler import Scheduler
from conch.engine.backends.conch.core.sequence import Sequence
from conch.engine.torch_threads import LINGER_S
from conch.engine.types import GenerationDelta

log = logging.getLogger(__name__)
MAX_FAILED_STEPS = 3          # steps that fail in a row before the engine thread gives up (fails all, stops)

Deliver = Callable[[list[GenerationDelta]], None]     # called on the event loop with a step's deltas


class EngineCore:
    def __init__(self, name: str, deliver: Deliver) -> None:
        self.name, self.deliver = name, deliver
        self.loop: asyncio.AbstractEventLoop | None = None    # set by the asyncio side before the thread starts
        self.runner: Runner                                   # these three once the engine thread has loaded
        self.scheduler: Scheduler
        self.sampler: Sampler
        self.broken: str | None = None    # why the engine thread stopped serving (the model is then not ready)
        self.stopping = False
        self.steps = 0
        self.step_seconds = 0.0           # wall time inside step(), and the part spent in the model's forward
        self.forward_seconds = 0.0
        self._inbox: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._wake = threading.Event()
        self._idle = False                # the last step scheduled nothing
        self._failures = 0                # steps failed in a row (across parked threads)
        self._exit_lock = threading.Lock()   # send against the engine thread's exit or parking
        self._exited = False
        self._parked = False                 # no engine thread runs until the next command
        self.thread: threading.Thread | None = None    # the engine thread now, or the last one

    # -- the asyncio side's doors ----------------------------------------------------------------------
    def send(self, command: Command) -> None:
        with self._exit_lock:
            if self._exited:
                if isinstance(command, Abort):                # nothing left to abort
                    return
                raise BackendUnavailable(f"model '{self.name}' is not ready: "
                                         f"{self.broken or 'its engine has stopped'}")
            self._inbox.put(command)
            if self._parked and not self.stopping:
                self._parked = False
                self._start(self.run)
        self._wake.set()

    def stop(self) -> None:
        with self._exit_lock:
            self.stopping = True
            parked, self._parked = self._parked, False
        self._wake.set()
        if parked:                                   # no thread to see it: nothing is held, refuse from now on
            self._fail_held(f"model '{self.name}' was unloaded")

    @property
    def serving(self) -> bool:
        """An engine thread runs, or is parked until the next command (not stopped, not broken, not dead)."""
        alive = self._parked or (self.thread is not None and self.thread.is_alive())
        return self.broken is None and not self._exited and alive

    def launch(self, first: Callable[[], bool]) -> None:
        """Start the engine thread: `first` there (the model's load: True to go on), then the step loop."""
        def main() -> None:
            if first():
                self.run()
            else:                                    # never served: refuse from now on
                with self._exit_lock:
                    self._exited = True

        self._start(main)

    def _start(self, target: Callable[[], Any]) -> None:
        self.thread = threading.Thread(target=target, name=f"engine-{self.name}", daemon=True)
        self.thread.start()

    # -- the engine thread -----------------------------------------------------------------------------
    def run(self) -> None:
        while not self.stopping and self.broken is None:
            self._drain_inbox()
            if not self.scheduler.has_work:
                if self._idle_wait() or not self._park():
                    continue
                return                                           # parked: the next command starts a thread
            try:
                deltas, self._failures = self.step(), 0
            except Exception as exc:                          # a failed step fails its batch, not the server
                self._failures += 1
                log.exception("engine step failed (%d in a row)", self._failures)
                if self._failures >= MAX_FAILED_STEPS:        # the engine, not one batch: stop, never spin
                    self.broken = f"the engine failed {self._failures} steps in a row: {exc}"
                deltas = self._fail_running(str(exc), everyone=self.broken is not None or not self.scheduler.running)
            if deltas:
                self._hand_over(deltas)
            elif self._idle:                                     # nothing could be scheduled: wait for news
                self._idle_wait()
        if self.broken is not None:
            log.error("model %s stopped serving: %s", self.name, self.broken)
        self._fail_held(self.broken or f"model '{self.name}' was unloaded")

    def step(self) -> list[GenerationDelta]:
        batch = self.scheduler.schedule()            # who leaves, who joins, who decodes this step
        self._idle = batch.empty
        if batch.empty:
            return self.scheduler.drain_dropped()
        start = time.perf_counter()
        logits = self.runner.forward(batch)          # the decode rows (and their proposals), the prefill chunks
        forwarded = time.perf_counter()
        deltas = self.scheduler.update(batch, lambda seqs, rows: self.sampler.sample(seqs, logits[rows]))
        elapsed = time.perf_counter() - start
        self.steps += 1
        self.forward_seconds += forwarded - start
        self.step_seconds += elapsed
        self.scheduler.observe(batch, elapsed)
        return deltas

    def _hand_over(self, deltas: list[GenerationDelta]) -> None:
        if self.loop is not None:                                # set before the thread started
            self.loop.call_soon_threadsafe(self.deliver, deltas)

    def _idle_wait(self) -> bool:
        """Waits up to LINGER_S for news (False: none came); first, while any is left, an idle thread's chore:
        a chunk of the weights moved into huge pages (huge_pages.py: tens of ms at most, so news waits no
        longer than that)."""
        if huge_pages.collapse_some():
            return True
        news = self._wake.wait(LINGER_S)
        self._wake.clear()
        return news

    def _park(self) -> bool:
        """Whether this thread may exit until the next command: nothing held, nothing in the inbox."""
        with self._exit_lock:
            if self.stopping or self.scheduler.has_work or not self._inbox.empty():
                return False
            self._parked = True
            return True

    def _fail_held(self, message: str) -> None:
        """After the loop has stopped: fail every sequence still held or in the inbox; `send` refuses from
        now on, so no request waits on a thread that is gone."""
        with self._exit_lock:
            self._exited = True
            self._drain_inbox()
        deltas = self._fail_running(message, everyone=True)
        if deltas:
            self._hand_over(deltas)

    def _drain_inbox(self) -> None:
        while True:
            try:
                command = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(command, Add):
                for seq in command.sequences:
                    self.scheduler.add(seq)
            elif isinstance(command, Call):
                self._call(command)
            else:
                self.scheduler.abort(command.request_id, command.index)

    def _call(self, command: Call) -> None:
        assert self.loop is not None
        try:
            result: Any = command.fn(*command.args)
        except Exception as exc:                    # the caller's request fails with it, not the engine
            result = exc
        self.loop.call_soon_threadsafe(settle, command.done, result)

    def _fail_running(self, message: str, everyone: bool = False) -> list[GenerationDelta]:
        """The forward pass itself failed (a failure one row causes ends only that row, in the sampler and
        Scheduler.update): the running batch ends with the error and the runner releases its KV. `everyone`: the
        waiting sequences too (the step failed before any ran, or the engine is stopping)."""
        failed = self.scheduler.running + (self.scheduler.take_waiting() if everyone else [])
        for seq in failed:
            seq.fail(message)
        deltas = [d for d in map(Sequence.drain, failed) if d is not None]
        self.scheduler.leave_all()
        return deltas


def settle(future: asyncio.Future, result: Any) -> None:
    """On the event loop: resolve `future` with `result`, or fail it when `result` is an exception (unless
    its awaiter has gone, cancelling it)."""
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)
