"""What every command of cli/ shares: its help as plain text, ``--version``, and one way to run its body.

Exit status of every command: 0 success, 1 runtime failure, 2 usage or bad input (argparse's own usage errors
are 2 as well).
"""
import argparse
import re
import sys

from fairseq_plugins.text.textio import DISTRIBUTION, UserError


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
