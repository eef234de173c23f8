"""Small I/O helpers shared by the libraries and the commands: strict UTF-8 line reading, atomic writing and the
error a bad input or option raises (``UserError``; the commands' plumbing is in cli/common.py).  ``-`` is stdin
as an input file and stdout as an output file.

Lines are split on ``\\n`` only (never on the other characters ``str.splitlines`` treats as line breaks, such
as U+2028 or U+0085), so that a document can never silently turn into two.  Every decoding problem is
reported with the file name and the 1-based line number.
"""
import difflib
import gzip
import os
import sys

STDIN = "-"
STDOUT = "-"
DISTRIBUTION = "fairseq-summarization-plugins"


class UserError(Exception):
    """An error caused by the input or the options: reported as one clear message, without a traceback."""


def _open_binary(path):
    if path == STDIN:
        return sys.stdin.buffer
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory, expected a file")
    if str(path).endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def display_name(path):
    return "<stdin>" if path == STDIN else str(path)


def decode_line(raw: bytes, path, lineno: int) -> str:
    """Decode one line (without its newline) as UTF-8 or raise a UserError naming file, line and column."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(
            f"{display_name(path)}:{lineno}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at byte offset "
            f"{err.start} of the line)"
        ) from None
    if lineno == 1 and text.startswith("\ufeff"):
        text = text[1:]  # a byte-order mark is an encoding artifact, not text
    return text


def read_lines(path):
    """Yield ``(lineno, text)`` for each line of a UTF-8 file (``-`` = stdin, ``.gz`` = gzip), newline removed.

    A final line without a newline is still a line; an empty file has no lines.
    """
    handle = _open_binary(path)
    try:
        try:
            for lineno, raw in enumerate(handle, 1):
                if raw.endswith(b"\n"):
                    raw = raw[:-1]
                yield lineno, decode_line(raw, path, lineno)
        except (OSError, EOFError) as err:  # e.g. a truncated or corrupt gzip file
            raise UserError(f"{display_name(path)}: cannot read: {err}") from None
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()


def count_lines(path) -> int:
    """Number of lines as ``read_lines`` sees them (no decoding)."""
    handle = _open_binary(path)
    count, last = 0, b"\n"
    try:
        while True:
            block = handle.read(1 << 20)
            if not block:
                break
            count += block.count(b"\n")
            last = block[-1:]
    except (OSError, EOFError) as err:
        raise UserError(f"{display_name(path)}: cannot read: {err}") from None
    finally:
        handle.close()
    return count + (0 if last == b"\n" else 1)


def normalize_space(text: str) -> str:
    """Collapse every run of whitespace (tabs, newlines, U+2028, NBSP, ...) to one space; strip the ends."""
    return " ".join(text.split())


class AtomicWriter:
    """Write several text files; they appear under their final names only if every write succeeded.

    Use as a context manager: ``with AtomicWriter() as w: f = w.open(path); f.write(...)``.  On an exception
    the temporary files are removed and nothing is left behind.
    """

    def __init__(self):
        self._files = []

    def open(self, path):
        """A text file to write; ``-`` is stdout (written directly, not atomically)."""
        path = str(path)
        if path == STDOUT:
            return _Stdout()
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        tmp = f"{path}.tmp{os.getpid()}"
        handle = open(tmp, "w", encoding="utf-8", newline="\n")
        self._files.append((handle, tmp, path))
        return handle

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        for handle, _tmp, _path in self._files:
            handle.close()
        if exc_type is None:
            for _handle, tmp, path in self._files:
                os.replace(tmp, path)
        else:
            for _handle, tmp, _path in self._files:
                if os.path.exists(tmp):
                    os.remove(tmp)
        return False


class _Stdout:
    """sys.stdout as AtomicWriter hands it out: written to, never closed."""

    def write(self, text):
        return sys.stdout.write(text)

    def close(self):
        sys.stdout.flush()


def no_stdout(option, path, why="this option names several files"):
    """A UserError when ``path`` is ``-`` for an output that cannot be stdout (a prefix, a directory, an image)."""
    if str(path) == STDOUT:
        raise UserError(f"{option} -: {why}, so it cannot be stdout; give a path")


def write_text(path, text):
    """Write ``text`` to the file ``path`` (UTF-8), or to stdout when ``path`` is ``-``."""
    if str(path) == STDOUT:
        sys.stdout.write(text)
    else:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)


def closest_name(name: str, names) -> str:
    """The known name a misspelled ``name`` most likely meant ("" when none is close): its first word when that
    is a name (beam_size -> beam), else difflib's closest match."""
    head = name.split("_")[0]
    if head in names:
        return head
    close = difflib.get_close_matches(name, list(names), n=1)
    return close[0] if close else ""
