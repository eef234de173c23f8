#!/usr/bin/env python3
"""Make sure SAVE_DIR/checkpoint_last.pt is a complete checkpoint before training resumes from it.

    python scripts/launch/checkpoint_guard.py SAVE_DIR

Why: fairseq writes the first file of a save with torch_persistent_save (to NAME.tmp, then a rename: a kill
leaves the previous file intact), but every other file of the same save is a copy made with
PathManager.copy, i.e. shutil.copyfile *into the final name* (truncate, then write).  checkpoint_last.pt is
such a copy whenever another checkpoint is due at the same time: always with --save-interval-updates
(checkpoint_E_U.pt comes first), at the end of an epoch without --no-epoch-checkpoints (checkpointE.pt), and
when validation improves (checkpoint_best.pt).  A kill -9 (OOM killer, preemption past its grace time, node
failure) during that copy leaves a truncated checkpoint_last.pt, and the next run dies loading it.

What it does: if checkpoint_last.pt is missing or not a complete zip archive (torch.save's format; the check
reads every member and verifies its CRC), it finds the other checkpoints of SAVE_DIR that are complete, takes
the one with the most updates, and puts a copy in place of checkpoint_last.pt atomically (a temporary file,
fsync, rename).  The damaged file is kept as checkpoint_last.pt.corrupt.  Exit status 0 when
checkpoint_last.pt is fine, was repaired or there is nothing to resume from; 1 when it is damaged and no
complete checkpoint is left (delete it to start over).  The launchers (train.sbatch, torchrun_train.sh) run it
once before starting the workers; checkpoints are read with torch's safe loading (the plugin's allow-list).
"""
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path

LAST = "checkpoint_last.pt"


def say(message: str) -> None:
    print(f"checkpoint_guard: {message}", file=sys.stderr, flush=True)


def is_complete(path: Path) -> bool:
    """A whole torch.save zip archive: central directory present and every member's CRC right."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


def num_updates(path: Path) -> int:
    """The update count stored in a fairseq checkpoint (memory-mapped safe load: tensors are not read)."""
    import torch

    from fairseq_plugins.runtime import checkpoint_safety

    checkpoint_safety.allow_fairseq_checkpoints()
    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    history = state.get("optimizer_history") or [{}]
    return int(history[-1].get("num_updates", 0))


def atomic_copy(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f"{dst.name}.guard-{os.getpid()}.tmp")
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        shutil.copyfileobj(fin, fout, 16 << 20)
        fout.flush()
        os.fsync(fout.fileno())
    os.replace(tmp, dst)
    directory = os.open(dst.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def guard(save_dir: Path) -> int:
    last = save_dir / LAST
    if last.exists() and is_complete(last):
        return 0
    others = [p for p in save_dir.glob("checkpoint*.pt") if p.name != LAST and re.fullmatch(r"checkpoint[\w.]*\.pt", p.name)]
    if not last.exists() and not others:
        return 0  # a fresh start
    candidates = []
    for path in others:
        if is_complete(path):
            try:
                candidates.append((num_updates(path), path.stat().st_mtime, path))
            except Exception as error:  # noqa: BLE001  (a checkpoint we cannot read is no candidate)
                say(f"skipping {path.name}: {error}")
    if not candidates:
        if last.exists():
            say(f"{last} is damaged and no complete checkpoint is left in {save_dir}: delete it to start over")
            return 1
        return 0
    updates, _, best = max(candidates)
    if last.exists():
        os.replace(last, last.with_name(LAST + ".corrupt"))
        say(f"{last} is damaged (incomplete write); kept as {LAST}.corrupt")
    atomic_copy(best, last)
    say(f"restored {LAST} from {best.name} ({updates} updates)")
    return 0


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    save_dir = Path(args[0])
    return guard(save_dir) if save_dir.is_dir() else 0


if __name__ == "__main__":
    sys.exit(main())
