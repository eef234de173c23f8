"""A data and a model directory remember the config that made them (config.json, fairseq_plugins/runtime/run_config.py):
train.sh and generate.sh default to it, the hub decodes with the model's GEN_ARGS, and an explicit -c that
disagrees is an error unless --force-config."""
import json
import os
import re
from pathlib import Path

import pytest

from conftest import run, slice_corpus
from fairseq_plugins.cli import run_config as run_config_command
from fairseq_plugins.runtime import run_config

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--max-update", "2", "--max-tokens", "3000", "--disable-validation"]
# scitldr_small's preprocessing and training, decoding of its own: what a model of this config must decode with
CONFIG = """source "$ROOT/configs/scitldr_small.conf"
GEN_ARGS=(--beam 2 --max-len-a 0 --max-len-b 7 --min-len 3 --block-ngram-repeat 3 --batch-size 4)
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Data prepared with -c terse (a config file outside configs/), a model trained without -c."""
    work = tmp_path_factory.mktemp("run_config")
    config = work / "terse.conf"
    config.write_text(CONFIG, encoding="utf-8")
    raw = slice_corpus("scitldr", work / "raw", (("train", 60), ("valid", 8), ("test", 5)))
    data, model = work / "data", work / "model"
    run(["./preprocess.sh", "-c", config, raw, data])
    train = run(["./train.sh", data, model, *TINY])
    return work, config, data, model, train.stdout + train.stderr


@pytest.mark.slow
def test_both_directories_record_the_config(made):
    work, config, data, model, log = made
    for directory, role in ((data, "data"), (model, "model")):
        record = run_config.read(directory)
        assert record["name"] == "terse" and record["role"] == role and record["file"] == str(config)
        assert record["text"] == CONFIG
        assert record["gen_args"] == CONFIG.split("GEN_ARGS=(")[1].split(")")[0].split()
        assert record["prep_args"][:4] == ["--lang", "en", "--unit", "word"]
    assert run_config.read(model)["extra_args"] == TINY
    assert "Training (" + str(config) in log  # without -c, train.sh took the data's config


@pytest.mark.slow
def test_generate_without_c_decodes_with_the_models_gen_args(made):
    work, config, data, model, _ = made
    result = run(["./generate.sh", "--verbose", "--split", "test", "--checkpoint", "checkpoint_last.pt", data, model])
    assert "Decoding with the GEN_ARGS of terse" in result.stderr
    assert re.search(r"'beam': 2\b", result.stderr) and re.search(r"'max_len_b': 7\b", result.stderr)
    assert re.search(r"'block_ngram_repeat': 3\b", result.stderr), result.stderr[-3000:]
    summaries = result.stdout.splitlines()
    assert len(summaries) == 5 and all(len(s.split()) <= 7 for s in summaries)


@pytest.mark.slow
def test_a_disagreeing_c_is_an_error_unless_forced(made):
    work, config, data, model, _ = made
    generate = ["./generate.sh", "-c", "scitldr_small", "--split", "test", "--checkpoint", "checkpoint_last.pt"]
    refused = run([*generate, data, model], check=False)
    assert refused.returncode == 2 and refused.stdout == ""  # usage: 2
    assert f"{model} was trained with -c terse; -c scitldr_small would decode it" in refused.stderr
    forced = run([generate[0], "--verbose", "--force-config", *generate[1:], data, model])
    assert "GEN_ARGS of scitldr_small" in forced.stderr and re.search(r"'beam': 5\b", forced.stderr)
    # train.sh: resuming the model with another config, or a config that prepares text differently
    resumed = run(["./train.sh", "-c", "scitldr_small", data, model, *TINY], check=False)
    assert resumed.returncode == 2 and f"{model} was trained with -c terse" in resumed.stderr
    other = run(["./train.sh", "-c", "lcsts_char", data, work / "other", *TINY], check=False)
    assert other.returncode == 2 and f"{data} was prepared with -c terse" in other.stderr
    assert "-c lcsts_char prepares text differently" in other.stderr and not (work / "other").exists()


@pytest.mark.slow
def test_the_hub_decodes_with_the_models_gen_args(made):
    from fairseq_plugins.inference.hub import Summarizer
    from fairseq_plugins.generation.defaults import DEFAULT_GENERATION
    from fairseq_plugins.inference.options import generation_options

    work, config, data, model, _ = made
    summarizer = Summarizer.from_pretrained(model, checkpoint_file="checkpoint_last.pt", device="cpu")
    assert summarizer.generation == dict(beam=2, max_len_a=0, max_len_b=7, min_len=3, lenpen=1.0, batch_size=4,
                                         block_ngram_repeat=3)
    assert all(len(s.split()) <= 7 for s in summarizer.summarize(["a short document about models ."] * 2))
    assert generation_options(["--no-repeat-ngram-size", "2", "--print-alignment"])["block_ngram_repeat"] == 2
    assert generation_options(["--block-immediate-repeat", "1"])["block_immediate_repeat"] == 1
    assert "block_immediate_repeat" not in generation_options(["--beam", "2"])
    bare = work / "bare"  # a model directory from before config.json: scitldr_small's options
    bare.mkdir()
    for name in ("checkpoint_last.pt", "prep.json", "dict.txt"):
        os.link(model / name, bare / name)
    old = Summarizer.from_pretrained(bare, checkpoint_file="checkpoint_last.pt", device="cpu")
    assert old.generation == DEFAULT_GENERATION and DEFAULT_GENERATION["max_len_b"] == 60


def test_the_hubs_default_generation_is_scitldr_smalls_gen_args():
    from fairseq_plugins.generation.defaults import DEFAULT_GENERATION
    from fairseq_plugins.inference.options import generation_options

    gen_args = run(["bash", "-c", 'source scripts/lib.sh; load_config scitldr_small; printf "%s\\n" "${GEN_ARGS[@]}"'])
    assert generation_options(gen_args.stdout.split()) == DEFAULT_GENERATION


def test_a_broken_record_is_named(tmp_path):
    (tmp_path / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(run_config.RecordError, match=re.escape(str(tmp_path / "config.json"))):
        run_config.read(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"name": "x"}), encoding="utf-8")
    with pytest.raises(run_config.RecordError, match="without prep_args, train_args, gen_args, extra_args"):
        run_config.read(tmp_path)
    assert run_config_command.main(["get", str(tmp_path / "nope.json"), "name"]) == 2
