"""``summarization``: fairseq's translation task (source document -> target summary) without lost inputs.

fairseq 0.12.x (``data_utils.batch_by_size``) silently drops the last batch of *every* split when its size is
not a multiple of ``--required-batch-size-multiple`` (default 8): validation loses samples and
``fairseq-generate`` writes fewer hypotheses than there are inputs.  This task always batches with a multiple
of 1, so every document is trained on, validated and summarized.  Everything else is
``--task translation``: ``-s src -t tgt``, a joined dictionary with the OOV markers of summ-prepare.
"""
import logging
from dataclasses import dataclass

from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask

logger = logging.getLogger(__name__)


@dataclass
class SummarizationConfig(TranslationConfig):
    pass


@register_task("summarization", dataclass=SummarizationConfig)
class SummarizationTask(TranslationTask):
    def get_batch_iterator(self, dataset, **kwargs):
        multiple = kwargs.get("required_batch_size_multiple", 1)
        if multiple != 1:
            logger.info("summarization task: --required-batch-size-multiple %d -> 1 (keeps every input)", multiple)
        kwargs["required_batch_size_multiple"] = 1
        return super().get_batch_iterator(dataset, **kwargs)
