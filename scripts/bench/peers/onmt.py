"""OpenNMT-py 3.5.1 as a peer in throughput.py (``--peers onmt``): its install, data, command lines and logs.

Install (``ensure_venv``): a virtual environment of its own under the bench's work directory
(WORK/peers/onmt/venv), made by the project's Python, that sees the project's packages through a ``.pth``
file (so it runs on the project's torch, and nothing it installs can replace them: pip runs with a constraints
file pinning the project's torch and numpy).  Everything comes from the package registry, pinned:
  * ``OpenNMT-py==3.5.1`` with ``--no-deps``: it declares torch<2.3 (which would pull a CUDA build of an old
    torch); its RNN models train and decode with torch 2.13.
  * the packages that its training and translation import at start-up (OpenNMT-py imports every module of
    onmt/transforms/ when it starts, whatever transforms a run uses), in RUNTIME_PACKAGES with the reason.
  * not installed, though declared: ctranslate2 (the CTranslate2 inference engine), flask and waitress
    (onmt_server), tensorboard (-tensorboard); pyyaml, six, regex and sacrebleu are already in the project's
    environment.
If any step fails, the OpenNMT-py rows are skipped with the reason (``PeerUnavailable``).

Models (``train_command``): the sizes of throughput.py where OpenNMT-py allows them: embeddings 128, a
bidirectional LSTM encoder of 2 x 256 (-enc_hid_size 512), one decoder layer, Bahdanau's additive attention
(-global_attention mlp, as pgn_lstm's), input feeding.  Its decoder size must equal the encoder's state size
(the decoder starts from the encoder's final states and attends with one size for both), so the decoder is
512, the closest to 256 it allows; ``hidden=256`` gives the other choice (encoder 2 x 128, decoder 256).
Copy + coverage: -copy_attn -reuse_copy_attn (one attention for both, as See et al.) -coverage_attn
-lambda_coverage 1.  In 3.5.1 -lambda_coverage only switches the coverage loss on, and the decoder does not pass
the coverage vector to its attention (eq 11's w_c c_i term is absent).
"""
import re
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict, List, Optional

ONMT = "OpenNMT-py==3.5.1"
RUNTIME_PACKAGES = {
    "pyonmttok==1.38.1": "vocabularies are pyonmttok.Vocab objects (onmt/inputters)",
    "configargparse==1.9.0": "option parsing (onmt/utils/parse.py)",
    "spacy==3.8.18": "imported by onmt/transforms/terminology.py at start-up; brings thinc, pydantic and others",
    "pyahocorasick==2.3.1": "imported by onmt/transforms/terminology.py and inlinetags.py",
    "rapidfuzz==3.14.6": "imported by onmt/transforms/fuzzymatch.py",
    "fasttext-wheel==0.9.2": "imported by onmt/transforms/clean.py",
}
DECODE_DRIVER = Path(__file__).resolve().parent / "onmt_decode.py"
READY = ".bench-ready"
VARIANTS = {
    "onmt": [],  # plain attention
    "onmt_copy_cov": ["-copy_attn", "-reuse_copy_attn", "-coverage_attn", "-lambda_coverage", "1"],
}
STEP = re.compile(r"Step\s+(\d+)(?:/\s*\d+)?; acc:.*?; (\d+)/\s*(\d+) tok/s;")
VOCAB = re.compile(r"\* tgt vocab size = (\d+)")
DECODED = re.compile(r"^BENCH-DECODE sentences=(\d+) seconds=([\d.]+) tokens=(\d+)$", re.M)
MARKER = re.compile(r"<oov-(\d+)>\Z")


class PeerUnavailable(Exception):
    """OpenNMT-py cannot be installed or run here; the message says why."""


# ---------------------------------------------------------------------------------------------- install
def _run(cmd, what: str, timeout: int = 1200) -> str:
    print("+", " ".join(map(str, cmd)), file=sys.stderr, flush=True)
    try:
        result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PeerUnavailable(f"{what}: {error}") from None
    if result.returncode != 0:
        raise PeerUnavailable(f"{what} failed ({result.returncode}): {(result.stderr or result.stdout)[-1500:]}")
    return result.stdout


def project_versions() -> Dict[str, str]:
    """The project's torch and numpy: the peer must run on these, never install others."""
    import numpy
    import torch

    return {"torch": torch.__version__.split("+")[0], "numpy": numpy.__version__}


def install_spec() -> str:
    """What a ready environment was made from (a change makes ensure_venv rebuild it)."""
    versions = project_versions()
    return "\n".join([ONMT, *RUNTIME_PACKAGES, *(f"{k}=={v}" for k, v in versions.items())]) + "\n"


def ensure_venv(work: Path) -> Path:
    """The python of a ready OpenNMT-py environment under WORK/peers/onmt/venv (made once).  Raises
    PeerUnavailable with the reason when it cannot be made or does not import."""
    venv = work / "peers" / "onmt" / "venv"
    python = venv / "bin" / "python"
    spec = install_spec()
    if (venv / READY).exists() and (venv / READY).read_text() == spec and python.exists():
        return python
    _run([sys.executable, "-m", "venv", "--clear", venv], "creating the OpenNMT-py virtual environment")
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   "locating its site-packages").strip()
    # The project's packages (torch, numpy, regex, pyyaml...) after the environment's own.
    Path(purelib, "project_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    constraints = venv / "constraints.txt"
    constraints.write_text("".join(f"{k}=={v}\n" for k, v in project_versions().items()))
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "-q", "-c", constraints]
    _run([*pip, "--no-deps", ONMT], f"pip install --no-deps {ONMT}")
    _run([*pip, *RUNTIME_PACKAGES], "pip install of OpenNMT-py's runtime imports")
    check = _run([python, "-c", "import onmt.bin.train, onmt.bin.translate, torch; print(torch.__version__)"],
                 "importing OpenNMT-py")
    wanted = project_versions()["torch"]
    if not check.strip().splitlines() or not check.strip().splitlines()[-1].startswith(wanted):
        raise PeerUnavailable(f"OpenNMT-py's environment runs torch {check.strip()!r}, not the project's {wanted}")
    (venv / READY).write_text(spec)
    return python


# ---------------------------------------------------------------------------------------------- data
def restore_markers(line: str, oov_words: List[str]) -> str:
    """The project's tokenized text with each ``<oov-K>`` marker replaced by the document's K-th OOV word, so
    OpenNMT-py sees the words and builds its own copy vocabulary."""
    tokens = []
    for token in line.split():
        found = MARKER.match(token)
        tokens.append(oov_words[int(found.group(1))] if found else token)
    return " ".join(tokens)


def prepare_text(prepared: Path, out: Path, decode_sentences: int) -> dict:
    """OpenNMT-py's copy of the benchmark's data, from summ-prepare's output (PREPARED: dict.txt, tok/):
    train.src/tgt and the first DECODE_SENTENCES sources of valid (the sentences fairseq decodes), markers
    restored; vocab.txt: the regular words of dict.txt ("word count" lines, markers left out).  Returns their
    paths by file name, and "regular_words": how many words vocab.txt has."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, limit in (("train", None), ("valid", decode_sentences)):
        oov = (prepared / "tok" / f"{split}.oov").read_text(encoding="utf-8").split("\n")
        sides = ("src", "tgt") if split == "train" else ("src",)
        for side in sides:
            lines = (prepared / "tok" / f"{split}.{side}").read_text(encoding="utf-8").splitlines()[:limit]
            name = f"{split}.{side}" if split == "train" else "decode.src"
            text = "".join(restore_markers(line, oov[i].split("\t") if oov[i] else []) + "\n"
                           for i, line in enumerate(lines))
            (out / name).write_text(text, encoding="utf-8")
            files[name] = out / name
    words = [line for line in (prepared / "dict.txt").read_text(encoding="utf-8").splitlines()
             if line and not MARKER.match(line.split()[0])]
    (out / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    files["vocab.txt"] = out / "vocab.txt"
    files["regular_words"] = len(words)
    return files


def write_config(path: Path, train_src: Path, train_tgt: Path) -> Path:
    """The YAML OpenNMT-py needs for its corpora (the -data option exists only in a config file)."""
    path.write_text(f"data:\n  corpus_1:\n    path_src: {train_src}\n    path_tgt: {train_tgt}\n    weight: 1\n")
    return path


# ---------------------------------------------------------------------------------------------- commands
def train_command(venv_python: Path, variant: str, config: Path, vocab: Path, vocab_size: int, save_prefix: Path,
                  updates: int, max_tokens: int, log_interval: int, train_documents: int,
                  hidden: int = 512) -> List[str]:
    """onmt_train with throughput.py's settings.  vocab_size: OpenNMT-py's vocabulary counts its 4 specials
    (<unk> <blank> <s> </s>), so give the regular words + 4 to keep every word.  -bucket_size: OpenNMT-py fills
    a bucket of examples (default 262,144) by reading the corpus again and again, 30 passes (2 minutes here)
    before the first update on LCSTS PART_II; one pass, as fairseq reads it, is the number of documents."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown OpenNMT-py variant {variant!r} ({', '.join(VARIANTS)})")
    if hidden % 2:
        raise ValueError(f"OpenNMT-py decoder size must be even (2 x encoder hidden), got {hidden}")
    return [str(venv_python.parent / "onmt_train"), "-config", str(config),
            "-src_vocab", str(vocab), "-share_vocab", "-src_vocab_size", str(vocab_size),
            "-tgt_vocab_size", str(vocab_size), "-vocab_size_multiple", "1",
            "-encoder_type", "brnn", "-rnn_type", "LSTM", "-word_vec_size", "128",
            "-enc_hid_size", str(hidden), "-dec_hid_size", str(hidden), "-enc_layers", "1", "-dec_layers", "1",
            "-global_attention", "mlp", "-input_feed", "1", "-dropout", "0.1", *VARIANTS[variant],
            "-optim", "adam", "-learning_rate", "0.001", "-max_grad_norm", "2",
            "-batch_type", "tokens", "-batch_size", str(max_tokens), "-bucket_size", str(train_documents),
            "-num_workers", "0", "-train_steps", str(updates), "-save_checkpoint_steps", str(updates),
            "-report_every", str(log_interval), "-seed", "1", "-save_model", str(save_prefix)]


def checkpoint_path(save_prefix: Path, updates: int) -> Path:
    return Path(f"{save_prefix}_step_{updates}.pt")


def decode_lengths(max_len_b: int, min_len: int):
    """OpenNMT-py's (-min_length, -max_length) for fairseq's --max-len-a 0 --max-len-b B --min-len M.

    fairseq: at most B tokens, then </s> (B + 1 decoder steps); at least M tokens before </s>.  OpenNMT-py: at
    most max_length tokens, a hypothesis that reaches it stops without </s>; at least min_length tokens.  So
    max_length = B + 1 (the same number of steps at most), and for fixed length (M = B: every fairseq hypothesis
    is B tokens + </s>, B + 1 steps) min_length = B + 1 too."""
    return (max_len_b + 1 if min_len >= max_len_b else min_len), max_len_b + 1


def decode_command(venv_python: Path, checkpoint: Path, source: Path, output: Path, beam: int, max_len_b: int,
                   min_len: int, batch_size: int, block_ngram_repeat: int = 0) -> List[str]:
    """onmt_translate's options through the bench's driver (peers/onmt_decode.py: OpenNMT-py issue 2503 and the
    missing copy source map worked around, search timed as fairseq-generate times it)."""
    min_length, max_length = decode_lengths(max_len_b, min_len)
    # -P: the driver's folder (which holds this onmt.py) must not shadow the onmt package on sys.path
    cmd = [str(venv_python), "-P", str(DECODE_DRIVER), "-model", str(checkpoint), "-src", str(source),
           "-output", str(output), "-beam_size", str(beam), "-min_length", str(min_length),
           "-max_length", str(max_length), "-batch_size", str(batch_size), "-batch_type", "sents",
           "-gpu", "-1", "-seed", "1"]
    if block_ngram_repeat:
        cmd += ["-block_ngram_repeat", str(block_ngram_repeat)]
    return cmd


# ---------------------------------------------------------------------------------------------- logs
def parse_train_log(text: str) -> List[Dict[str, float]]:
    """OpenNMT-py's "Step N/M; acc: ...; X/Y tok/s;" lines: step, source and target tokens/s of each interval."""
    return [{"step": int(step), "src_tok_s": float(src), "tgt_tok_s": float(tgt)}
            for step, src, tgt in STEP.findall(text)]


def train_tokens_per_second(text: str) -> float:
    """Mean target tokens/s of the logged intervals after the first (which holds the start-up), like
    throughput.py's reading of fairseq's wps."""
    intervals = parse_train_log(text)
    if len(intervals) < 2:
        raise ValueError(f"OpenNMT-py logged {len(intervals)} training interval(s), need 2: raise --updates or "
                         "lower --log-interval")
    rest = [interval["tgt_tok_s"] for interval in intervals[1:]]
    return sum(rest) / len(rest)


def vocab_size(text: str) -> Optional[int]:
    found = VOCAB.search(text)
    return int(found.group(1)) if found else None


def parse_decode(text: str) -> Dict[str, float]:
    """The driver's BENCH-DECODE line: sentences, seconds of search, predicted tokens."""
    found = DECODED.findall(text)
    if not found:
        raise ValueError("no 'BENCH-DECODE sentences=N seconds=S tokens=K' line from the OpenNMT-py decoder")
    sentences, seconds, tokens = found[-1]
    sentences, seconds, tokens = int(sentences), float(seconds), int(tokens)
    return {"decode_sentences": sentences, "decode_sent_per_s": sentences / max(seconds, 1e-9),
            "decode_tok_per_s": tokens / max(seconds, 1e-9), "hyp_len": tokens / max(sentences, 1)}
