"""The HTTP service (aiohttp) and the ``summ-serve`` command.

    summ-serve MODEL_DIR [--host 127.0.0.1] [--port 8080] [--checkpoint checkpoint_best.pt] [--device cpu]
               [--quantize int8]
               [--max-documents 64] [--max-document-chars 100000] [--max-body-bytes 8388608]
               [--max-batch-documents 64] [--max-wait-ms 10] [--max-queue-documents 256] [--drain-timeout 60]

Routes:
  POST /summarize  {"documents": ["raw text", ...], "options": {...}, "strict": false, "details": false}
                   -> {"summaries": [...], "inputs": [{"tokens", "truncated_tokens", "overflow_words",
                       "unk_tokens"}, ...], "warnings": [...], "options": {the decoding options used}}
                   (with "details": true also "details": [...], the page's copy view of each document)
  GET /health      {"status": "ok", ...} (503 and "draining" while shutting down)
  GET /metrics     Prometheus text format (metrics.py)
  GET /            the page (page.py)

Every error is JSON ``{"error": message, "reason": reason}`` with a 4xx status (requests.py), 503 with
``Retry-After`` when the queue is full, 500 if decoding itself fails.  SIGTERM (or SIGINT) drains: the server
stops listening, answers new requests on open connections with 503, answers every request it had accepted (for
at most --drain-timeout seconds), then exits 0.  Exit status 2 when the model cannot be loaded or an option is
bad.
"""
import asyncio
import logging
import signal
import time
from typing import Dict, List

from aiohttp import web

from fairseq_plugins.serve.batcher import Draining, MicroBatcher, Overloaded
from fairseq_plugins.serve.metrics import Metrics
from fairseq_plugins.serve.page import copy_view, render_page
from fairseq_plugins.serve.requests import ApiError, Limits, OPTION_RULES, parse_request

PROG = "summ-serve"
logger = logging.getLogger("fairseq_plugins.serve")


class Service:
    """What the routes share: the summarizer, the limits, the batcher and the metrics."""

    def __init__(self, summarizer, limits: Limits, name: str, max_batch_documents: int = 64,
                 max_wait: float = 0.01, max_queue_documents: int = 256):
        self.summarizer = summarizer
        self.limits = limits
        self.name = name
        self.metrics = Metrics()
        self.defaults = {key: value for key, value in summarizer.generation.items() if key in OPTION_RULES}
        self.batcher = MicroBatcher(self.decode, max_batch_documents, max_wait, max_queue_documents, self.metrics)
        self.in_progress = 0  # POST /summarize requests in the batcher's hands

    def accepted(self, change: int) -> None:
        self.in_progress += change
        self.metrics.in_progress.set(self.in_progress)

    def decode(self, documents: List[str], options: Dict, details: bool) -> List:
        """(summary, InputReport, copy view or None) per document: one call of the hub (on the batcher's thread)."""
        if details:
            return [(d.text, d.input_report, copy_view(d))
                    for d in self.summarizer.summarize_with_details(documents, **options)]
        return [(text, report, None) for text, report in self.summarizer.summarize_with_reports(documents, **options)]


SERVICE = web.AppKey("service", Service)


# ---------------------------------------------------------------------------------------------- routes
async def summarize(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    start = time.monotonic()
    req = parse_request(await read_body(request), service.defaults, service.limits)
    if req.strict:
        await refuse_lossy(service, req.documents)
    service.accepted(1)
    try:
        results = await service.batcher.submit(req.documents, req.options, req.details)
    except Overloaded as err:
        raise ApiError(503, "overloaded", str(err), retry_after=err.retry_after) from None
    except Draining as err:
        raise ApiError(503, "draining", str(err)) from None
    finally:
        service.accepted(-1)
    service.metrics.latency.observe(time.monotonic() - start)
    return web.json_response(answer(results, req))


async def read_body(request: web.Request) -> bytes:
    try:
        return await request.read()
    except web.HTTPRequestEntityTooLarge as err:
        raise ApiError(413, "body_too_large", f"the request body is over this server's limit of "
                                              f"{request.app[SERVICE].limits.max_body_bytes} bytes "
                                              f"(--max-body-bytes): {err.text}") from None


async def refuse_lossy(service: Service, documents: List[str]) -> None:
    """"strict": true refuses a request with a document the model cannot read whole (422), before queueing."""
    reports = await asyncio.get_running_loop().run_in_executor(None, service.summarizer.input_reports, documents)
    lossy = [f"documents[{i}]: {report.describe()}" for i, report in enumerate(reports) if report.lossy]
    if lossy:
        raise ApiError(422, "lossy_input", f"refused (strict): {len(lossy)} of {len(documents)} documents cannot "
                                           f"be read whole: " + "; ".join(lossy[:5]))


def answer(results: List, req) -> Dict:
    inputs = [{"tokens": r.tokens, "truncated_tokens": r.truncated_tokens, "overflow_words": r.overflow_words,
               "unk_tokens": r.unk_tokens} for _, r, _ in results]
    body = {"summaries": [text for text, _, _ in results], "inputs": inputs,
            "warnings": [f"documents[{i}]: {r.describe()}" for i, (_, r, _) in enumerate(results)
                         if r.worth_a_warning],
            "options": req.options}
    if req.details:
        body["details"] = [view for _, _, view in results]
    return body


async def health(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    draining = service.batcher.draining
    return web.json_response({"status": "draining" if draining else "ok", "model": service.name,
                              "queue_documents": service.batcher.queued, "in_progress": service.in_progress},
                             status=503 if draining else 200)


async def metrics(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    return web.Response(body=service.metrics.text(), headers={"Content-Type": service.metrics.content_type})


async def page(request: web.Request) -> web.Response:
    service = request.app[SERVICE]
    option_help = {name: rule[3] for name, rule in OPTION_RULES.items()}
    return web.Response(text=render_page(service.defaults, service.limits, service.name, option_help),
                        content_type="text/html")


async def no_icon(request: web.Request) -> web.Response:
    """The browser's request for an icon: 204, no icon and no error."""
    return web.Response(status=204)


# ---------------------------------------------------------------------------------------------- errors, counts
def error_response(status: int, reason: str, message: str, retry_after=None) -> web.Response:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return web.json_response({"error": message, "reason": reason}, status=status, headers=headers)


@web.middleware
async def errors_as_json(request: web.Request, handler) -> web.StreamResponse:
    """Every error as JSON {"error", "reason"}, every answer counted by path and status."""
    service = request.app[SERVICE]
    route = request.match_info.route.resource
    path = route.canonical if route is not None else "other"
    try:
        response = await handler(request)
    except ApiError as err:
        service.metrics.errors.labels(err.reason).inc()
        response = error_response(err.status, err.reason, err.message, err.retry_after)
    except web.HTTPException as err:  # aiohttp's own: unknown path (404), wrong method (405)
        if err.status < 400:
            raise
        service.metrics.errors.labels(f"http_{err.status}").inc()
        response = error_response(err.status, f"http_{err.status}", f"{err.reason}: {request.method} {request.path}")
    except Exception as err:  # decoding failed: say so, keep serving
        logger.exception("%s %s failed", request.method, request.path)
        service.metrics.errors.labels("internal").inc()
        response = error_response(500, "internal", f"internal error: {type(err).__name__}: {err}")
    service.metrics.requests.labels(path, str(response.status)).inc()
    return response


# ---------------------------------------------------------------------------------------------- app, command
def make_app(service: Service) -> web.Application:
    app = web.Application(middlewares=[errors_as_json], client_max_size=service.limits.max_body_bytes)
    app[SERVICE] = service
    app.router.add_post("/summarize", summarize)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/", page)
    app.router.add_get("/favicon.ico", no_icon)

    async def start_batcher(app):
        app[SERVICE].batcher.start()

    async def close_batcher(app):
        await app[SERVICE].batcher.close()

    app.on_startup.append(start_batcher)
    app.on_cleanup.append(close_batcher)
    return app


async def serve(app: web.Application, host: str, port: int, drain_timeout: float) -> None:
    """Serve until SIGTERM or SIGINT, then drain: stop listening, refuse new requests, answer the accepted ones."""
    runner = web.AppRunner(app, shutdown_timeout=drain_timeout, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    stop = asyncio.Event()
    service = app[SERVICE]

    def on_signal():  # runs as soon as the loop reads the signal: no request queued after it is accepted
        service.batcher.drain()
        stop.set()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    bound_host, bound_port = runner.addresses[0][:2]
    logger.info("listening on http://%s:%d/ (POST /summarize, GET /health, GET /metrics, GET /)", bound_host,
                bound_port)
    await stop.wait()
    logger.info("draining: %d accepted requests to answer, no new ones", service.in_progress)
    await runner.cleanup()  # stops listening first, then waits for the accepted requests
    logger.info("stopped")
