"""summ-serve (fairseq_plugins/serve/): the real server on 127.0.0.1, spoken to over HTTP, with a tiny trained model.

Same summaries as generate.sh --input; every bad request a clear 4xx JSON error; overload 503 with Retry-After;
SIGTERM under load answers every accepted request and exits 0; /health, /metrics; the page at / in headless
Chromium (Debian's chromium package, driven through the DevTools protocol)."""
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
LIMITS = ["--max-documents", "8", "--max-document-chars", "3000", "--max-body-bytes", "40000", "--max-beam", "6",
          "--max-queue-documents", "8"]
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
    status, _, empty = server.post({"documents": [" ", MARKER_DOC]})
    assert status == 200 and empty["summaries"][0] == "" and empty["summaries"][1]
    assert empty["warnings"] == ["documents[0]: empty: its summary is empty"] and empty["inputs"][0]["tokens"] == 0
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
    (b'{"documents": ["a"], "options": {"beam_size": 2}}', 400, "bad_option",
     "unknown option 'beam_size'; did you mean 'beam'?"),
    (b'{"documents": ["a"], "options": {"coverage_penality": 2}}', 400, "bad_option",
     "unknown option 'coverage_penality'; did you mean 'coverage_penalty'?"),
    (b'{"documents": ["a"], "options": {"beam": "5"}}', 400, "bad_option", "option beam (beam size) must be an "
                                                                           "integer"),
    (b'{"documents": ["a"], "options": {"beam": true}}', 400, "bad_option", "must be an integer"),
    (b'{"documents": ["a"], "options": {"beam": 2.5}}', 400, "bad_option", "must be an integer"),
    (b'{"documents": ["a"], "options": {"block_immediate_repeat": true}}', 400, "bad_option",
     "option block_immediate_repeat (1 bans a token directly after itself, 0 does not) must be an integer"),
    (b'{"documents": ["a"], "options": {"block_immediate_repeat": 2}}', 422, "option_out_of_range",
     "block_immediate_repeat (1 bans a token directly after itself, 0 does not) = 2 is outside this server's "
     "limits [0, 1]"),
    (b'{"documents": ["a"], "options": {"beam": 7}}', 422, "option_out_of_range", "beam (beam size) = 7 is "
                                                                                  "outside this server's limits [1, 6]"),
    (b'{"documents": ["a"], "options": {"min_len": 30, "max_len_b": 10}}', 400, "bad_option",
     "min_len 30 is over max_len_b 10"),
    (b'{"documents": ["a"], "options": []}', 400, "bad_option", '"options" must be a JSON object'),
    (b'{"documents": ["a"], "strict": "yes"}', 400, "bad_request", "'strict' must be true or false"),
    (b'{"documents": []}', 400, "no_documents", '"documents" is empty: send at least one raw text'),
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


def error_counts(server) -> str:
    return "\n".join(line for line in server.get("/metrics")[2].splitlines()
                     if line.startswith("summ_serve_errors_total"))


def test_the_browsers_icon_request_is_no_error(server):
    before = error_counts(server)
    status, _, body = server.get("/favicon.ico")
    assert status == 204 and body == ""
    assert error_counts(server) == before
    assert 'summ_serve_requests_total{path="/favicon.ico",status="204"}' in server.get("/metrics")[2]


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


def test_overload_is_503_with_retry_after_from_a_bounded_queue(server):
    """At most 8 documents wait (--max-queue-documents 8): of 6 requests of 8 documents sent at once, the first is
    decoded, at most one more at a time waits for it, and the others are refused at once."""
    documents = [f"we propose method number {i} ." for i in range(8)]
    answers = concurrently(lambda _: server.post({"documents": documents, "options": SLOW}), list(range(6)))
    statuses = [status for status, _, _ in answers]
    refused = [(headers, answer) for status, headers, answer in answers if status == 503]
    assert set(statuses) == {200, 503}  # some decoded, some refused at once (how many depends on the timing)
    for headers, answer in refused:
        assert answer["reason"] == "overloaded" and int(headers["Retry-After"]) >= 1
        assert "documents are waiting" in answer["error"]
    metrics = server.get("/metrics")[2]
    assert f'summ_serve_errors_total{{reason="overloaded"}} {float(len(refused))}' in metrics
    assert json.loads(server.get("/health")[2])["queue_documents"] == 0  # nothing left behind


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
        signalled = time.monotonic()
        while not any("draining:" in line for line in draining.log):  # the server has taken the signal
            assert time.monotonic() < signalled + 30, "SIGTERM not handled within 30 s"
            time.sleep(0.01)
        refused = new_request_after_sigterm(draining)
        for thread in threads:
            thread.join(300)
        assert draining.wait(120) == 0
        assert [status for status, _, _ in results] == [200] * count
        assert [answer["summaries"] for _, _, answer in results] == [[expected]] * count
        assert refused
        print(f"after SIGTERM: {refused}")
        log = "".join(draining.log)
        assert f"draining: {count} accepted requests to answer" in log and "stopped" in log
    finally:
        draining.stop()


REFUSAL_SECONDS = 1  # the bound: a new request is refused within a second, whatever the server decodes


def new_request_after_sigterm(server) -> str:
    """How a request sent once the server has taken SIGTERM was refused, within REFUSAL_SECONDS: the connection
    (the server no longer listens) or 503.  A request sent before the server takes the signal is an accepted one
    and is answered; one accepted after it would wait behind the decoding ones, and that is the failure."""
    start = time.monotonic()
    while time.monotonic() < start + REFUSAL_SECONDS:
        try:
            status, _, answer = server.post({"documents": ["another document ."]}, timeout=REFUSAL_SECONDS)
        except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
            if "timed out" in str(err):
                break
            return f"connection refused after {time.monotonic() - start:.2f} s: {err}"
        if status == 503:
            assert answer["reason"] == "draining", answer
            return f"503 draining after {time.monotonic() - start:.2f} s"
        assert status == 200  # sent before the signal was handled
        time.sleep(0.01)
    raise AssertionError(f"requests were not refused within {REFUSAL_SECONDS} s of SIGTERM")


# ---------------------------------------------------------------------------------------------- the page, in Chromium
PAGE_DOCUMENT = "we propose a zyxwvut method for training neural networks , and the zyxwvut method works ."


def chromium_or_skip():
    import shutil

    binary = shutil.which("chromium")
    if binary is None:
        pytest.skip("Debian's chromium is not installed (scripts/setup.sh installs it when it runs as root)")
    return binary


class Browser:
    """Headless Chromium driven through the DevTools protocol (over aiohttp's WebSocket client)."""

    def __init__(self, binary, profile):
        import subprocess

        self.process = subprocess.Popen([binary, "--headless", "--no-sandbox", "--disable-gpu",
                                         "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True)
        for line in self.process.stderr:
            if line.startswith("DevTools listening on ws://"):
                self.port = int(line.split("ws://")[1].split("/")[0].split(":")[1])
                return
        raise AssertionError("chromium did not start its DevTools endpoint")

    def close(self):
        self.process.kill()
        self.process.wait()

    async def connect(self, session):
        async with session.get(f"http://127.0.0.1:{self.port}/json/list") as response:
            targets = await response.json(content_type=None)
        page = next(t for t in targets if t["type"] == "page")
        self.ws = await session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self.ids = 0

    async def call(self, method, **params):
        self.ids += 1
        await self.ws.send_json({"id": self.ids, "method": method, "params": params})
        while True:
            message = await self.ws.receive_json(timeout=120)
            if message.get("id") == self.ids:
                assert "error" not in message, message
                return message["result"]

    async def evaluate(self, expression):
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    async def wait_for(self, expression, timeout=120):
        import asyncio

        deadline = time.monotonic() + timeout
        while not await self.evaluate(expression):
            assert time.monotonic() < deadline, f"timed out waiting for {expression}"
            await asyncio.sleep(0.1)


READ_PAGE = """JSON.stringify({
  summary: document.getElementById("summary").textContent,
  error: document.getElementById("error").textContent,
  source: [...document.querySelectorAll("#source span")].map(s => s.textContent),
  copied: [...document.querySelectorAll("#source span.copied")].map(s => s.textContent),
  shaded: [...document.querySelectorAll("#source span")].filter(s => s.style.backgroundColor !== "").length,
  report: document.getElementById("report").textContent})"""


async def summarize_in_the_page(browser, url, upload):
    """Load the page, upload ``upload`` through its file input, set two options, submit; what the page shows."""
    import aiohttp

    async with aiohttp.ClientSession() as session:
        await browser.connect(session)
        await browser.call("Page.enable")
        await browser.call("Page.navigate", url=url + "/")
        await browser.wait_for('document.readyState === "complete" && document.getElementById("beam").value !== ""')
        root = await browser.call("DOM.getDocument")
        file_input = await browser.call("DOM.querySelector", nodeId=root["root"]["nodeId"], selector="#file")
        await browser.call("DOM.setFileInputFiles", nodeId=file_input["nodeId"], files=[str(upload)])
        await browser.wait_for('document.getElementById("text").value !== ""')  # the FileReader filled it in
        await browser.evaluate('document.getElementById("beam").value = "3"; '
                               'document.getElementById("max_len_b").value = "20"; '
                               'document.getElementById("submit").click(); true')
        await browser.wait_for('["done", ""].includes(document.getElementById("status").textContent) && '
                               '(document.getElementById("summary").textContent !== "" || '
                               'document.getElementById("error").textContent !== "")')
        return json.loads(await browser.evaluate(READ_PAGE))


def test_page_in_headless_chromium_summarizes_an_uploaded_document(server, tmp_path):
    import asyncio

    binary = chromium_or_skip()
    page = server.get("/")[2]
    assert "<script src" not in page and "http://" not in page and "https://" not in page  # no external assets
    upload = tmp_path / "document.txt"
    upload.write_text(PAGE_DOCUMENT, encoding="utf-8")
    browser = Browser(binary, tmp_path / "profile")
    try:
        shown = asyncio.run(summarize_in_the_page(browser, server.url, upload))
    finally:
        browser.close()
    assert shown["error"] == ""
    assert shown["summary"] == server.summaries([PAGE_DOCUMENT], beam=3, max_len_b=20)[0]
    assert shown["source"] == PAGE_DOCUMENT.split()  # the source as the model read it, one span per token
    assert shown["shaded"] == len(shown["source"])  # every token carries its copy weight
    status, _, answer = server.post({"documents": [PAGE_DOCUMENT], "options": {"beam": 3, "max_len_b": 20},
                                     "details": True})
    flags = answer["details"][0]["copied"]  # the tokens the copy distribution produced (test_visualize.py)
    assert shown["copied"] == [w for w, copied in zip(PAGE_DOCUMENT.split(), flags) if copied]  # outlined
    assert shown["report"].startswith(f"{len(PAGE_DOCUMENT.split())} tokens")
    assert "beam size" in page and "shortest summary in tokens" in page  # every option explained
    assert "Model: model (config short)" in page  # the folder and its config, not the folder alone
