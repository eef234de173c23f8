"""The experiment runner (scripts/experiments/compare.py): which trained systems it reuses."""
import json
import sys
from pathlib import Path

import pytest

from conftest import command_env, run
from scripts.experiments import compare, records
from scripts.experiments.lib import Experiment

ROOT = Path(__file__).resolve().parents[1]


class RecordingExperiment(Experiment):
    """Records the commands instead of running them; a 'training' writes a checkpoint and a log line."""

    def __init__(self, work):
        super().__init__("test", work)
        self.commands = []

    def run(self, cmd, log_name, stdout=None, append=False):
        if stdout is not None:  # attention_stats.py on the validation set
            self.stats_runs = getattr(self, "stats_runs", 0) + 1
            stdout.write_text('{"nll_bits": 3.25, "entropy": 2.0}\n')
            return 1.0
        self.commands.append([str(c) for c in cmd])
        positional = [str(c) for c in cmd[3:] if str(c) != "--force-config"]  # after train.sh -c CONFIG
        model = Path(positional[1])
        model.mkdir(parents=True, exist_ok=True)
        (model / "checkpoint_best.pt").write_bytes(b"new")
        with (self.logs / log_name).open("a" if append else "w") as log:
            log.write("num_updates=7, wps=100\nnum_updates=9, wps=120\n")
        return 42.0


def interrupted_run(exp, label):
    """What an interrupted training leaves: a checkpoint and a log, but no train_seconds."""
    model = exp.work / "models" / label
    model.mkdir(parents=True)
    (model / "checkpoint_best.pt").write_bytes(b"old")
    (exp.logs / f"train_{label}.log").write_text("num_updates=3\n")
    return model


def test_an_interrupted_system_is_trained_again_and_a_finished_one_reused(tmp_path):
    exp = RecordingExperiment(tmp_path)
    system = ("pgn", "lcsts_char", ["--copy"], None, 9)
    model = interrupted_run(exp, "pgn")

    trained, facts = compare.train(exp, tmp_path / "data", system, retrain=False)
    assert trained == model and len(exp.commands) == 1
    assert exp.commands[0][-2:] == ["--max-update", "9"] and "--copy" in exp.commands[0]
    assert (model / "checkpoint_best.pt").read_bytes() == b"new"  # the old run was removed, not resumed
    assert facts["updates"] == 9 and abs(facts["train_min"] - 0.7) < 1e-9
    assert facts["valid_nll_bits"] == 3.25 and exp.stats_runs == 1  # the decoded checkpoint's NLL, computed once

    compare.train(exp, tmp_path / "data", system, retrain=False)
    assert len(exp.commands) == 1 and exp.stats_runs == 1  # finished: reused, with its statistics
    compare.train(exp, tmp_path / "data", system, retrain=True)
    assert len(exp.commands) == 2


def test_an_interrupted_system_resumes_only_when_it_was_started_with_the_same_record(tmp_path):
    """A session that ends mid-training loses only the work after the last checkpoint: the same training resumes
    from checkpoint_last.pt (log appended, time of the attempts counted); one started otherwise starts again."""
    exp = RecordingExperiment(tmp_path)
    system = ("pgn", "lcsts_char", ["--copy"], None, 9)
    want = compare.training_record(exp, tmp_path / "data", system)
    model = interrupted_run(exp, "pgn")
    (model / "checkpoint_last.pt").write_bytes(b"old last")
    records.mark_started(model, want, 60.0)
    started = json.loads((model / records.STARTED).read_text())
    started["started_at"] -= 30.0  # its last checkpoint was saved 30 s after it started
    (model / records.STARTED).write_text(json.dumps(started))

    trained, facts = compare.train(exp, tmp_path / "data", system, retrain=False)
    assert len(exp.commands) == 1 and (model / "checkpoint_last.pt").read_bytes() == b"old last"  # resumed
    assert (exp.logs / "train_pgn.log").read_text().startswith("num_updates=3\n")  # the first attempt's log kept
    assert abs(facts["train_min"] * 60 - (60.0 + 30.0 + 42.0)) < 1.0
    assert not (model / records.STARTED).exists() and records.read_record(model) == want

    other = ("pgn", "lcsts_char", ["--copy"], None, 12)  # another budget: never resumed from this run
    (model / "train_seconds").unlink()
    records.mark_started(model, want, 0.0)
    compare.train(exp, tmp_path / "data", other, retrain=False)
    assert len(exp.commands) == 2 and not (model / "checkpoint_last.pt").exists()  # removed: a fresh start
    assert not (exp.logs / "train_pgn.log").read_text().startswith("num_updates=3")


def test_a_finished_system_is_reused_only_when_its_training_record_matches(tmp_path, monkeypatch):
    """A finished system trained with other updates, options, config text, data or parent is trained again; one
    without a record (trained before records existed) too; an identical one is reused, its options in any order."""
    configs = tmp_path / "root" / "configs"
    configs.mkdir(parents=True)
    (configs / "cfg.conf").write_text("TRAIN_ARGS=(--lr 0.001)\n")
    (configs / "rl.conf").write_text("TRAIN_ARGS=(--criterion self_critical_rouge)\n")
    for script in (compare, records):
        monkeypatch.setattr(script, "ROOT", tmp_path / "root")
    data = tmp_path / "data"
    data.mkdir()
    (data / "prep.json").write_text('{"settings": {"lang": "zh"}}')
    exp = RecordingExperiment(tmp_path / "work")
    base = ("pgn", "cfg", ["--copy"], None, 9)

    def trains(system):
        before = len(exp.commands)
        compare.train(exp, data, system, retrain=False)
        return len(exp.commands) - before

    (data / "config.json").write_text('{"name": "cfg"}')
    assert trains(base) == 1 and trains(base) == 0
    assert "--force-config" not in exp.commands[-1]  # the data's own config: train.sh checks it
    assert trains(("pgn", "cfg", ["--copy"], None, 5000)) == 1  # another budget
    assert trains(("pgn", "cfg", ["--copy", "--seed", "2"], None, 5000)) == 1  # other options
    assert trains(("pgn", "cfg", ["--copy", "--seed", "2"], None, 5000)) == 0
    assert trains(("pgn", "cfg", ["--seed", "2", "--copy"], None, 5000)) == 0  # the same options in another order
    (configs / "cfg.conf").write_text("TRAIN_ARGS=(--lr 0.002)\n")
    assert trains(("pgn", "cfg", ["--copy", "--seed", "2"], None, 5000)) == 1  # the config file's text
    (data / "prep.json").write_text('{"settings": {"lang": "en"}}')
    assert trains(("pgn", "cfg", ["--copy", "--seed", "2"], None, 5000)) == 1  # other data
    assert trains(("rl", "rl", [], "pgn", 3)) == 1 and trains(("rl", "rl", [], "pgn", 3)) == 0
    assert exp.commands[-1][:4] == ["{}/train.sh".format(tmp_path / "root"), "-c", "rl", "--force-config"]
    assert trains(("pgn", "cfg", [], None, 5000)) == 1  # the parent changed ...
    assert trains(("rl", "rl", [], "pgn", 3)) == 1  # ... so its child is trained again
    (exp.work / "models" / "rl" / records.RECORD).unlink()
    assert trains(("rl", "rl", [], "pgn", 3)) == 1  # no record: cannot be checked


def test_a_code_change_retrains_and_reuse_stale_keeps_the_system_and_says_so(tmp_path, monkeypatch):
    """The training record covers the code: an edit to a module of fairseq_plugins/, to a config a config sources,
    or another torch version trains the system again; --reuse-stale keeps it instead, its facts naming the
    commit of the code that trained it; anything else that changed still retrains."""
    root = tmp_path / "root"
    (root / "configs").mkdir(parents=True)
    (root / "fairseq_plugins" / "models").mkdir(parents=True)
    module = root / "fairseq_plugins" / "models" / "m.py"
    module.write_text("A = 1\n")
    (root / "configs" / "base.conf").write_text("TRAIN_ARGS=(--lr 0.001)\n")
    (root / "configs" / "cfg.conf").write_text('source "$(dirname "${BASH_SOURCE[0]}")/base.conf"\n')
    for script in (compare, records):
        monkeypatch.setattr(script, "ROOT", root)
    monkeypatch.setattr(records, "git_commit", lambda: "abc1234")
    data = tmp_path / "data"
    data.mkdir()
    (data / "prep.json").write_text("{}")
    exp = RecordingExperiment(tmp_path / "work")
    system = ("pgn", "cfg", [], None, 9)

    def trains(reuse_stale=False):
        before = len(exp.commands)
        _, facts = compare.train(exp, data, system, retrain=False, reuse_stale=reuse_stale)
        return len(exp.commands) - before, facts.get("older_code")

    assert trains() == (1, None) and trains() == (0, None)
    monkeypatch.setattr(records, "git_commit", lambda: "abc9999")
    assert trains() == (0, None)  # a commit that changes none of its files: reused
    monkeypatch.setattr(records, "git_commit", lambda: "abc1234")
    module.write_text("A = 2\n")  # the package changed
    monkeypatch.setattr(records, "git_commit", lambda: "def5678")
    assert trains(reuse_stale=True) == (0, "abc1234")  # kept, and said to be older code
    assert trains() == (1, None)  # without --reuse-stale: trained again, now on def5678
    (root / "configs" / "base.conf").write_text("TRAIN_ARGS=(--lr 0.002)\n")  # the sourced config changed
    record = records.read_record(exp.work / "models" / "pgn")
    assert record["config_text"] == (root / "configs" / "cfg.conf").read_text()  # the sourcing file's own text
    assert trains() == (1, None)
    real_version = records.package_version
    monkeypatch.setattr(records, "package_version", lambda name: "9.9" if name == "torch" else real_version(name))
    assert trains(reuse_stale=True) == (0, "def5678")  # another torch: the code record again
    (data / "prep.json").write_text('{"settings": {}}')  # other data: never kept by --reuse-stale
    assert trains(reuse_stale=True) == (1, None)


def test_the_training_code_covers_every_script_train_sh_sources_or_runs():
    """Each script named outside comments by train.sh or a shell file it sources, and each module it runs with
    python -m, is in the training code's digest: checkpoint_guard.py among them."""
    import re

    files = set(records.training_code("scitldr_small"))
    launch = ROOT / "scripts" / "launch"
    shells = {ROOT / "train.sh", ROOT / "scripts" / "lib.sh", launch / "common.sh"}
    assert shells | {launch / "checkpoint_guard.py"} <= files
    code = "\n".join(line for shell in files if shell.suffix == ".sh" for line in shell.read_text().splitlines()
                     if not line.lstrip().startswith("#"))
    named = [ROOT / name for name in re.findall(r"\b(scripts/[\w/.-]+\.(?:sh|py))\b", code)]
    modules = [ROOT / (name.replace(".", "/") + ".py") for name in re.findall(r"-m (fairseq_plugins[\w.]+)", code)]
    advice = {ROOT / "scripts" / "setup.sh"}  # named in lib.sh's error message, not run
    assert modules and [path for path in named + modules if path.is_file() and path not in files | advice] == []


def test_an_edit_to_a_script_train_sh_runs_trains_the_system_again(tmp_path, monkeypatch):
    """A script that a script train.sh sources runs (checkpoint_guard.py from common.sh) is training code."""
    root = tmp_path / "root"
    (root / "scripts" / "launch").mkdir(parents=True)
    (root / "configs").mkdir()
    (root / "configs" / "cfg.conf").write_text("TRAIN_ARGS=(--lr 0.001)\n")
    (root / "train.sh").write_text('source "$(dirname "${BASH_SOURCE[0]}")/scripts/lib.sh"\n'
                                   'source "$ROOT/scripts/launch/common.sh"\n')
    (root / "scripts" / "lib.sh").write_text("ROOT=.\n")
    (root / "scripts" / "launch" / "common.sh").write_text('# not run: "$ROOT/scripts/launch/old.py"\n'
                                                           'python "$ROOT/scripts/launch/checkpoint_guard.py" "$D"\n')
    guard = root / "scripts" / "launch" / "checkpoint_guard.py"
    guard.write_text("KEEP = 1\n")
    for script in (compare, records):
        monkeypatch.setattr(script, "ROOT", root)
    data = tmp_path / "data"
    data.mkdir()
    (data / "prep.json").write_text("{}")
    exp = RecordingExperiment(tmp_path / "work")
    system = ("pgn", "cfg", [], None, 9)

    def trains():
        before = len(exp.commands)
        compare.train(exp, data, system, retrain=False)
        return len(exp.commands) - before

    assert trains() == 1 and trains() == 0
    guard.write_text("KEEP = 2\n")
    assert trains() == 1 and trains() == 0


def test_a_stored_record_with_an_input_the_wanted_one_lacks_is_not_reused(tmp_path):
    """Records are compared both ways: an entry only one of them holds (a word2vec input) means another training,
    and the reason names the entry and the side that holds it."""
    exp = CountingExperiment(tmp_path / "work")
    data, model = tmp_path / "data", tmp_path / "work" / "models" / "pgn"
    data.mkdir()
    (data / "prep.json").write_text("{}")
    plain = records.training_record("lcsts_char", ["--max-update", "3"], data)
    with_vectors = records.training_record("lcsts_char", ["--max-update", "3"], data, inputs={"w2v": "ab" * 32})
    model.mkdir(parents=True)
    (model / "train_seconds").write_text("1.0\n")
    (exp.logs / "train.log").write_text(exp.LOG)

    def verdict(stored, want):
        (model / records.RECORD).write_text(json.dumps(stored))
        return records.reuse_verdict(exp, model, "train.log", want, saves=False)

    assert verdict(plain, plain) == (None, None) and verdict(with_vectors, with_vectors) == (None, None)
    assert verdict(with_vectors, plain) == ("its record holds inputs, which the wanted record lacks", None)
    assert verdict(plain, with_vectors) == ("the wanted record holds inputs, which its record lacks", None)
    (model / records.RECORD).write_text(json.dumps(dict(with_vectors, code=dict(plain["code"], sha256="0" * 64))))
    reason, kept = records.reuse_verdict(exp, model, "train.log", plain, reuse_stale=True, saves=False)
    assert kept is None and "inputs" in reason and "code" in reason  # --reuse-stale keeps only a code change


class CountingExperiment(Experiment):
    """Counts the commands; each writes the log ``LOG`` and nothing else (a training with --no-save)."""

    LOG = "loss=1.0\n"

    def __init__(self, work):
        super().__init__("test", work)
        self.runs = 0

    def run(self, cmd, log_name, stdout=None, append=False):
        self.runs += 1
        (self.logs / log_name).write_text(self.LOG)
        return 1.0


def test_a_training_that_saves_nothing_is_reused_by_its_record_alone_and_never_resumed(tmp_path):
    """see2017_adagrad.py's runs (fairseq-train --no-save): no checkpoint to check or resume from."""
    exp = CountingExperiment(tmp_path / "work")
    data, model = tmp_path / "data", tmp_path / "work" / "models" / "adagrad"
    data.mkdir()
    (data / "prep.json").write_text("{}")

    def trains(updates, saves=False):
        before = exp.runs
        want = records.training_record("lcsts_char", ["--max-update", updates, "--no-save"], data)
        records.train_or_reuse(exp, "adagrad", model, "train-adagrad.log", want, ["fairseq-train"], saves=saves)
        return exp.runs - before

    assert trains(3) == 1 and trains(3) == 0 and not (model / "checkpoint_best.pt").exists()
    assert trains(3, saves=True) == 1  # a training that should have saved a checkpoint and did not: again
    assert trains(4) == 1 and records.read_record(model)["train_options"][-2:] == ["4", "--no-save"]
    (model / "train_seconds").unlink()  # an interrupted run of the same record: started again, not resumed
    (model / "checkpoint_last.pt").write_bytes(b"stray")
    assert trains(4) == 1 and not (model / "checkpoint_last.pt").exists()


class DecodingExperiment(Experiment):
    """Counts the decodes; each writes 3 summaries and a log."""

    def __init__(self, work):
        super().__init__("test", work)
        self.decodes = 0

    def run(self, cmd, log_name, stdout=None):
        self.decodes += 1
        hyps = Path(cmd[cmd.index("--output") + 1])
        hyps.write_text("a .\nb .\nc .\n")
        (self.logs / log_name).write_text("Translated 3 sentences\n")
        return 1.0


def test_a_decode_is_reused_only_with_the_same_command_checkpoint_test_data_and_code(tmp_path, monkeypatch):
    code = tmp_path / "beam.py"
    code.write_text("beam = 4\n")
    monkeypatch.setattr(compare, "decoding_code", lambda: [code])
    data, model = tmp_path / "data", tmp_path / "model"
    (data / "bin").mkdir(parents=True)
    (data / "prep.json").write_text("{}")
    (data / "bin" / "test.src-tgt.src.bin").write_bytes(b"doc")
    model.mkdir()
    (model / "checkpoint_best.pt").write_bytes(b"weights")
    exp = DecodingExperiment(tmp_path / "work")
    hyps = exp.work / "outputs" / "pgn:1.beam.txt"
    hyps.parent.mkdir()

    def decodes(*options):
        before = exp.decodes
        compare.decode(exp, ["generate.sh", "--output", str(hyps), *options], data, model, hyps, "generate.log", 3)
        return exp.decodes - before

    assert decodes() == 1 and decodes() == 0 and hyps.with_name("pgn:1.beam.decode.json").is_file()
    per_doc = exp.logs / "rouge_pgn:1.beam.per_doc.tsv"  # lib.per_doc_rouge's cache of these summaries' scores
    per_doc.write_text("doc\trouge-1-f\n")
    assert decodes() == 0 and per_doc.is_file()
    assert decodes("--block-ngram-repeat", "3") == 1 and decodes("--block-ngram-repeat", "3") == 0
    assert not per_doc.exists()  # new summaries: the old per-document scores are gone, not reused
    (model / "checkpoint_best.pt").write_bytes(b"retrained")
    assert decodes("--block-ngram-repeat", "3") == 1
    code.write_text("beam = 5\n")
    assert decodes("--block-ngram-repeat", "3") == 1
    (data / "bin" / "test.src-tgt.src.bin").write_bytes(b"other doc")
    assert decodes("--block-ngram-repeat", "3") == 1
    hyps.write_text("a .\n")  # a summary file cut short
    assert decodes("--block-ngram-repeat", "3") == 1 and decodes("--block-ngram-repeat", "3") == 0


def test_the_decoding_code_is_the_plugins_without_the_criterions_and_generate_sh():
    files = records.decoding_code()
    assert ROOT / "generate.sh" in files and ROOT / "fairseq_plugins" / "generation" / "sampling.py" in files
    assert ROOT / "fairseq_plugins" / "models" / "dca_lstm.py" in files and ROOT / "configs" / "cnndm_small.conf" in files
    assert not any("criterions" in f.parts for f in files)


def test_a_label_with_a_colon_gets_a_folder_fairseq_can_load(tmp_path):
    exp = RecordingExperiment(tmp_path)
    model, _ = compare.train(exp, tmp_path / "data", ("control:lstm", "lcsts_char_lstm", [], None, 5), False)
    assert ":" not in model.name and model == tmp_path / "models" / "control_lstm"
    compare.train(exp, tmp_path / "data", ("rl", "lcsts_char_rl", [], "control:lstm", 5), False)
    start = exp.commands[-1][exp.commands[-1].index("--finetune-from-model") + 1]
    assert start == str(model / "checkpoint_best.pt")


@pytest.mark.slow
def test_song2020_only_runs_the_named_systems(monkeypatch, tmp_path):
    """song2020_lcsts.py --only: compare.py gets exactly the named systems, each part only if it has one; --seed
    relabels them and passes the seed; an unknown label stops at start-up with the known ones listed."""
    import subprocess

    from scripts.experiments import song2020_lcsts

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kwargs: calls.append(cmd))
    monkeypatch.setattr(sys, "argv", ["song2020_lcsts.py", "--work", str(tmp_path), "--only", "full,no_gate+copy"])
    song2020_lcsts.main()
    assert len(calls) == 1  # the controls part has neither system
    variants = [calls[0][i + 1] for i, arg in enumerate(calls[0]) if arg == "--variant"]
    assert [v.split()[0] for v in variants] == ["full", "no_gate+copy"]
    assert "--share-decoder-input-output-embed" not in variants[0]  # the config ties W_o, not an extra option
    decodes = [calls[0][i + 1] for i, arg in enumerate(calls[0]) if arg == "--decode"]
    assert decodes == ["beam", "greedy --beam 1"]  # the table's beam 5 and the checkpoint-selecting greedy

    calls.clear()
    monkeypatch.setattr(sys, "argv", ["song2020_lcsts.py", "--work", str(tmp_path), "--only", "no_gate,full:fixed_lr",
                                      "--seed", "3"])
    song2020_lcsts.main()
    assert len(calls) == 2  # one system in each part
    variants = [cmd[i + 1] for cmd in calls for i, arg in enumerate(cmd) if arg == "--variant"]
    assert variants == ["no_gate_seed3 song2020_lcsts_cpu --no-selective-gate --seed 3",
                        "full:fixed_lr_seed3 song2020_lcsts_cpu --seed 3"]
    assert calls[0][calls[0].index("--launcher") + 1] == "local"

    calls.clear()  # the launcher options go to compare.py
    monkeypatch.setattr(sys, "argv", ["song2020_lcsts.py", "--work", str(tmp_path), "--only", "full", "--launcher",
                                      "slurm", "--partition", "gpu", "--gpus", "2", "--time", "24:00:00"])
    song2020_lcsts.main()
    launcher = calls[0][calls[0].index("--launcher"):calls[0].index("--variant")]
    assert launcher == ["--launcher", "slurm", "--gpus", "2", "--partition", "gpu", "--time", "24:00:00"]

    monkeypatch.undo()
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "experiments" / "song2020_lcsts.py"),
                          "--only", "full,nope"], capture_output=True, text=True, env=command_env())
    assert bad.returncode == 2 and "--only: unknown system nope (known: " in bad.stderr


@pytest.mark.slow
def test_dca2018_runs_the_posters_rows_and_its_rl_row_with_its_parent(monkeypatch, tmp_path):
    """dca2018_cnndm.py: --only selects rows; --seed relabels them (row 6's parent too); row 6 without row 5 in
    the same run, or an unknown label, stops with a message."""
    import subprocess

    from scripts.experiments import dca2018_cnndm

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kwargs: calls.append(list(map(str, cmd))))
    monkeypatch.setattr(sys, "argv", ["dca2018_cnndm.py", "--work", str(tmp_path), "--seed", "2",
                                      "--only", "1:single_mle,5:agents_comm_caa,6:rl"])
    dca2018_cnndm.main()
    cmd = calls[0]
    variants = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--variant"]
    assert [v.split()[:2] for v in variants] == [["1:single_mle_seed2", "cnndm_small"],
                                                  ["5:agents_comm_caa_seed2", "dca_lstm_cnndm_small"]]
    assert all(v.endswith("--seed 2") for v in variants) and "--no-coverage" in variants[0]
    rl = cmd[cmd.index("--continue") + 1].split()
    assert rl[:3] == ["6:rl_seed2", "5:agents_comm_caa_seed2", "dca_lstm_cnndm_small"]
    assert "self_critical_cohesion" in rl and rl[-2:] == ["--seed", "2"]
    decodes = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--decode"]
    assert [d.split()[0] for d in decodes] == ["beam", "beam+block", "beam+block_no_q"]
    assert cmd[cmd.index("--lead") + 1] == "3" and cmd[cmd.index("--corpus") + 1] == "cnndm"

    calls.clear()  # --controls adds the control systems; --only names one without the others
    monkeypatch.setattr(sys, "argv", ["dca2018_cnndm.py", "--work", str(tmp_path), "--only", "control:5_old_sem"])
    dca2018_cnndm.main()
    variants = [calls[0][i + 1] for i, arg in enumerate(calls[0]) if arg == "--variant"]
    assert len(variants) == 1 and "--cohesion-form cosine" in variants[0] and "--continue" not in calls[0]
    calls.clear()
    monkeypatch.setattr(sys, "argv", ["dca2018_cnndm.py", "--work", str(tmp_path), "--controls"])
    dca2018_cnndm.main()
    variants = [calls[0][i + 1].split() for i, arg in enumerate(calls[0]) if arg == "--variant"]
    labels = [v[0] for v in variants]
    assert labels[-3:] == ["control:5_old_sem", "control:dca_one_agent", "control:fairseq_lstm"]
    assert len(labels) == 11 and variants[-1][1:] == ["cnndm_lstm"]  # fairseq's lstm as its config trains it
    continued = [calls[0][i + 1].split() for i, arg in enumerate(calls[0]) if arg == "--continue"]
    assert [c[0] for c in continued] == ["6:rl", "control:6_ml_continued", "control:6_rl_gamma_0.97",
                                         "control:6_rl_no_sample_sem", "control:6_rl_blocked_baseline"]
    gamma = lambda c: c[c.index("--rl-gamma") + 1]  # noqa: E731
    assert gamma(continued[0]) == gamma(continued[3]) == "0.9984" and gamma(continued[2]) == "0.97"
    assert "--no-sample-cohesion" in continued[3] and "--no-sample-cohesion" not in continued[0]
    assert "self_critical_cohesion" not in continued[1] and "--rl-baseline-block-ngram" in continued[4]

    monkeypatch.undo()
    script = str(ROOT / "scripts" / "experiments" / "dca2018_cnndm.py")
    orphan = subprocess.run([sys.executable, script, "--only", "6:rl"], capture_output=True, text=True,
                            env=command_env())
    assert orphan.returncode != 0 and "needs its parent 5:agents_comm_caa" in orphan.stderr
    bad = subprocess.run([sys.executable, script, "--only", "1:single_mle,nope"], capture_output=True, text=True,
                         env=command_env())
    assert bad.returncode == 2 and "--only: unknown system nope (known: " in bad.stderr


def test_dca2018_report_counts_repeated_sentences_and_pairs_rows_by_seed(tmp_path):
    """The report's repeated sentences at distance 1 and 2, and which rows its bootstraps compare."""
    from scripts.experiments import dca2018_report as report

    summaries = ["a b . <q> a b . <q> c . <q> a b .", "x . y . x ."]
    assert report.repeated_sentences(summaries, 1) == 20.0  # 1 of (3 + 2) sentences repeats the one before
    assert abs(report.repeated_sentences(summaries, 2) - 200 / 3) < 1e-9  # 2 of (2 + 1)
    assert report.split_seed("2:single_sem_seed2") == ("2:single_sem", "_seed2")
    assert report.split_seed("ref:pgn_coverage") == ("ref:pgn_coverage", "")

    def per_doc(name, scores):
        path = tmp_path / f"{name}.tsv"
        path.write_text("doc\trouge-1-f\trouge-2-f\trouge-l-f\n"
                        + "".join(f"{i}\t{s}\t{s}\t{s}\n" for i, s in enumerate(scores)))
        return {"system": name, "decode": "beam", "per_doc": path}

    entries = [per_doc("1:single_mle", [0.2, 0.3]), per_doc("2:single_sem", [0.3, 0.3]),
               per_doc("3:agents_no_comm", [0.3, 0.4]), per_doc("1:single_mle_seed2", [0.1, 0.1]),
               per_doc("3:agents_no_comm_seed2", [0.2, 0.2]), per_doc("5:agents_comm_caa", [0.3, 0.3]),
               per_doc("control:6_ml_continued", [0.3, 0.2]), per_doc("6:rl", [0.2, 0.2]),
               per_doc("control:6_rl_gamma_0.97", [0.3, 0.3])]
    rows = report.significance_table(entries, "beam")[4:]
    pairs = [tuple(cell.strip() for cell in row.split("|")[1:3]) for row in rows]
    assert pairs == [("2:single_sem", "1:single_mle"), ("3:agents_no_comm", "1:single_mle"),
                     ("3:agents_no_comm", "2:single_sem"), ("3:agents_no_comm_seed2", "1:single_mle_seed2"),
                     ("5:agents_comm_caa", "1:single_mle"),  # its row above (4) is not among the entries
                     ("control:6_ml_continued", "1:single_mle"), ("control:6_ml_continued", "5:agents_comm_caa"),
                     ("6:rl", "1:single_mle"), ("6:rl", "5:agents_comm_caa"), ("6:rl", "control:6_ml_continued"),
                     ("control:6_rl_gamma_0.97", "1:single_mle"),
                     ("control:6_rl_gamma_0.97", "5:agents_comm_caa"), ("control:6_rl_gamma_0.97", "6:rl"),
                     ("control:6_rl_gamma_0.97", "control:6_ml_continued")]
    assert rows[0].split("|")[3].strip().startswith("+5.00 [+0.00, +10.00]")  # B - A = (+10, 0) points


def test_dca2018_report_reads_the_finished_systems_of_a_run_still_going(tmp_path):
    """Without results.json (a run stopped or still going), the report takes the systems whose training finished
    and their scored decodings, as compare.py would have tabulated them; an unfinished system is left out."""
    from scripts.experiments import dca2018_report as report

    (tmp_path / "logs").mkdir()
    (tmp_path / "outputs").mkdir()
    for label, finished in (("1:single_mle", True), ("2:single_sem", False)):
        (tmp_path / "logs" / f"train_{label}.log").write_text("num_updates=10, wps=50\nnum_updates=20, wps=70\n")
        model = tmp_path / "models" / label.replace(":", "_")
        model.mkdir(parents=True)
        if finished:
            (model / "train_seconds").write_text("90.0\n")
            (model / "valid_stats.json").write_text('{"nll_bits": 6.5, "end_cos_1": 0.25}')
        (tmp_path / "logs" / f"rouge_{label}.beam.out").write_text(
            "ROUGE-1 25.50 [25.0 - 26.0]\nROUGE-2 6.25 [6.0 - 6.5]\nROUGE-L 23.00 [22.5 - 23.5]\n")
        (tmp_path / "outputs" / f"{label}.beam.txt").write_text("a b c a b c .\nd e .\n")
    run = report.Run(tmp_path)
    assert not run.finished and list(run.trained) == ["1:single_mle"]
    facts = run.trained["1:single_mle"]
    assert facts["updates"] == 20 and facts["train_min"] == 1.5 and facts["valid_nll_bits"] == 6.5
    [row] = run.rows
    assert row["system"] == "1:single_mle" and row["decode"] == "beam"
    assert row["rouge"] == {"ROUGE-1": 25.5, "ROUGE-2": 6.25, "ROUGE-L": 23.0}
    assert abs(row["repeated_trigrams"] - 100 / 6) < 1e-9  # 1 repeat among 5 + 1 trigrams

    # a later run with --only 2:single_sem finishes in the same folder: its results.json lists row 2 alone,
    # and row 1, finished by the earlier run, stays in the report
    (tmp_path / "models" / "2_single_sem" / "train_seconds").write_text("60.0\n")
    rouge = {"ROUGE-1": 27.0, "ROUGE-2": 7.0, "ROUGE-L": 24.0}
    (tmp_path / "results.json").write_text(json.dumps({
        "rows": [{"system": "2:single_sem", "decode": "beam", "rouge": rouge}],
        "trained": {"2:single_sem": {"updates": 20, "train_min": 1.0}}}))
    run = report.Run(tmp_path)
    assert run.finished and sorted(run.trained) == ["1:single_mle", "2:single_sem"]
    assert [(row["system"], row["rouge"]["ROUGE-1"]) for row in run.rows] == [("2:single_sem", 27.0),
                                                                             ("1:single_mle", 25.5)]


def test_dca2018_report_lists_a_system_decoded_in_two_runs_once_and_refuses_two_versions(tmp_path):
    """Row 5 decoded again in the folder of a continued system: listed once (from the first run) when its
    summaries are the same; different summaries under one label stop the report naming both folders."""
    from scripts.experiments import dca2018_report as report

    class FakeRun:
        def __init__(self, work, rows):
            self.work, self.rows, self.trained = work, rows, {}
            self.name = str(work)
            (work / "outputs").mkdir(parents=True)

        def per_doc(self, name):
            return self.work / f"{name}.tsv"

    row5 = {"system": "5:agents_comm_caa", "decode": "beam"}
    first = FakeRun(tmp_path / "b", [dict(row5)])
    second = FakeRun(tmp_path / "d", [dict(row5), {"system": "control:6_rl_gamma_0.97", "decode": "beam"}])
    for run in (first, second):
        for row in run.rows:
            (run.work / "outputs" / f"{report.output_name(row)}.txt").write_text("a .\nb .\n")
    entries = report.collect([first, second])
    assert [(e["system"], e["run"]) for e in entries] == [("5:agents_comm_caa", first),
                                                          ("control:6_rl_gamma_0.97", second)]
    (second.work / "outputs" / "5:agents_comm_caa.beam.txt").write_text("a .\nc .\n")
    with pytest.raises(SystemExit, match="5:agents_comm_caa.beam has other summaries in .*/d than in .*/b"):
        report.collect([first, second])


def test_a_failed_system_keeps_its_row_marked_with_its_log():
    rouge = {"ROUGE-1": 30.0, "ROUGE-2": 10.0, "ROUGE-L": 25.0}
    rows = [{"system": "ok", "decode": "beam", "rouge": rouge}, {"system": "broken", "failed": "logs/train_broken.log"}]
    lines = compare.table(rows, {"ok": {"updates": 9}})
    assert lines[2].startswith("| ok | beam | 30.00 | 10.00 | 25.00 |")
    assert lines[3] == "| broken | **failed**: see `logs/train_broken.log` |" + " |" * 15
    assert all(line.count("|") == 18 for line in lines[2:])  # as many columns as the header


def test_reuse_stale_is_refused_with_the_slurm_launcher():
    result = run([sys.executable, "scripts/experiments/compare.py", "--name", "t", "--corpus", "lcsts", "--config",
                  "lcsts_char", "--updates", "3", "--variant", "a:lcsts_char", "--reuse-stale", "--launcher", "slurm"],
                 check=False)
    assert result.returncode == 2 and "--reuse-stale keeps older systems in local runs only" in result.stderr


def test_verdict_holds_a_direction_only_when_every_seed_shows_it_with_its_interval():
    from scripts.experiments.lib import verdict

    assert verdict([(1.0, 0.2, 1.8), (0.6, 0.1, 1.1)]).startswith("B > A in every seed (2)")
    assert verdict([(-1.0, -1.8, -0.2), (-0.6, -1.1, -0.1)]).startswith("B < A in every seed (2)")
    assert verdict([(1.0, 0.2, 1.8), (0.3, -0.4, 1.0)]).startswith("inconclusive")  # one interval spans zero
    assert verdict([(1.0, 0.2, 1.8), (-0.9, -1.5, -0.3)]).startswith("inconclusive")  # the seeds disagree
    assert verdict([(3.0, 2.0, 4.0)]) == "inconclusive (one seed: +3.00 [+2.00, +4.00])"
    assert verdict([]) == "inconclusive (no seed)"


def test_a_papers_direction_reproduces_only_when_every_seed_shows_its_sign_with_its_interval():
    from scripts.experiments.lib import against_paper

    up, down, level = (1.0, 0.2, 1.8), (-0.6, -1.1, -0.1), (0.3, -0.4, 1.0)
    assert against_paper(+0.78, [up, up]) == "reproduces"
    assert against_paper(-0.83, [down, down]) == "reproduces"  # the paper's score falls, and so does ours
    assert against_paper(-0.83, [up, up]) == "does not reproduce"
    assert against_paper(+0.78, [up, level]) == "inconclusive"
    assert against_paper(+0.78, [up, down]) == "inconclusive"  # the seeds disagree
    assert against_paper(+0.78, [up]) == "inconclusive"  # one seed is never enough
    assert against_paper(0.0, [up, up]) == "inconclusive"  # no direction in the paper to reproduce


def test_compare_reuses_its_data_only_when_the_config_prepared_it_as_it_reads_now(tmp_path):
    from scripts.experiments.compare import check_data_config
    from scripts.experiments.lib import config_array

    record = tmp_path / "config.json"
    prep_args = config_array("lcsts_char", "PREP_ARGS")
    record.write_text(json.dumps({"name": "lcsts_char", "prep_args": prep_args}))
    check_data_config(tmp_path, "lcsts_char")  # the same: reused
    with pytest.raises(SystemExit, match=r"prepared with -c lcsts_char .*not --config scitldr_small"):
        check_data_config(tmp_path, "scitldr_small")
    record.write_text(json.dumps({"name": "lcsts_char", "prep_args": prep_args[:-1] + ["999"]}))
    with pytest.raises(SystemExit, match=r"delete .* to prepare it again"):
        check_data_config(tmp_path, "lcsts_char")  # the config's PREP_ARGS changed since
    record.unlink()
    with pytest.raises(SystemExit, match=r"prepared with -c \(unrecorded\)"):
        check_data_config(tmp_path, "lcsts_char")


def test_a_row_below_lead_or_fairseqs_lstm_is_flagged_in_the_table():
    from scripts.experiments.lib import baseline_flags

    def row(system, decode, r1):
        return {"system": system, "decode": decode, "rouge": {"ROUGE-1": r1, "ROUGE-2": 1.0, "ROUGE-L": 1.0}}

    rows = [row("LEAD-3", "", 29.2), row("control:fairseq_lstm", "beam", 21.0),
            row("control:fairseq_lstm", "greedy", 18.0), row("pgn", "beam", 30.0), row("pgn", "greedy", 20.0),
            row("gru", "beam", 19.0), {"system": "x", "failed": "log"}]
    flags = baseline_flags(rows)
    assert [flags.get(id(r), "") for r in rows[:6]] == ["", "**LEAD-3**", "**LEAD-3**", "", "**LEAD-3**",
                                                        "**LEAD-3**, **control:fairseq_lstm**"]
    seed2 = row("gru_seed2", "beam", 19.0)  # fairseq's lstm counts only against rows of its own seed
    flags = baseline_flags(rows + [seed2], seed_of=lambda system: system.partition("_seed")[2])
    assert flags[id(seed2)] == "**LEAD-3**" and flags[id(rows[5])] == "**LEAD-3**, **control:fairseq_lstm**"
    lines = compare.table(rows, {})
    assert lines[0].endswith("| below a trivial baseline |") and lines[-2].endswith(
        "| **LEAD-3**, **control:fairseq_lstm** |")


def test_train_facts_count_the_epochs_the_log_reached(tmp_path):
    from scripts.experiments.lib import train_facts

    log = tmp_path / "train.log"
    stamp = "2026-11-27 21:43:31 | INFO | "
    log.write_text(stamp + "train_inner | epoch 001:     50 / 74 loss=8.1, num_updates=50, wps=900\n"
                   + stamp + "train | epoch 001 | loss 7.9 | num_updates 74\n"
                   + stamp + "train_inner | epoch 002:     37 / 74 loss=7.2, num_updates=111, wps=950\n")
    facts = train_facts(log)
    assert facts["updates"] == 111 and facts["epochs"] == pytest.approx(1.5)
    # stopped by --max-update at update 100 of epoch 2: fairseq still closes it with an "epoch 002 |" line
    log.write_text(stamp + "fairseq.data.iterators | grouped total_num_itrs = 74\n"
                   + stamp + "train | epoch 001 | loss 7.9 | num_updates 74\n"
                   + stamp + "fairseq.data.iterators | grouped total_num_itrs = 74\n"
                   + stamp + "train | epoch 002 | loss 7.5 | num_updates 100\n")
    assert train_facts(log)["epochs"] == pytest.approx(100 / 74)  # not 2
    log.write_text("no fairseq line\n")
    assert train_facts(log)["epochs"] is None


def scored_compare_run(work: Path, f1s: dict, tabulated=("a", "b")) -> Path:
    """A compare.py work folder of systems decoded with ``beam`` whose per-document scores are cached: every
    document of system NAME scores f1s[NAME]; results.json lists the systems ``tabulated`` (NAME or NAME_seedN)."""
    for folder in ("logs", "outputs", "data", "models/a"):
        (work / folder).mkdir(parents=True)
    (work / "data" / "prep.json").write_text('{"settings": {"lang": "zh"}}')
    (work / "models" / "a" / "checkpoint_best.pt").write_bytes(b"weights")
    (work / "results.md").write_text("# t\n\n| table |\n")
    (work / "results.json").write_text(json.dumps({"rows": [{"system": name, "decode": "beam"} for name in tabulated],
                                                   "trained": {}}))
    for name, f1 in f1s.items():
        (work / "outputs" / f"{name}.beam.txt").write_text("x\ny\n")
        (work / "logs" / f"rouge_{name}.beam.per_doc.tsv").write_text(
            "doc\trouge-1-f\trouge-2-f\trouge-l-f\n" + "".join(f"{i}\t{f1}\t{f1}\t{f1}\n" for i in range(4)))
    return work


def test_paired_bootstraps_writes_one_row_per_pair_and_decoding_and_refuses_an_unknown_system(tmp_path, capsys):
    """paired_bootstraps.py on a work folder whose per-document scores are cached: B - A with its interval and the
    rule's one-seed verdict per score; a pair naming a system the folder lacks stops with its path."""
    from scripts.experiments import paired_bootstraps

    scored_compare_run(tmp_path, {"a": 0.2, "b": 0.3, "c": 0.1})
    paired_bootstraps.main([str(tmp_path), "--pair", "b=a", "--table"])
    out = capsys.readouterr().out
    assert out.startswith("# t\n") and "per seed (1): 1 intervals of 3 scores each (3 in all)" in out
    assert "| b | a | beam | inconclusive (one seed: +10.00 [+10.00, +10.00]) |" in out
    paired_bootstraps.main([str(tmp_path), str(tmp_path), "--pair", "b=a"])  # the same folder as two seeds
    assert "| b | a | beam | B > A in every seed (2): +10.00 [+10.00, +10.00], +10.00" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"c\.beam: not a system and decoding of .* table"):
        paired_bootstraps.main([str(tmp_path), "--pair", "c=a"])  # outputs of a system its table does not list
    with pytest.raises(SystemExit):
        paired_bootstraps.main([str(tmp_path), "--pair", "nonsense"])


def test_paired_bootstraps_compares_two_decodings_of_each_named_system(tmp_path, capsys):
    """--decode-pair B=A with --system S: decoding B - decoding A of each system, one row each; --decode-pair
    without --system, no comparison at all, and a decoding the table lacks stop with a message."""
    from scripts.experiments import paired_bootstraps

    work = scored_compare_run(tmp_path, {"a": 0.2, "b": 0.3})
    rows = json.loads((work / "results.json").read_text())["rows"]
    for name, f1 in (("a", 0.25), ("b", 0.2)):
        (work / "outputs" / f"{name}.block.txt").write_text("x\ny\n")
        (work / "logs" / f"rouge_{name}.block.per_doc.tsv").write_text(
            "doc\trouge-1-f\trouge-2-f\trouge-l-f\n" + "".join(f"{i}\t{f1}\t{f1}\t{f1}\n" for i in range(4)))
        rows.append({"system": name, "decode": "block"})
    (work / "results.json").write_text(json.dumps({"rows": rows, "trained": {}}))
    paired_bootstraps.main([str(work), str(work), "--decode-pair", "block=beam", "--system", "a", "--system", "b"])
    out = capsys.readouterr().out
    assert "per seed (2): 4 intervals of 3 scores each (12 in all)" in out
    assert "| a | a | block - beam | B > A in every seed (2): +5.00 [+5.00, +5.00], +5.00" in out
    assert "| b | b | block - beam | B < A in every seed (2): -10.00 [-10.00, -10.00], -10.00" in out
    for argv, message in ((["--decode-pair", "block=beam"], "--decode-pair and --system go together"),
                          ([], "nothing to compare")):
        with pytest.raises(SystemExit):
            paired_bootstraps.main([str(work), *argv])
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit, match=r"a\.greedy: not a system and decoding of .* table"):
        paired_bootstraps.main([str(work), "--decode-pair", "greedy=beam", "--system", "a"])


def test_paired_bootstraps_archives_each_seed_and_rebuilds_the_same_section_from_the_archives(tmp_path, capsys):
    """--archive DIR packs each WORK's tables, summaries and per-document scores (no checkpoint, no data) into
    DIR/NAME.tar.xz (folders of one name are told apart by the folders above them); given the archives,
    paired_bootstraps.py prints the same tables and intervals.  An archive without a pair's per-document scores,
    and a folder given twice, stop with a message."""
    import tarfile

    from scripts.experiments import paired_bootstraps

    seeds = [scored_compare_run(tmp_path / "seed1", {"a": 0.2, "b": 0.3}),
             scored_compare_run(tmp_path / "seed2", {"a_seed2": 0.2, "b_seed2": 0.25}, ("a_seed2", "b_seed2"))]
    paired_bootstraps.main([*map(str, seeds), "--pair", "b=a", "--table", "--archive", str(tmp_path / "kept")])
    from_folders = capsys.readouterr().out
    archives = [tmp_path / "kept" / "seed1.tar.xz", tmp_path / "kept" / "seed2.tar.xz"]
    with tarfile.open(archives[0]) as packed:
        members = set(packed.getnames())
    assert "logs/rouge_b.beam.per_doc.tsv" in members and "results.md" in members and "outputs/a.beam.txt" in members
    assert not any(name.startswith(("data", "models/a/checkpoint")) for name in members)
    paired_bootstraps.main([*map(str, archives), "--pair", "b=a", "--table"])
    from_archives = capsys.readouterr().out
    assert "B > A in every seed (2): +10.00 [+10.00, +10.00], +5.00 [+5.00, +5.00]" in from_archives
    command_line = "Written by `python scripts/experiments/paired_bootstraps.py "
    assert [line for line in from_folders.splitlines() if not line.startswith(command_line)] == \
        [line for line in from_archives.splitlines() if not line.startswith(command_line)]

    (tmp_path / "seed1" / "logs" / "rouge_b.beam.per_doc.tsv").unlink()
    paired_bootstraps.archive(paired_bootstraps.archive_targets([tmp_path / "seed1"], tmp_path / "bare"))
    with pytest.raises(SystemExit, match=r"b\.beam: its per-document scores are not in seed1, which keeps no data/"):
        paired_bootstraps.main([str(tmp_path / "bare" / "seed1.tar.xz"), "--pair", "b=a"])
    twin = scored_compare_run(tmp_path / "other" / "seed1", {"a": 0.2, "b": 0.3})
    targets = paired_bootstraps.archive_targets([seeds[1], twin, seeds[1].parent / "seed1"], tmp_path / "kept")
    assert [dest.name for _, dest in targets] == ["seed2.tar.xz", "other_seed1.tar.xz",
                                                 f"{tmp_path.name}_seed1.tar.xz"]
    with pytest.raises(SystemExit, match="a folder is given twice"):
        paired_bootstraps.main([str(twin), str(twin), "--pair", "b=a", "--archive", str(tmp_path / "twins")])


@pytest.mark.parametrize("table, archives", [
    ("lcsts_paulus_and_rl.md", ("lcsts_paulus_and_rl/run.tar.xz", "lcsts_paulus_and_rl/run_seed2.tar.xz")),
    ("song2020_table2_lcsts.md", ("song2020_table2_lcsts/seed1_main.tar.xz",
                                  "song2020_table2_lcsts/seed2_main.tar.xz")),
    ("decoding_lcsts.md", None),  # its command names the archives themselves
    ("decoding_cnndm.md", None),
])
def test_a_committed_table_is_what_its_archives_give(capsys, table, archives):
    """A results file of paired_bootstraps.py, rebuilt by the command its paired section names from the archives
    kept beside it (in place of the work folders where the command names folders): the same tables and the same
    intervals, line for line."""
    import shlex

    from scripts.experiments import paired_bootstraps

    results = ROOT / "docs" / "results"
    committed = (results / table).read_text(encoding="utf-8")
    written_by = next(line for line in committed.splitlines() if line.startswith("Written by `"))
    argv = shlex.split(written_by[len("Written by `"):-2])[2:]  # after "python scripts/.../paired_bootstraps.py"
    folders = [arg for arg in argv if not arg.startswith("-")][:2]
    assert len(folders) == 2 and "--out" in argv
    out = argv.index("--out")
    argv = argv[:out] + argv[out + 2:]  # printed, not written over
    works = [str(results / name) for name in archives] if archives else [str(ROOT / name) for name in folders]
    paired_bootstraps.main(works + [arg for arg in argv if arg not in folders])
    rebuilt = capsys.readouterr().out
    assert rebuilt.count("| ") > 20 and "## Paired bootstraps" in rebuilt
    assert [line for line in rebuilt.splitlines() if not line.startswith("Written by")] == \
        [line for line in committed.splitlines() if not line.startswith("Written by")]


def test_leading_sentences_keeps_whole_sentences_within_the_budget():
    from scripts.experiments.corpora import leading_sentences

    assert leading_sentences("a b . c d e . f g h i .", 7) == "a b . c d e ."
    assert leading_sentences("a b . c d e .", 6) == "a b ."  # the second sentence would pass the budget
    assert leading_sentences("a b c d e f g . h .", 3) == "a b c d e f g ."  # the first one whole, even when longer
    assert leading_sentences("no end at all", 2) == "no end at all"  # a text without a sentence end is kept


def test_short_targets_counts_a_chinese_models_tokens_and_its_literal_unks():
    """A Chinese model's --no-detok summary has no spaces: its tokens come from a tokenizer, <unk> kept whole."""
    from scripts.experiments import short_targets

    figures = short_targets.stutter_figures(["巨头<unk><unk>的", "今天好"], tokenize=list)
    assert figures["unk"] == 1 and figures["tokens"] == (5 + 3) / 2
    assert figures["with_immediate_repeat"] == 50.0 and figures["doubled_first"] == 0.0
    spaced = short_targets.stutter_figures(["title title policy", "a b <unk>"])  # English: split at spaces
    assert spaced["doubled_first"] == 50.0 and spaced["unk"] == 1 and spaced["tokens"] == 3.0


def test_immediate_repeats_reads_each_word_step_of_a_summary_through_the_model():
    """step_rows on a tiny pointer-generator: one row per word step after the first, the repeat flagged, shares
    between 0 and 1, and a word twice in the source counted as such."""
    import numpy as np
    import torch

    from conftest import tiny_dictionary, tiny_model
    from fairseq_plugins.inference.inputs import SummaryDetails
    from scripts.experiments.immediate_repeats import step_rows

    dictionary = tiny_dictionary("a b c d")
    torch.manual_seed(0)
    model = tiny_model(dictionary).eval()
    source, summary = ["a", "b", "a", "c", "</s>"], ["a", "a", "d", "</s>"]
    details = SummaryDetails(text="a a d", source_tokens=source, source_oov=[False] * 5, summary_tokens=summary,
                             summary_copied_oov=[False] * 4, attention=np.zeros((4, 5)), p_gen=None, coverage=None,
                             positional_scores=np.zeros(4), score=0.0, source_markers=source, summary_markers=summary)
    rows = step_rows(details, model)
    assert [row[0] for row in rows] == [True, False]  # "a" after "a", then "d"; </s> is not a word step
    assert rows[0][2] == 1.0 and rows[1][2] == 0.0  # "a" is twice in the source, "d" not at all
    assert rows[1][1] == 0.0  # "d" is not in the source: nothing of it is copied
    assert all(0.0 <= row[1] <= 1.0 for row in rows)
