"""``summ-serve``: a batched HTTP summarization service on top of :mod:`fairseq_plugins.inference.hub`.

    summ-serve MODEL_DIR [--host 127.0.0.1] [--port 8080]      # a train.sh SAVE_DIR or a summ-package directory

The model is loaded once, by ``Summarizer.from_pretrained``, and every summary is made by ``Summarizer``: the
server adds no decoding path of its own, so a summary is the text ``generate.sh --input`` writes for the same
document and options.

  app.py       the routes (POST /summarize, GET /health, GET /metrics, GET /) and the command line
  requests.py  reading and checking a request body: every bad request is a 4xx with a JSON error
  batcher.py   the micro-batcher: requests that arrive together are decoded together, from a bounded queue
  metrics.py   the Prometheus metrics
  page.py      the page at GET /: paste or upload text, decoding options, the summary, copied words shown
"""
