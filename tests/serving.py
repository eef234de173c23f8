"""Helpers of the tests of a trained model (test_serve.py, test_package.py, test_hub.py, ...): one tiny model trained
through preprocess.sh and train.sh per test session, and summ-serve started as a real subprocess on 127.0.0.1."""
import json
import re
import signal
import subprocess
import threading
import urllib.error
import urllib.request

from conftest import ROOT, command_env, run, slice_corpus

TRAIN_OPTIONS = ["--max-update", "3", "--max-tokens", "1500"]
# the main job's config with shorter sources and targets: a fast fixture (2 shared cores)
SHORT_CONFIG = ('source "$ROOT/configs/scitldr_small.conf"\n'
                "PREP_ARGS+=(--max-source-len 150 --max-target-len 30)\n")
MARKER_DOC = "the <oov-2> token appears here literally , with a zyxwvut word ."


def tiny_model(tmp_path_factory):
    """(work dir, DATA_DIR, SAVE_DIR, config file) of pgn_lstm_small trained 3 updates on 200 SciTLDR-A documents,
    with TensorBoard's event files in WORK/tensorboard; trained once per session (the directory is reused by every
    module that asks: none may write into it)."""
    work = tmp_path_factory.getbasetemp() / "serving-model"
    data, model, config = work / "data", work / "model", work / "short.conf"
    if not (model / "checkpoint_best.pt").is_file():
        raw = slice_corpus("scitldr", work / "raw", (("train", 200), ("valid", 6), ("test", 6)))
        config.write_text(SHORT_CONFIG, encoding="utf-8")
        run(["./preprocess.sh", "-c", config, raw, data])
        run(["./train.sh", "-c", config, data, model, *TRAIN_OPTIONS, "--tensorboard-logdir", work / "tensorboard"])
    return work, data, model, config


def sample_documents():
    """Documents of pairwise different token counts, an empty one and one with OOV words among them."""
    lines = (ROOT / "data" / "scitldr" / "test.src").read_text(encoding="utf-8").split("\n")[:3]
    tests = [" ".join(doc.split()[:words]) for doc, words in zip(lines, (100, 70, 40))]
    return [tests[0], "", MARKER_DOC, "we propose a new method for training neural networks .", tests[1], tests[2]]


class Server:
    """``summ-serve MODEL --port 0 OPTIONS`` as a subprocess; ``url`` once it listens (the port from its log)."""

    def __init__(self, model_dir, *options, timeout=120):
        self.log = []
        self.process = subprocess.Popen(["summ-serve", str(model_dir), "--port", "0", *map(str, options)],
                                        cwd=ROOT, env=command_env(), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = None
        self.listening = threading.Event()
        self.reader = threading.Thread(target=self.read_log, daemon=True)  # the pipe never fills up
        self.reader.start()
        if not self.listening.wait(timeout) or self.url is None:
            self.stop()
            raise AssertionError("summ-serve did not start:\n" + "".join(self.log))

    def read_log(self):
        for line in self.process.stderr:
            self.log.append(line)
            found = re.search(r"listening on (http://[0-9.]+:\d+)/", line)
            if found:
                self.url = found.group(1)
                self.listening.set()
        self.listening.set()

    def post(self, body, path="/summarize", timeout=120):
        """(status, headers, JSON answer) of POST ``body`` (bytes, or a value sent as JSON)."""
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        return self.request(urllib.request.Request(self.url + path, data=data, method="POST"), timeout)

    def get(self, path, timeout=30):
        return self.request(urllib.request.Request(self.url + path), timeout, as_json=False)

    @staticmethod
    def request(req, timeout, as_json=True):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                status, headers, raw = response.status, response.headers, response.read()
        except urllib.error.HTTPError as err:
            status, headers, raw = err.code, err.headers, err.read()
        return status, headers, (json.loads(raw) if as_json else raw.decode("utf-8"))

    def summaries(self, documents, **options):
        status, _, answer = self.post({"documents": documents, "options": options})
        assert status == 200, answer
        return answer["summaries"]

    def terminate(self, timeout=120) -> int:
        """SIGTERM, then the exit status; the rest of its log is in ``self.log``."""
        self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout=120) -> int:
        status = self.process.wait(timeout)
        self.reader.join(10)
        return status

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.reader.join(10)
