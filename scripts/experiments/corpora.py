"""The corpora of the experiment scripts and the benchmarks, defined once: where each is and how it is read.

Research-only corpora (LCSTS, CNN/DailyMail) are read from ../shared/data and written only under a run's work
folder, never into the repository; the shipped samples are read from data/.  The functions that write a raw
folder (``lcsts_raw``, ``cnndm_raw``, ``aclsum_raw``, ``csl_raw``) take the run's ``Experiment`` (lib.py) for
its commands' logs and its error messages.
"""
import gzip
import json
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

from scripts.experiments.lib import read_lines, write_lines

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
LCSTS = SHARED / "lcsts_part2"  # LCSTS PART_II: train.tsv and val.tsv, summary<TAB>text
CNNDM = SHARED / "cnndm_see2017" / "part_a.jsonl.gz"  # See et al.'s 10,000 released test documents
ACLSUM = SHARED / "aclsum"  # {train,val,test}.jsonl
CSL = SHARED / "csl_title"  # CSL abstract -> title, tsv
SCITLDR = ROOT / "data" / "scitldr"  # shipped: {train,valid,test}.{src,tgt}


def require(path: Path, fail: Callable[[str], None], hint: str = "") -> None:
    """Calls ``fail`` with the scripts' one message when a corpus of ../shared/data is not there."""
    if not path.exists():
        fail(f"{path} not found (needs ../shared/data beside the repository{hint})")


def lcsts_convert(split_file: str, out_prefix) -> list:
    """The summ-convert command of one LCSTS PART_II file (``train.tsv``, ``val.tsv``): text -> PREFIX.src,
    summary -> PREFIX.tgt."""
    return ["summ-convert", "tsv", LCSTS / split_file, "--src-col", "1", "--tgt-col", "0", "--out-prefix", out_prefix]


def cnndm_lines(count: Optional[int] = None) -> Iterator[str]:
    """The JSON lines of CNN/DM in file order (the first ``count`` of them)."""
    with gzip.open(CNNDM, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if count is not None and number == count:
                return
            yield line


def cnndm_documents(count: Optional[int] = None, by_id: bool = False) -> List[dict]:
    """CNN/DM documents (``id``, ``article``, ``reference`` sentences): the first ``count`` in file order, or with
    ``by_id`` the first ``count`` in the order of their ids."""
    if not by_id:
        return [json.loads(line) for line in cnndm_lines(count)]
    docs = sorted((json.loads(line) for line in cnndm_lines()), key=lambda doc: doc["id"])
    return docs[:count] if count else docs


def lcsts_raw(exp, raw: Path, valid_size: int = 500) -> Dict[str, int]:
    """LCSTS PART_II: train.tsv -> raw/train.*; val.tsv in file order -> raw/valid.* (the first valid_size
    pairs) and raw/test.* (the rest).  Returns the number of pairs per split."""
    require(LCSTS, exp.fail)
    raw.mkdir(parents=True, exist_ok=True)
    exp.run(lcsts_convert("train.tsv", raw / "train"), "convert_train.log")
    exp.run(lcsts_convert("val.tsv", raw / "heldout"), "convert_val.log")
    for side in ("src", "tgt"):
        lines = read_lines(raw / f"heldout.{side}")
        if not 0 < valid_size < len(lines):
            exp.fail(f"the validation size must be in 1..{len(lines) - 1}")
        write_lines(raw / f"valid.{side}", lines[:valid_size])
        write_lines(raw / f"test.{side}", lines[valid_size:])
        (raw / f"heldout.{side}").unlink()
    return {split: len(read_lines(raw / f"{split}.src")) for split in ("train", "valid", "test")}


def cnndm_splits(exp, raw: Path, test_size: int, valid_size: int) -> Dict[str, List[dict]]:
    """See et al.'s released CNN/DM documents split by id (test, valid, then train), with RAW created."""
    require(CNNDM, exp.fail)
    raw.mkdir(parents=True, exist_ok=True)
    docs = cnndm_documents(by_id=True)
    return {"test": docs[:test_size], "valid": docs[test_size:test_size + valid_size],
            "train": docs[test_size + valid_size:]}


def cnndm_raw(exp, raw: Path, test_size: int = 500, valid_size: int = 300) -> Dict[str, int]:
    """CNN/DailyMail articles and reference highlights of See et al.'s released test set (10,000 documents,
    lower-cased, PTB-tokenized; articles in full as released, 71 to 2,466 tokens, median 694, of which See et
    al.'s models read the first 400; preprocess.sh truncates them to the config's --max-source-len, 800 in
    configs/cnndm_small.conf), split by id: the first ``test_size`` ids are the test set, the next
    ``valid_size`` the validation set, the rest the training set.  Reference sentences are joined with
    `` <q> `` (summary-level ROUGE-L splits on it)."""
    splits = cnndm_splits(exp, raw, test_size, valid_size)
    for split, part in splits.items():
        write_lines(raw / f"{split}.src", [" ".join(doc["article"].split()) for doc in part])
        write_lines(raw / f"{split}.tgt", [" <q> ".join(" ".join(s.split()) for s in doc["reference"]) for doc in part])
        write_lines(raw / f"{split}.ids", [doc["id"] for doc in part])
    return {split: len(part) for split, part in splits.items()}


def cnndm_lead_headline_raw(exp, raw: Path, test_size: int = 500, valid_size: int = 500,
                            lead_tokens: int = 120) -> Dict[str, int]:
    """A short-target English corpus of about 10,000 pairs, made as a user makes one from their own data: each
    CNN/DailyMail article of See et al.'s released test set cut to its leading whole sentences (as many as fit in
    ``lead_tokens`` tokens, at least one) -> its first reference highlight, written as JSON lines
    (``{"id", "body", "title"}``) and converted with ``summ-convert jsonl``.  Split by id as ``cnndm_raw``:
    the first ``test_size`` ids test, the next ``valid_size`` validate, the rest train."""
    splits = cnndm_splits(exp, raw, test_size, valid_size)
    for split, part in splits.items():
        rows = [{"id": doc["id"], "body": leading_sentences(doc["article"], lead_tokens),
                 "title": " ".join(doc["reference"][0].split())} for doc in part]
        jsonl = raw / f"{split}.jsonl"
        write_lines(jsonl, [json.dumps(row, ensure_ascii=False) for row in rows])
        exp.run(["summ-convert", "jsonl", jsonl, "--src-field", "body", "--tgt-field", "title",
                 "--output-prefix", raw / split], f"convert_{split}.log")
    return {split: len(part) for split, part in splits.items()}


def leading_sentences(article: str, budget: int) -> str:
    """The first sentences of a PTB-tokenized article (each ending at a '.', '!' or '?' token) that fit in
    ``budget`` tokens together; the first sentence whole even when it alone is longer."""
    kept, current = [], []
    for token in article.split():
        current.append(token)
        if token in (".", "!", "?"):
            if kept and len(kept) + len(current) > budget:
                break
            kept += current
            current = []
    return " ".join(kept or current)


def aclsum_raw(exp, raw: Path) -> None:
    """aclsum's abstracts -> its 'challenge' summaries, its own train/val/test split, as a user converts it."""
    for split, name in (("train", "train"), ("valid", "val"), ("test", "test")):
        exp.run(["summ-convert", "jsonl", ACLSUM / f"{name}.jsonl", "--src-field", "sentences.abstract",
                 "--tgt-field", "summary.challenge", "--output-prefix", raw / split], f"convert_aclsum_{split}.log")


def csl_raw(exp, raw: Path) -> None:
    """CSL abstract -> title pairs: ydli files are ``to title<TAB>abstract<TAB>title``, clge ``title<TAB>abstract``;
    ydli_dev and clge_val train, ydli_test's first 200 validate and the rest test."""
    def pairs(name, src_col, tgt_col):
        rows = [line.split("\t") for line in read_lines(CSL / name)]
        return [(row[src_col], row[tgt_col]) for row in rows]

    train = pairs("ydli_dev.tsv", 1, 2) + pairs("clge_val.tsv", 1, 0)
    test = pairs("ydli_test.tsv", 1, 2)
    for split, rows in (("train", train), ("valid", test[:200]), ("test", test[200:])):
        write_lines(raw / f"{split}.src", [src for src, _ in rows])
        write_lines(raw / f"{split}.tgt", [tgt for _, tgt in rows])
