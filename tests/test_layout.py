"""The README's layout map and contents list against the tree: every package and module of fairseq_plugins/ and
every top-level folder and script is on the map, everything on the map exists, and every page the README links
exists.  And every file of docs/results says in its first lines what made it (the commit) or what superseded it."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
RESULTS = ROOT / "docs" / "results"
# How a results file names the commit it was made at: "Made at commit abc1234" (records.provenance), "... at
# commit abc1234", or "Commit abc1234's tree".
MADE_AT = re.compile(r"\bat commit ([0-9a-f]{7,40})\b|\bcommit ([0-9a-f]{7,40})'s tree", re.I)
HEAD_LINES = 15


def layout_block() -> list:
    section = README.split("## Layout", 1)[1]
    return section.split("```", 2)[1].strip("\n").splitlines()


def mapped():
    """(the names on the map's top level, the names under fairseq_plugins/)."""
    top, package = set(), set()
    for line in layout_block():
        if not line.strip():
            continue
        if line.startswith("  ") and not line.startswith("   " * 7):
            package.add(line.split()[0])
        elif not line.startswith(" "):
            words = line.split()
            top |= set(words if all(w.endswith(".sh") for w in words) else words[:1])
    return top, package


def test_every_package_and_module_of_the_plugins_is_on_the_map_and_nothing_else():
    _, package = mapped()
    tree = {p.name + "/" for p in (ROOT / "fairseq_plugins").iterdir() if (p / "__init__.py").is_file()}
    tree |= {p.name for p in (ROOT / "fairseq_plugins").glob("*.py") if p.name != "__init__.py"}
    assert package == tree


def test_every_top_level_folder_and_script_is_on_the_map_and_exists():
    top, _ = mapped()
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    tracked = {name.split("/")[0] + ("/" if "/" in name else "") for name in files}
    tracked -= {".gitignore", "LICENSE", "README.md", "pyproject.toml"}  # named in the README's text
    assert len(tracked) > 8 and tracked <= top
    assert all((ROOT / name.rstrip("/")).exists() for name in top)


def test_every_page_the_readme_links_exists():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    assert len(links) >= 12
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_the_readme_stays_short_and_gives_the_two_commands():
    assert README.count("\n") <= 250
    assert "bash scripts/quickstart.sh" in README and "bash scripts/test.sh " in README


def test_every_link_of_the_documentation_pages_resolves():
    pages = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "docs" / "results" / "README.md"]
    broken = [f"{page.name}: {link}" for page in pages
              for link in re.findall(r"\]\(([^)#\s]+)\)", page.read_text(encoding="utf-8"))
              if not link.startswith("http") and not (page.parent / link).exists()]
    assert len(pages) >= 12 and broken == []


def results_files() -> list:
    """docs/results' text files but its index (archives lie in subfolders, pictures are .png)."""
    return sorted(path for path in RESULTS.iterdir()
                  if path.suffix in {".md", ".txt", ".json"} and path.name != "README.md")


def head(path: Path) -> str:
    """The first HEAD_LINES lines of ``path`` as one line, without the quote marks of a quoted block."""
    lines = path.read_text(encoding="utf-8").splitlines()[:HEAD_LINES]
    return " ".join(line.lstrip("> ").strip() for line in lines)


def successors(path: Path, text: str) -> list:
    """The results files other than ``path`` that ``text`` names after the word "superseded"."""
    parts = re.split(r"\bsuperseded\b", text, maxsplit=1, flags=re.I)
    names = set(re.findall(r"[\w.-]+\.(?:md|txt|json)\b", parts[1])) if len(parts) == 2 else set()
    return sorted(name for name in names - {path.name} if (RESULTS / name).is_file())


def test_every_results_file_names_the_commit_that_made_it_or_the_file_that_superseded_it():
    files = results_files()
    silent = [path.name for path in files if not MADE_AT.search(head(path)) and not successors(path, head(path))]
    assert len(files) >= 30 and silent == []


def test_a_superseded_file_is_told_by_its_successor_not_by_a_commit():
    text = "> **Superseded** by [dca2018_cnndm.md](dca2018_cnndm.md) (added by hand)."
    assert successors(RESULTS / "x.md", text) == ["dca2018_cnndm.md"] and not MADE_AT.search(text)
    assert successors(RESULTS / "x.md", "see dca2018_cnndm.md, superseded by no-such-file.md") == []
    assert MADE_AT.search("Made at commit 38d89f5+ on 2026-12-01").group(1) == "38d89f5"
    assert not MADE_AT.search("the dca2018 run; commit d7d4724 ties the output layer")


def test_the_commits_the_results_files_name_are_in_the_history():
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)

    if git("rev-parse", "--is-shallow-repository").stdout.strip() != "false":
        pytest.skip("needs a git checkout with its whole history")
    named = {match.group(1) or match.group(2) for path in results_files() for match in MADE_AT.finditer(head(path))}
    unknown = [commit for commit in sorted(named) if git("cat-file", "-e", f"{commit}^{{commit}}").returncode]
    assert len(named) >= 10 and unknown == []
