"""summ-package (fairseq_plugins/inference/package.py): a self-contained model directory checked by a sha256
manifest, loaded by Summarizer.from_pretrained, summ-serve and generate.sh; a corrupted or incomplete package is
refused."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import ROOT, command_env, run
from serving import Server, sample_documents, tiny_model

pytestmark = pytest.mark.slow  # a model trained through train.sh; summ-serve and generate.sh as subprocesses

OPTIONS = {"beam": 2, "max_len_b": 12}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_model(tmp_path_factory)


@pytest.fixture(scope="module")
def packaged(model, tmp_path_factory):
    work, data, save, _ = model
    rouge = work / "rouge.txt"
    rouge.write_text("ROUGE-1 Average_F: 0.12345 (95%-conf.int. 0.1 - 0.2)\n", encoding="utf-8")
    out = tmp_path_factory.mktemp("package") / "tiny"
    result = run(["summ-package", save, out, "--rouge", rouge])
    assert "wrote" in result.stderr
    return out


def summarizer_of(path):
    from fairseq_plugins.inference.hub import Summarizer

    return Summarizer.from_pretrained(path, device="cpu")


def test_package_holds_everything_and_a_model_card(model, packaged):
    _, _, save, _ = model
    manifest = json.loads((packaged / "manifest.json").read_text())
    listed = set(manifest["files"])
    assert {"checkpoint_best.pt", "prep.json", "dict.txt", "bin/dict.src.txt", "bin/dict.tgt.txt", "config.json",
            "MODEL_CARD.md"} == listed
    assert (packaged / "checkpoint_best.pt").read_bytes() == (save / "checkpoint_best.pt").read_bytes()
    card = (packaged / "MODEL_CARD.md").read_text()
    assert "architecture: `pgn_lstm_small`" in card and "updates: 3" in card
    command = "./train.sh -c short DATA_DIR SAVE_DIR --max-update 3 --max-tokens 1500"
    assert f"{command} --tensorboard-logdir .../tensorboard" in card  # an option's absolute path: its last name
    assert ("GEN_ARGS: `--beam 5 --max-len-a 0 --max-len-b 60 --min-len 5 --block-ngram-repeat 3 "
            "--block-immediate-repeat 1 --batch-size 32`") in card
    assert "ROUGE-1 Average_F: 0.12345" in card and "training documents: 200" in card
    assert "lower-cased: yes" in card  # scitldr_small's word units are lower-cased
    assert str(save.parent) not in card and "/tmp" not in card  # names, not the training machine's paths
    umask = os.umask(0)
    os.umask(umask)
    assert packaged.stat().st_mode & 0o777 == 0o777 & ~umask  # not mkdtemp's private 0700
    again = run(["summ-package", save, packaged], check=False)
    assert again.returncode == 2 and "exists: give a new directory" in again.stderr


def test_hub_server_and_generate_sh_load_the_package_alike(model, packaged, tmp_path):
    _, data, save, _ = model
    documents = sample_documents()
    expected = summarizer_of(save).summarize(documents, **OPTIONS)
    assert summarizer_of(packaged).summarize(documents, **OPTIONS) == expected
    (tmp_path / "docs.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
    script = run(["./generate.sh", "--input", tmp_path / "docs.txt", packaged, packaged, "--beam", "2",
                  "--max-len-b", "12"])
    assert script.stdout.split("\n")[:-1] == expected
    server = Server(packaged)
    try:
        assert server.summaries(documents, **OPTIONS) == expected
    finally:
        server.stop()


def corrupt_copy(packaged, tmp_path, change):
    copy = tmp_path / "broken"
    shutil.copytree(packaged, copy)
    change(copy)
    return copy


def flip_last_byte(path):
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def drop_listing(copy):
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["files"]["dict.txt"]
    (copy / "manifest.json").write_text(json.dumps(manifest))


BROKEN = {
    "flipped byte": (lambda c: flip_last_byte(c / "checkpoint_best.pt"),
                     "checkpoint_best.pt: corrupted: its sha256 differs from the manifest's"),
    "truncated": (lambda c: (c / "prep.json").write_text("{}"), "prep.json: corrupted: 2 bytes, the manifest says"),
    "missing file": (lambda c: (c / "bin" / "dict.src.txt").unlink(), "incomplete package: bin/dict.src.txt is missing"),
    "no manifest": (lambda c: (c / "manifest.json").unlink(), "incomplete package: manifest.json is missing"),
    "manifest not JSON": (lambda c: (c / "manifest.json").write_text("{\"files\":"), "corrupted manifest"),
    "unlisted file": (drop_listing, "incomplete package: the manifest does not list dict.txt"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_corrupted_or_incomplete_package_is_refused_by_the_hub(packaged, tmp_path, name):
    from fairseq_plugins.inference.package import PackageError

    change, message = BROKEN[name]
    broken = corrupt_copy(packaged, tmp_path, change)
    with pytest.raises(PackageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        summarizer_of(broken)


def test_corrupted_package_is_refused_by_the_server_and_generate_sh(packaged, tmp_path):
    broken = corrupt_copy(packaged, tmp_path, lambda c: flip_last_byte(c / "checkpoint_best.pt"))
    message = "checkpoint_best.pt: corrupted: its sha256 differs"
    served = subprocess.run(["summ-serve", str(broken), "--port", "0"], cwd=ROOT, env=command_env(),
                            capture_output=True, text=True, timeout=300)
    assert served.returncode == 2 and message in served.stderr and "Traceback" not in served.stderr
    (tmp_path / "docs.txt").write_text("a document .\n", encoding="utf-8")
    script = run(["./generate.sh", "--input", tmp_path / "docs.txt", broken, broken], check=False)
    assert script.returncode == 2 and message in script.stderr and script.stdout == ""
