"""scripts/experiments/newcomer.py's report: what each path returned for the empty documents, and the drain runs,
as the report states them (a path that drops an output shows its count; a failed drain run shows why)."""
from argparse import Namespace

from scripts.experiments import newcomer


def facts(generate_lines):
    return {"preprocess": ["summ-prepare: train: warning: 9 of 10 sources (90.00%) are cut at 150 tokens"],
            "train": {"terminal_lines": 23, "log_lines": 182, "commit": "abc1234", "shown": ["budget: --max-update 3"]},
            "generate": {"file": {"lines": generate_lines, "warnings": ["summ-prepare: warning: 2 empty documents"]}},
            "api": {"answers": [["a summary", "read whole"], ["", "empty"], ["", "empty"], ["b", "read whole"]],
                    "warnings": []},
            "server": {"status": 200, "summaries": ["a", "", "", "b"], "warnings": ["documents[1]: empty"],
                       "no_documents": [400, {"reason": "no_documents"}]}}


def test_the_report_states_each_paths_outputs_and_the_drain_runs():
    drains = [{"passed": True, "seconds": 70.1, "load": 3.1, "tail": [], "commit": "abc1234"},
              {"passed": False, "seconds": 31.0, "load": 4.0, "tail": ["1 failed in 31 s"], "commit": "abc1234"}]
    text = newcomer.render({"csl": facts(["a", "", "", "b"])}, drains, Namespace(updates=3, drain_runs=2), "def5678")
    assert "at commit def5678" in text and "(trained at commit abc1234): **23 lines on the terminal**" in text
    assert "    summ-prepare: train: warning: 9 of 10 sources (90.00%) are cut at 150 tokens" in text
    assert '| generate.sh --input FILE | 4 | "" | "" | summ-prepare: warning: 2 empty documents |' in text
    assert '| Summarizer.summarize_with_reports | 4 | "" | "" | none |' in text
    assert '| summ-serve POST /summarize (HTTP 200) | 4 | "" | "" | documents[1]: empty |' in text
    assert '`{"documents": []}` to summ-serve: HTTP 400, {"reason": "no_documents"}' in text
    assert "**1 of 2 passed**" in text and "| 2 | no: 1 failed in 31 s | 31.0 | 4.0 |" in text


def test_a_path_that_drops_outputs_shows_the_count_and_null_cells():
    text = newcomer.render({"aclsum": facts(["a"])}, [], Namespace(updates=3, drain_runs=0), "def5678")
    assert "| generate.sh --input FILE | 1 | null | null |" in text
    assert "**0 of 0 passed**" in text
