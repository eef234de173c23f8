"""``summ-package``: one self-contained, checked directory with everything a trained model needs to summarize.

    summ-package SAVE_DIR OUT [--checkpoint checkpoint_best.pt] [--data-dir DATA_DIR] [--rouge FILE]

OUT holds:
  checkpoint_best.pt        the chosen checkpoint, byte for byte
  prep.json, dict.txt       the preprocessing settings and the joined dictionary (sp.model for sentencepiece units)
  bin/dict.{src,tgt}.txt    the dictionary where fairseq-interactive looks for it (generate.sh)
  config.json               the config record (run_config.py): decoding defaults (GEN_ARGS), training command
  MODEL_CARD.md             the data, the training command, the decoding defaults, the measured test ROUGE
  manifest.json             sha256 and size of every other file

Each of these is looked up in SAVE_DIR, else in ``--data-dir`` (as ``Summarizer.from_pretrained`` does).  The
test ROUGE is known when ``--rouge FILE`` gives what ``generate.sh --score`` or ``summ-rouge`` printed for the
model (it goes into the card verbatim); otherwise the card says it was not measured.

The package loads as a model directory: ``Summarizer.from_pretrained(OUT)``, ``summ-serve OUT`` and
``generate.sh --input FILE OUT OUT`` (OUT is its own DATA_DIR).  Each of them first checks the manifest
(:func:`verify`): a missing, changed or unlisted essential file is refused with a :class:`PackageError` naming it.

    python -m fairseq_plugins.cli.package verify OUT     # exit 0, or 2 with the reason (generate.sh uses it)
Exit status: 0 success, 1 runtime failure, 2 usage or bad input.
"""
import datetime
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Optional

from fairseq_plugins.runtime import run_config
from fairseq_plugins.runtime.checkpoint_info import facts_of_state

PROG = "summ-package"
MANIFEST = "manifest.json"
CARD = "MODEL_CARD.md"
FORMAT = "summ-package"
FORMAT_VERSION = 1
CHECKPOINT = "checkpoint_best.pt"
ESSENTIAL = (CHECKPOINT, "prep.json", "dict.txt", "bin/dict.src.txt", "bin/dict.tgt.txt", "config.json", CARD)


class PackageError(ValueError):
    """A package that cannot be used: incomplete or corrupted (the message names the file)."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------- checking
def is_package(path) -> bool:
    """A directory that holds a manifest or a model card is a package, and must pass :func:`verify`."""
    path = Path(path)
    return (path / MANIFEST).is_file() or (path / CARD).is_file()


def read_manifest(path: Path) -> Dict:
    manifest = path / MANIFEST
    if not manifest.is_file():
        raise PackageError(f"{path}: incomplete package: {MANIFEST} is missing")
    try:
        record = json.loads(manifest.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PackageError(f"{manifest}: corrupted manifest: {err}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("files"), dict):
        raise PackageError(f"{manifest}: not a {PROG} manifest")
    if record.get("format_version") != FORMAT_VERSION:
        raise PackageError(f"{manifest}: format version {record.get('format_version')}, this {PROG} reads "
                           f"{FORMAT_VERSION}")
    return record


def verify(path) -> Dict:
    """The manifest of the package at ``path``, once every file it lists has its size and sha256 and every
    essential file is listed; a PackageError naming the first file that is not."""
    path = Path(path)
    record = read_manifest(path)
    files = record["files"]
    unlisted = [name for name in ESSENTIAL if name not in files]
    if unlisted:
        raise PackageError(f"{path}: incomplete package: the manifest does not list {', '.join(unlisted)}")
    for name, expected in files.items():
        file = path / name
        if not file.is_file():
            raise PackageError(f"{path}: incomplete package: {name} is missing")
        if file.stat().st_size != expected["bytes"]:
            raise PackageError(f"{file}: corrupted: {file.stat().st_size} bytes, the manifest says "
                               f"{expected['bytes']}")
        if sha256(file) != expected["sha256"]:
            raise PackageError(f"{file}: corrupted: its sha256 differs from the manifest's")
    return record


def model_title(model_dir) -> str:
    """What a model is called on a page or in a log: its card's title (a package), else its folder's name with
    the config it was trained with (config.json), else the folder's name."""
    model_dir = Path(model_dir).resolve()
    card = model_dir / CARD
    if card.is_file():
        first = card.read_text(encoding="utf-8").split("\n", 1)[0]
        if first.startswith("# Model card: "):
            return first[len("# Model card: "):].strip()
    record = run_config.read(model_dir)
    return f"{model_dir.name} (config {record['name']})" if record else model_dir.name


def check_if_package(path) -> None:
    """verify(path) when ``path`` is a package; nothing for a plain model directory."""
    if is_package(path):
        verify(path)


# ---------------------------------------------------------------------------------------------- writing
def find(name: str, save_dir: Path, data_dir: Optional[Path], data_name: Optional[str] = None) -> Optional[Path]:
    for candidate in (save_dir / name, data_dir / (data_name or name) if data_dir else None):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


def training_facts(checkpoint: Path) -> Dict:
    """arch, updates, why it was kept (checkpoint_info) and the data directory the checkpoint records."""
    import fairseq_plugins
    from fairseq import checkpoint_utils

    fairseq_plugins.register()
    state = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))
    cfg = state.get("cfg") or {}
    model, task = cfg.get("model"), cfg.get("task")
    history = state.get("optimizer_history") or [{}]
    return {"arch": getattr(model, "arch", None) or getattr(model, "_name", None) or "unknown",
            "updates": history[-1].get("num_updates"), "chosen": facts_of_state(state, checkpoint.name).describe(),
            "data": getattr(task, "data", None) if task is not None and not isinstance(task, dict)
            else (task or {}).get("data")}


def model_card(record: Optional[Dict], prep: Dict, facts: Dict, rouge: Optional[str], source: Path,
               checkpoint_name: str) -> str:
    settings = prep["settings"]
    train_stats = prep.get("stats", {}).get("train", {})
    lowercased = bool(settings.get("lowercase")) or settings["unit"] == "word"  # word units always are
    lines = [f"# Model card: {source.name}", "",
             f"Packaged by {PROG} on {datetime.date.today().isoformat()} from the model folder `{source.name}` "
             f"(`{checkpoint_name}`).", "",
             "## Model", "", f"- architecture: `{facts['arch']}`", f"- updates: {facts['updates']}",
             f"- chosen as {facts['chosen']}", "",
             "## Data", "",
             f"- training data: the folder `{folder_name(facts['data'])}` (preprocess.sh), from raw text in "
             f"`{folder_name(settings.get('raw_dir'))}`",
             f"- training documents: {train_stats.get('documents', 'unknown')}",
             f"- text: language `{settings['lang']}`, unit `{settings['unit']}`, lower-cased: "
             f"{'yes' if lowercased else 'no'}",
             f"- vocabulary: {prep.get('vocab', {}).get('regular', 'unknown')} words + {settings['num_markers']} "
             f"OOV markers; sources truncated to {settings['max_source_len']} tokens, targets to "
             f"{settings['max_target_len']}", ""]
    lines += ["## Training", ""]
    if record is None:
        lines += ["Not recorded (the model directory has no config.json).", ""]
    else:
        command = ["./train.sh", "-c", record["name"], "DATA_DIR", "SAVE_DIR", *map(unrooted, record["extra_args"])]
        lines += [f"- config `{record['name']}` (its text is in config.json)", "", "```",
                  " ".join(command), "```", "", f"TRAIN_ARGS: `{' '.join(map(unrooted, record['train_args']))}`", ""]
    lines += ["## Decoding defaults", "",
              f"GEN_ARGS: `{' '.join(record['gen_args']) if record else '(scitldr_small defaults)'}`", "",
              "## Measured test ROUGE", ""]
    lines += (["```", rouge.rstrip("\n"), "```"] if rouge else ["Not measured (give `summ-package --rouge FILE`)."])
    lines += ["", "## Use", "", "```", "summ-serve PACKAGE", "./generate.sh --input docs.txt PACKAGE PACKAGE",
              "python -c 'from fairseq_plugins.inference.hub import Summarizer; "
              "print(Summarizer.from_pretrained(\"PACKAGE\").summarize([\"a document\"]))'", "```", ""]
    return "\n".join(lines)


def folder_name(path) -> str:
    """The last folder name of a path recorded on the training machine (``bin`` is skipped: it names its parent):
    the card says what the data was called, not where it lay."""
    if not path:
        return "unknown"
    parts = [part for part in Path(str(path)).parts if part not in ("/", "bin")]
    return parts[-1] if parts else "unknown"


def unrooted(word: str) -> str:
    """A training option as the card shows it: an absolute path (``--tensorboard-logdir /home/me/tb``) becomes
    ``.../tb``, its last name, like the data folders above."""
    return f".../{Path(word).name}" if word.startswith("/") and Path(word).name else word


def write_manifest(out: Path) -> None:
    files = {}
    for file in sorted(p for p in out.rglob("*") if p.is_file() and p.name != MANIFEST):
        name = file.relative_to(out).as_posix()
        files[name] = {"sha256": sha256(file), "bytes": file.stat().st_size}
    record = {"format": FORMAT, "format_version": FORMAT_VERSION, "files": files}
    (out / MANIFEST).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def package(save_dir, out, checkpoint: str = CHECKPOINT, data_dir=None, rouge_file=None) -> Path:
    """Write the package of ``save_dir/checkpoint`` to ``out`` (a new directory; built beside it, then renamed,
    so an interrupted run leaves no half package)."""
    from fairseq_plugins.text.prepare import load_prep

    save_dir, out = Path(save_dir), Path(out)
    data_dir = Path(data_dir) if data_dir else None
    if out.exists():
        raise PackageError(f"{out} exists: give a new directory")
    source = save_dir / checkpoint
    if not source.is_file():
        raise PackageError(f"checkpoint not found: {source}")
    prep_path = find("prep.json", save_dir, data_dir)
    dict_path = find("dict.txt", save_dir, data_dir, "bin/dict.src.txt")
    if prep_path is None or dict_path is None:
        raise PackageError(f"{'prep.json' if prep_path is None else 'the dictionary'} not found in {save_dir}"
                           + (f" or {data_dir}" if data_dir else " (give --data-dir)"))
    prep, _ = load_prep(prep_path)
    rouge = Path(rouge_file).read_text(encoding="utf-8") if rouge_file else None
    record = run_config.read(save_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    work.chmod(0o777 & ~current_umask())  # mkdtemp's 0700 would make the package private to its maker
    try:
        shutil.copyfile(source, work / CHECKPOINT)
        shutil.copyfile(prep_path, work / "prep.json")
        (work / "bin").mkdir()
        for name in ("dict.txt", "bin/dict.src.txt", "bin/dict.tgt.txt"):
            shutil.copyfile(dict_path, work / name)
        sp_name = prep.get("files", {}).get("sp_model")
        if sp_name:
            sp_path = find(sp_name, save_dir, data_dir)
            if sp_path is None:
                raise PackageError(f"sentencepiece model {sp_name} not found in {save_dir} or {data_dir}")
            shutil.copyfile(sp_path, work / sp_name)
        if record is not None:
            shutil.copyfile(save_dir / run_config.FILE_NAME, work / "config.json")
        else:  # a model from before config.json: the defaults it is decoded with, said so in the card
            (work / "config.json").write_text(json.dumps({"name": "scitldr_small", "file": None, "text": None,
                                                          "role": "model", "prep_args": [], "train_args": [],
                                                          "gen_args": [], "extra_args": []}) + "\n")
        card = model_card(record, prep, training_facts(source), rouge, save_dir.resolve(), checkpoint)
        (work / CARD).write_text(card, encoding="utf-8")
        write_manifest(work)
        os.rename(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out
