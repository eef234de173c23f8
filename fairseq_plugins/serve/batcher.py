"""The micro-batcher: requests that arrive together are decoded together.

Each accepted request is a :class:`Job` in one bounded queue (``max_queue_documents`` documents at most: beyond
that :meth:`MicroBatcher.submit` raises :class:`Overloaded` with a Retry-After estimate, never queueing more).
One worker takes the oldest job, waits at most ``max_wait`` seconds for more jobs with the same decoding options
(and detail flag) until it has ``max_batch_documents`` documents, then decodes them in one call of ``decode`` on
a thread of its own (the event loop keeps answering), and hands each job its own results, in order.  A job is
never split, so a request's documents are decoded in one call.

Draining (SIGTERM): :meth:`MicroBatcher.drain` refuses new jobs (:class:`Draining`); the jobs already accepted
are still decoded; :meth:`MicroBatcher.close` waits for them, then stops the worker.
"""
import asyncio
import math
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, Hashable, List, Optional

MAX_RETRY_AFTER = 60  # seconds


class Overloaded(Exception):
    """The queue is full; ``retry_after``: seconds after which it has probably room again."""

    def __init__(self, retry_after: int, queued: int):
        super().__init__(f"overloaded: {queued} documents are waiting; retry after {retry_after} s")
        self.retry_after = retry_after


class Draining(Exception):
    """The server is shutting down: it answers what it accepted and takes nothing new."""


@dataclass
class Job:
    documents: List[str]
    options: Dict
    details: bool
    future: asyncio.Future
    arrived: float  # loop time
    key: Hashable = field(init=False)

    def __post_init__(self):
        self.key = (tuple(sorted(self.options.items())), self.details)


class MicroBatcher:
    """``decode(documents, options, details) -> one result per document`` (blocking) run in batches."""

    def __init__(self, decode: Callable, max_batch_documents: int = 64, max_wait: float = 0.01,
                 max_queue_documents: int = 256, metrics=None):
        self.decode = decode
        self.max_batch_documents = max_batch_documents
        self.max_wait = max_wait
        self.max_queue_documents = max_queue_documents
        self.metrics = metrics
        self.draining = False
        self._pending: Deque[Job] = deque()
        self._queued = 0  # documents in _pending
        self._busy = False
        self._rate: Optional[float] = None  # documents/s of the recent batches
        self._arrival: Optional[asyncio.Event] = None
        self._worker: Optional[asyncio.Task] = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="summ-serve-decode")

    # ------------------------------------------------------------------ the request side
    def start(self) -> None:
        self._arrival = asyncio.Event()
        self._worker = asyncio.get_running_loop().create_task(self._run())

    async def submit(self, documents: List[str], options: Dict, details: bool = False) -> List:
        """The results of ``documents``, once decoded; Overloaded or Draining when refused."""
        if self.draining:
            raise Draining("the server is shutting down: it takes no new requests")
        if self._queued + len(documents) > self.max_queue_documents:
            raise Overloaded(self.retry_after(), self._queued)
        loop = asyncio.get_running_loop()
        job = Job(documents, options, details, loop.create_future(), loop.time())
        self._pending.append(job)
        self._count(len(documents))
        self._arrival.set()
        return await job.future

    def retry_after(self) -> int:
        """Seconds until the queue has probably been decoded, from the recent documents/s (1 to 60)."""
        if not self._rate:
            return 1
        return max(1, min(MAX_RETRY_AFTER, math.ceil(self._queued / self._rate)))

    @property
    def queued(self) -> int:
        """Documents waiting for a batch."""
        return self._queued

    @property
    def idle(self) -> bool:
        return not self._pending and not self._busy

    def drain(self) -> None:
        self.draining = True

    async def close(self) -> None:
        """Refuse new jobs, wait until every accepted one is answered, stop the worker and its thread."""
        self.drain()
        while not self.idle:
            await asyncio.sleep(0.01)
        if self._worker is not None:
            self._worker.cancel()
        self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ the worker
    def _count(self, change: int) -> None:
        self._queued += change
        if self.metrics is not None:
            self.metrics.queue_documents.set(self._queued)

    async def _run(self) -> None:
        while True:
            if not self._pending:
                self._arrival.clear()
                await self._arrival.wait()
                continue
            first = self._pending[0]
            await self._gather(first)
            jobs = self._take(first.key)
            if jobs:
                await self._decode(jobs)

    def _waiting_like(self, key) -> int:
        return sum(len(job.documents) for job in self._pending if job.key == key)

    async def _gather(self, first: Job) -> None:
        """Wait for jobs like ``first`` until a full batch or ``max_wait`` after it arrived."""
        loop = asyncio.get_running_loop()
        deadline = first.arrived + self.max_wait
        while self._waiting_like(first.key) < self.max_batch_documents:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            self._arrival.clear()
            try:
                await asyncio.wait_for(self._arrival.wait(), remaining)
            except asyncio.TimeoutError:
                return

    def _take(self, key) -> List[Job]:
        """The oldest jobs with ``key`` that fit in a batch (the first one always), out of the queue; jobs whose
        client is gone (cancelled) are dropped."""
        taken, documents = [], 0
        for job in list(self._pending):
            if job.future.cancelled():
                self._pending.remove(job)
                self._count(-len(job.documents))
                continue
            if job.key != key:
                continue
            if taken and documents + len(job.documents) > self.max_batch_documents:
                break
            taken.append(job)
            documents += len(job.documents)
            self._pending.remove(job)
            self._count(-len(job.documents))
        return taken

    async def _decode(self, jobs: List[Job]) -> None:
        documents = [document for job in jobs for document in job.documents]
        self._busy = True
        start = time.monotonic()
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.decode, documents, jobs[0].options, jobs[0].details)
        except Exception as err:  # every job of the batch gets the error (the app answers 500)
            for job in jobs:
                if not job.future.done():
                    job.future.set_exception(err)
            return
        finally:
            self._busy = False
        seconds = max(time.monotonic() - start, 1e-6)
        rate = len(documents) / seconds
        self._rate = rate if self._rate is None else 0.7 * self._rate + 0.3 * rate
        if self.metrics is not None:
            self.metrics.batch_documents.observe(len(documents))
            self.metrics.documents.inc(len(documents))
        offset = 0
        for job in jobs:
            if not job.future.done():
                job.future.set_result(results[offset:offset + len(job.documents)])
            offset += len(job.documents)
