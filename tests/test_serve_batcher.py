"""The micro-batcher of summ-serve (fairseq_plugins/serve/batcher.py) in process: which requests are decoded
together, in what order, and how a full queue and a drain refuse.  ``decode`` is a plain function here (the
server's is one hub call), recording the batches it is given."""
import asyncio
import threading

import pytest

from fairseq_plugins.serve.batcher import Draining, MicroBatcher, Overloaded


class Recorder:
    """decode(documents, options, details): upper-cased documents; the batches it saw; ``gate`` holds it."""

    def __init__(self, fail=False):
        self.batches = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail = fail

    def __call__(self, documents, options, details):
        self.gate.wait(10)
        self.batches.append((list(documents), dict(options)))
        if self.fail:
            raise RuntimeError("decoding failed")
        return [document.upper() for document in documents]


def run(scenario):
    return asyncio.run(scenario())


def test_requests_that_arrive_together_are_decoded_together_in_order():
    decode = Recorder()

    async def scenario():
        batcher = MicroBatcher(decode, max_batch_documents=64, max_wait=0.2, max_queue_documents=64)
        batcher.start()
        jobs = [batcher.submit([f"doc {i}a", f"doc {i}b"], {"beam": 2}) for i in range(3)]
        results = await asyncio.gather(*jobs)
        await batcher.close()
        return results

    results = run(scenario)
    assert results == [[f"DOC {i}A", f"DOC {i}B"] for i in range(3)]  # each request its own results, in order
    assert decode.batches == [(["doc 0a", "doc 0b", "doc 1a", "doc 1b", "doc 2a", "doc 2b"], {"beam": 2})]


def test_batches_keep_options_apart_and_respect_the_maximum_size():
    decode = Recorder()

    async def scenario():
        batcher = MicroBatcher(decode, max_batch_documents=4, max_wait=0.2, max_queue_documents=64)
        batcher.start()
        jobs = [batcher.submit([f"d{i}", f"e{i}"], {"beam": 2}) for i in range(5)]
        jobs.append(batcher.submit(["other"], {"beam": 3}))
        results = await asyncio.gather(*jobs)
        await batcher.close()
        return results

    results = run(scenario)
    assert results[-1] == ["OTHER"] and results[0] == ["D0", "E0"]
    sizes = [(len(documents), options["beam"]) for documents, options in decode.batches]
    assert sorted(sizes) == [(1, 3), (2, 2), (4, 2), (4, 2)]  # never two options in one batch, never over 4
    beam2 = [doc for documents, options in decode.batches if options["beam"] == 2 for doc in documents]
    assert beam2 == [f"{x}{i}" for i in range(5) for x in "de"]  # first come, first decoded


def test_a_full_queue_refuses_with_retry_after_and_a_drain_answers_what_it_accepted():
    decode = Recorder()
    decode.gate.clear()  # the first batch stays in decode until the gate opens

    async def scenario():
        batcher = MicroBatcher(decode, max_batch_documents=2, max_wait=0, max_queue_documents=3)
        batcher.start()
        first = asyncio.ensure_future(batcher.submit(["a", "b"], {}))
        while batcher.idle or batcher.queued:  # the worker took the first job
            await asyncio.sleep(0.01)
        waiting = [asyncio.ensure_future(batcher.submit([x], {})) for x in "cde"]
        await asyncio.sleep(0.05)
        assert batcher.queued == 3
        with pytest.raises(Overloaded) as full:
            await batcher.submit(["f"], {})
        assert full.value.retry_after >= 1 and "3 documents are waiting" in str(full.value)
        batcher.drain()
        with pytest.raises(Draining):
            await batcher.submit(["g"], {})
        decode.gate.set()
        await batcher.close()  # returns once every accepted job is answered
        return await first, [await job for job in waiting]

    first, waiting = run(scenario)
    assert first == ["A", "B"] and waiting == [["C"], ["D"], ["E"]]
    assert [doc for documents, _ in decode.batches for doc in documents] == list("abcde")


def test_a_failed_decode_fails_every_request_of_its_batch():
    decode = Recorder(fail=True)

    async def scenario():
        batcher = MicroBatcher(decode, max_batch_documents=8, max_wait=0.2, max_queue_documents=8)
        batcher.start()
        outcomes = await asyncio.gather(batcher.submit(["a"], {}), batcher.submit(["b"], {}),
                                        return_exceptions=True)
        await batcher.close()
        return outcomes

    outcomes = run(scenario)
    assert [str(o) for o in outcomes] == ["decoding failed"] * 2 and len(decode.batches) == 1
