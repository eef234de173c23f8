"""The service's Prometheus metrics (``GET /metrics``, text format), in a registry of its own per app.

    summ_serve_requests_total{path,status}    answered requests
    summ_serve_errors_total{reason}            refused or failed requests, by reason (invalid_json, overloaded...)
    summ_serve_request_seconds                 latency of POST /summarize (histogram)
    summ_serve_batch_documents                 documents per decoded batch (histogram)
    summ_serve_documents_total                 documents summarized
    summ_serve_queue_documents                 documents waiting for a batch
    summ_serve_requests_in_progress            accepted POST /summarize requests not answered yet
"""
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self):
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("summ_serve_requests", "Answered requests", ["path", "status"], registry=r)
        self.errors = Counter("summ_serve_errors", "Refused or failed requests", ["reason"], registry=r)
        self.latency = Histogram("summ_serve_request_seconds", "Latency of POST /summarize", registry=r,
                                 buckets=LATENCY_BUCKETS)
        self.batch_documents = Histogram("summ_serve_batch_documents", "Documents per decoded batch", registry=r,
                                         buckets=BATCH_BUCKETS)
        self.documents = Counter("summ_serve_documents", "Documents summarized", registry=r)
        self.queue_documents = Gauge("summ_serve_queue_documents", "Documents waiting for a batch", registry=r)
        self.in_progress = Gauge("summ_serve_requests_in_progress",
                                 "Accepted POST /summarize requests not answered yet", registry=r)

    def text(self) -> bytes:
        return generate_latest(self.registry)
