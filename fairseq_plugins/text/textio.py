"""Small I/O helpers shared by the project's commands: strict UTF-8 line reading, atomic writing, user errors,
the exit statuses and the options every ``summ-*`` command has.

Exit status of every command: 0 success, 1 runtime failure, 2 usage or bad input (argparse's own usage errors
are 2 as well).  ``-`` is stdin as an input file and stdout as an output file.

Lines are split on ``\\n`` only (never on the other characters ``str.splitlines`` treats as line breaks, such
as U+2028 or U+0085), so that a document can never silently turn into two.  Every decoding problem is
reported with the file name and the 1-based line number.
"""
import argparse
import difflib
import gzip
import os
import re
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


def version() -> str:
    """The installed project's version (pyproject.toml's), or "unknown" when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def add_version(parser):
    """``--version``: prints ``PROG (fairseq-summarization-plugins VERSION)`` and exits 0."""
    parser.add_argument("--version", action="version", version=f"%(prog)s ({DISTRIBUTION} {version()})")
    return parser


def finish_parser(parser):
    """A command's parser as every ``summ-*`` command has it: its help texts as plain text (``plain_text``) and
    ``--version``."""
    make_plain(parser)
    return add_version(parser)


def make_plain(parser) -> None:
    """The parser's description, epilog and option help (its subcommands' too) as plain text."""
    for name in ("description", "epilog"):
        if getattr(parser, name):
            setattr(parser, name, plain_text(getattr(parser, name)))
    for action in parser._actions:
        if action.help:
            action.help = plain_text(action.help)
        for subparser in (action.choices or {}).values() if action.nargs == argparse.PARSER else ():
            make_plain(subparser)


REST_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)(?: <[^>]*>)?`")  # :func:`name`, :class:`~a.b.Name`
REST_LITERAL = re.compile(r"``(.+?)``|`([^`\n]+)`")


def plain_text(text: str) -> str:
    """reST markup of a docstring as a terminal should show it: roles reduced to their target's name
    (``:class:`~a.b.Name``` -> Name, ``:func:`a.b``` -> a.b), double and single backquotes removed."""
    text = REST_ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if "~" in m.group(0) else m.group(1), text)
    return REST_LITERAL.sub(lambda m: m.group(1) or m.group(2), text)


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


def report_error(prog, error) -> int:
    """Print ``prog: error: ...`` for an exception a command caught; return its exit status: 2 for bad input (a
    ValueError, a missing file or directory), 1 for a runtime failure (any other OSError, a RuntimeError)."""
    print(f"{prog}: error: {error}", file=sys.stderr)
    bad_input = (UserError, ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError)
    return 2 if isinstance(error, bad_input) else 1


def run_cli(prog, body, argv=None):
    """Run ``body(argv)``: exit status 0, or 2 with ``prog: error: message`` on stderr for a UserError (usage or
    bad input), 1 for a runtime failure (an OSError such as a full disk)."""
    try:
        body(argv)
    except UserError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. output piped into `head`
        return 1
    except OSError as err:  # unwritable output directory, disk full, ...: not a bug of the tool
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def warn(prog, message):
    print(f"{prog}: {message}", file=sys.stderr)


def closest_name(name: str, names) -> str:
    """The known name a misspelled ``name`` most likely meant ("" when none is close): its first word when that
    is a name (beam_size -> beam), else difflib's closest match."""
    head = name.split("_")[0]
    if head in names:
        return head
    close = difflib.get_close_matches(name, list(names), n=1)
    return close[0] if close else ""
