"""Shi et al.'s accuracy (eq 17) on hand-made cases."""
import pytest

from fairseq_plugins.scoring.accuracy import summary_accuracy


@pytest.mark.parametrize(
    "predicted, target, expected",
    [
        (["a", "b", "c"], ["a", "b", "c"], 1.0),
        (["c", "b", "a"], ["a", "b", "c"], 1.0),  # order does not matter
        (["a", "x"], ["a", "b", "c", "d"], 0.25),
        ([], ["a", "b"], 0.0),
        (["a", "a", "a"], ["a", "b"], 0.5),  # a repeated word matches only as often as the target has it
        (["a", "a"], ["a", "a", "b", "c"], 0.5),
        (["x", "y", "z", "a"], ["a"], 1.0),  # length of the prediction is not penalised (recall)
    ],
)
def test_summary_accuracy(predicted, target, expected):
    assert summary_accuracy(predicted, target) == pytest.approx(expected)


def test_unknown_words_never_match_and_empty_targets_are_skipped():
    assert summary_accuracy([3, 5], [3, 5], unk=3) == pytest.approx(0.5)
    assert summary_accuracy(["a"], []) is None
