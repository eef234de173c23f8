"""Which document a (target, hypothesis) pair of ``fairseq-generate --scoring`` belongs to.

fairseq-generate calls a scorer's ``add_string(target, hypothesis)`` with strings only, never the document
id.  The target string is the one fairseq prints on its ``T-`` line: the binarized target's tokens (with
``<oov-K>`` markers, ``<unk>`` escaped as ``<<unk>>``, after ``--post-process``).  :func:`fairseq_targets`
makes that string for every document of a split from the same binary files fairseq-generate reads, and
:func:`match_documents` groups the pairs by it: a pair belongs to the documents with its target string.
Several documents can share one (e.g. a duplicated document): :func:`match_documents` returns them together
and leaves it to the caller to decide whether it matters which hypothesis goes with which.
"""
import os
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

from fairseq_plugins.text.restore import id_ranges
from fairseq_plugins.text.textio import UserError

Group = Tuple[List[int], List[str]]  # documents with one target string, and the hypotheses given for it


def fairseq_targets(bin_dir: str, split: str, source_lang: Optional[str], target_lang: Optional[str],
                    post_process: Optional[str]) -> List[str]:
    """Document i's target as fairseq-generate prints it (``T-i``) and passes it to the scorer."""
    from fairseq.data import Dictionary, data_utils

    if source_lang is None or target_lang is None:  # as the translation task infers them
        source_lang, target_lang = data_utils.infer_language_pair(bin_dir)
    dictionary = Dictionary.load(os.path.join(bin_dir, f"dict.{target_lang}.txt"))
    for pair in (f"{source_lang}-{target_lang}", f"{target_lang}-{source_lang}"):
        dataset = data_utils.load_indexed_dataset(os.path.join(bin_dir, f"{split}.{pair}.{target_lang}"), dictionary)
        if dataset is not None:
            # fairseq-generate strips eos (its generators' symbols_to_strip_from_output) and escapes <unk>
            return [dictionary.string(dataset[i], post_process, escape_unk=True,
                                      extra_symbols_to_ignore={dictionary.eos()}) for i in range(len(dataset))]
    raise UserError(f"--scoring rouge: no binarized targets of split {split!r} in {bin_dir} "
                    f"({split}.{source_lang}-{target_lang}.{target_lang})")


def match_documents(targets: Sequence[str], pairs: Sequence[Tuple[str, str]], split: str) -> List[Group]:
    """The pairs grouped by document: each group's documents share a target string and got as many
    hypotheses as there are of them.  Raises a UserError when a target is no document's, or when the
    pairs do not give every document of the split exactly one hypothesis (generate.sh --score needs all)."""
    documents: Dict[str, List[int]] = defaultdict(list)
    for doc, target in enumerate(targets):
        documents[target].append(doc)
    hypotheses: Dict[str, List[str]] = defaultdict(list)
    for target, hypothesis in pairs:
        if target not in documents:
            raise UserError(f"--scoring rouge: the target {shorten(target)!r} is not the target of any "
                            f"document of {split!r} as fairseq-generate prints it (an option that changes target "
                            f"strings?): run generate.sh --split {split} --score")
        hypotheses[target].append(hypothesis)
    groups = [(documents[t], hypotheses[t]) for t in documents]
    check_coverage(groups, len(targets), split)
    return groups


def check_coverage(groups: Sequence[Group], n_docs: int, split: str) -> None:
    """Every document has exactly one hypothesis, as generate.sh --score (summ-restore) requires."""
    extra = [docs for docs, hyps in groups if len(hyps) > len(docs)]
    if extra:
        raise UserError(f"--scoring rouge: more hypotheses than documents for the target of document(s) "
                        f"{id_ranges(extra[0])} of {split!r} (were two runs scored together?)")
    short = [(docs, len(docs) - len(hyps)) for docs, hyps in groups if len(hyps) < len(docs)]
    if not short:
        return
    whole = sorted(d for docs, n in short if n == len(docs) for d in docs)
    parts = [id_ranges(whole)] if whole else []
    parts += [f"{n} of {id_ranges(docs)}" for docs, n in short if n < len(docs)]
    scored = n_docs - sum(n for _, n in short)
    raise UserError(f"--scoring rouge: fairseq-generate scored {scored} of the {n_docs} documents of {split!r} "
                    f"(missing: {'; '.join(parts)}); the figure is the mean over all of them, as generate.sh "
                    f"--score computes it, which needs a hypothesis for every document: generate the whole split "
                    f"(no --num-shards, no --skip-invalid-size-inputs-valid-test), or run generate.sh --split "
                    f"{split} --score")


def shorten(text: str, limit: int = 80) -> str:
    """``text``, cut to ``limit`` characters for an error message."""
    return text if len(text) <= limit else text[:limit - 3] + "..."
