"""summ-serve (fairseq_plugins/serve/): the real server on 127.0.0.1, spoken to over HTTP, with a tiny trained model.

Same summaries as generate.sh --input; every bad request a clear 4xx JSON error; overload 503 with Retry-After;
SIGTERM under load answers every accepted request and exits 0; /health, /metrics; the page in headless Chromium
(test_serve_page.py)."""
import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import run
from serving import MARKER_DOC, Server, sample_documents, tiny_model

pytestmark = pytest.mark.slow  # a model trained through train.sh, the server as a subprocess

OPTIONS = {"beam": 3, "max_len_b": 20}
GENERATION = ["--beam", "3", "--max-len-b", "20"]  # the same options for generate.sh
LIMITS = ["--max-documents", "8", "--max-document-chars", "3000", "--max-body-bytes", "40000", "--max-beam", "6"]
SLOW = {"beam": 4, "max_len_b": 40, "min_len": 40}  # a request that keeps the tiny model busy


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def server(model):
    server = Server(model[2], *LIMITS)
    yield server
    server.stop()


def concurrently(function, arguments):
    """function(argument) for each argument, all at once on threads; the results in order."""
    results = [None] * len(arguments)

    def call(i):
        results[i] = function(arguments[i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(arguments))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return results


def test_same_summaries_as_generate_sh_in_one_request_and_in_concurrent_ones(model, server, tmp_path):
    work, data, save, config = model
    documents = sample_documents()
    (tmp_path / "docs.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
    script = run(["./generate.sh", "-c", config, "--input", tmp_path / "docs.txt", data, save, *GENERATION])
    expected = script.stdout.split("\n")[:-1]
    assert len(expected) == len(documents)
    assert server.summaries(documents, **OPTIONS) == expected
    # one request per document, all at once: the batcher decodes them together, each gets its own summary
    singles = concurrently(lambda doc: server.summaries([doc], **OPTIONS)[0], documents)
    assert singles == expected
    metrics = server.get("/metrics")[2]
    assert "summ_serve_batch_documents_count" in metrics
    batches = float(metrics.split("summ_serve_batch_documents_count ")[1].split()[0])
    assert batches < 1 + len(documents)  # the concurrent ones were batched: fewer batches than requests


def test_answer_reports_options_and_truncation(server):
    long_document = " ".join(["we propose a new method for training neural networks ."] * 30)  # 300 tokens
    status, _, answer = server.post({"documents": [long_document, MARKER_DOC], "options": {"beam": 2}})
    assert status == 200 and len(answer["summaries"]) == 2
    assert answer["inputs"][0]["tokens"] == 300 and answer["inputs"][0]["truncated_tokens"] == 150
    assert answer["inputs"][1]["truncated_tokens"] == 0
    assert answer["warnings"] == ["documents[0]: truncated to 150 of its 300 tokens (150 not read; max_source_len "
                                  "of prep.json)"]
    assert answer["options"]["beam"] == 2 and answer["options"]["max_len_b"] == 60  # the model's own default
    status, _, refused = server.post({"documents": [MARKER_DOC, long_document], "strict": True})
    assert status == 422 and refused["reason"] == "lossy_input"
    assert "documents[1]: truncated to 150 of its 300 tokens" in refused["error"]


BAD_REQUESTS = [
    (b"", 400, "empty_body", "empty request body"),
    (b'{"documents": ["a"', 400, "invalid_json", "not valid JSON"),
    (b'{"documents": ["caf\xe9"]}', 400, "invalid_utf8", "not valid UTF-8: byte 0xe9 at offset 19"),
    (b"[1, 2]", 400, "bad_request", "must be a JSON object"),
    (b'{"docs": ["a"]}', 400, "bad_request", "unknown field 'docs'"),
    (b'{"options": {}}', 400, "bad_request", 'missing field "documents"'),
    (b'{"documents": "a text"}', 400, "bad_request", '"documents" must be a list of strings'),
    (b'{"documents": ["a", null]}', 400, "bad_request", "documents[1] must be a string"),
    (json.dumps({"documents": ["a ."] * 9}).encode(), 413, "too_many_documents",
     "9 documents in one request, over this server's limit of 8"),
    (json.dumps({"documents": ["short .", "x " * 2000]}).encode(), 413, "document_too_long",
     "documents[1] has 4000 characters, over this server's limit of 3000 (--max-document-chars): refused, not "
     "truncated"),
    (json.dumps({"documents": ["a"] * 4, "pad": "x" * 50000}).encode(), 413, "body_too_large",
     "over this server's limit of 40000 bytes"),
    (b'{"documents": ["a"], "options": {"beam_size": 2}}', 400, "bad_option", "unknown option 'beam_size'"),
    (b'{"documents": ["a"], "options": {"beam": "5"}}', 400, "bad_option", "option beam (beam size) must be an "
                                                                           "integer"),
    (b'{"documents": ["a"], "options": {"beam": true}}', 400, "bad_option", "must be an integer"),
    (b'{"documents": ["a"], "options": {"beam": 2.5}}', 400, "bad_option", "must be an integer"),
    (b'{"documents": ["a"], "options": {"beam": 7}}', 422, "option_out_of_range", "beam (beam size) = 7 is "
                                                                                  "outside this server's limits [1, 6]"),
    (b'{"documents": ["a"], "options": {"min_len": 30, "max_len_b": 10}}', 400, "bad_option",
     "min_len 30 is over max_len_b 10"),
    (b'{"documents": ["a"], "options": []}', 400, "bad_option", '"options" must be a JSON object'),
    (b'{"documents": ["a"], "strict": "yes"}', 400, "bad_request", "'strict' must be true or false"),
]


@pytest.mark.parametrize("body, status, reason, message", BAD_REQUESTS, ids=[r[2] + str(i) for i, r in
                                                                           enumerate(BAD_REQUESTS)])
def test_bad_request_is_a_clear_json_error(server, body, status, reason, message):
    got, headers, answer = server.post(body)
    assert (got, answer["reason"]) == (status, reason), answer
    assert message in answer["error"]
    assert headers["Content-Type"].startswith("application/json")


def test_unknown_path_and_method_are_json_errors(server):
    for path, method, status in (("/nope", "GET", 404), ("/summarize", "GET", 405), ("/health", "POST", 405)):
        got, _, answer = server.request(urllib.request.Request(server.url + path, method=method,
                                                               data=b"{}" if method == "POST" else None), 30)
        assert got == status and answer["reason"] == f"http_{status}" and path in answer["error"]


def test_health_and_metrics(server):
    status, _, body = server.get("/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    server.post(b"{not json")
    status, headers, text = server.get("/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    for name in ("summ_serve_requests_total", "summ_serve_errors_total", "summ_serve_request_seconds_bucket",
                 "summ_serve_batch_documents_bucket", "summ_serve_queue_documents", "summ_serve_documents_total",
                 "summ_serve_requests_in_progress"):
        assert f"\n{name}" in text, name
    assert 'summ_serve_errors_total{reason="invalid_json"}' in text
    assert 'summ_serve_requests_total{path="/summarize",status="400"}' in text


def test_overload_is_503_with_retry_after_from_a_bounded_queue(model):
    server = Server(model[2], "--max-queue-documents", "2", "--max-batch-documents", "1", "--max-wait-ms", "0")
    try:
        answers = concurrently(lambda _: server.post({"documents": ["we propose a method ."], "options": SLOW}),
                               list(range(8)))
        statuses = [status for status, _, _ in answers]
        refused = [(headers, answer) for status, headers, answer in answers if status == 503]
        assert set(statuses) == {200, 503} and statuses.count(200) >= 3  # one decoding, two queued at least
        for headers, answer in refused:
            assert answer["reason"] == "overloaded" and int(headers["Retry-After"]) >= 1
        metrics = server.get("/metrics")[2]
        assert f'summ_serve_errors_total{{reason="overloaded"}} {float(len(refused))}' in metrics
    finally:
        server.stop()


def test_sigterm_under_load_answers_every_accepted_request_and_exits_0(model, server):
    document = "we propose a new method for training neural networks ."
    expected = server.summaries([document], **SLOW)[0]  # the module's server, same model and options
    draining = Server(model[2], "--max-batch-documents", "1", "--max-wait-ms", "0")
    try:
        count = 4
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            draining.post({"documents": [document], "options": SLOW}))) for _ in range(count)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 60
        while json.loads(draining.get("/health")[2])["in_progress"] < count:  # all accepted
            assert time.monotonic() < deadline
            time.sleep(0.02)
        draining.process.send_signal(15)
        refused = new_request_after_sigterm(draining)
        for thread in threads:
            thread.join(300)
        assert draining.wait(120) == 0
        assert [status for status, _, _ in results] == [200] * count
        assert [answer["summaries"] for _, _, answer in results] == [[expected]] * count
        assert refused
        log = "".join(draining.log)
        assert f"draining: {count} accepted requests to answer" in log and "stopped" in log
    finally:
        draining.stop()


def new_request_after_sigterm(server) -> str:
    """How a request sent after SIGTERM was refused: the connection (the server no longer listens) or 503."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            status, _, answer = server.post({"documents": ["another document ."]}, timeout=30)
        except (urllib.error.URLError, ConnectionError) as err:
            return f"connection refused: {err}"
        if status == 503:
            assert answer["reason"] == "draining", answer
            return "503 draining"
        assert status == 200  # sent before the signal was handled
        time.sleep(0.01)
    raise AssertionError("requests were still accepted 30 s after SIGTERM")
