"""Every equation reference in the package names its paper ("See eq 4", "Shi eq 14", "Paulus eqs 1-5"), so that
a grep of one paper's equation lands on the lines that compute it; and no code or test cites a project issue."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPERS = ("See", "Shi", "Paulus", "Song", "Celikyilmaz", "Rennie", "Wu", "Bahdanau", "Luong")
REFERENCE = re.compile(r"\beqs?\s+\d+")
WORD_BEFORE = re.compile(r"([A-Za-z]+)[^A-Za-z]*$")


def unnamed(text: str) -> list:
    """The equation references of ``text`` whose preceding word is not a paper's name."""
    found = []
    for match in REFERENCE.finditer(text):
        before = WORD_BEFORE.search(text[max(0, match.start() - 40):match.start()])
        if not before or before.group(1) not in PAPERS:
            found.append(text[max(0, match.start() - 20):match.end()])
    return found


def test_unnamed_finds_a_reference_without_its_paper():
    assert unnamed("the coverage (eq 10) and See eq 11, (~Celikyilmaz eqs 8-9)") == ["the coverage (eq 10"]


def test_every_equation_reference_of_the_package_names_its_paper():
    found = {str(path.relative_to(ROOT)): unnamed(path.read_text(encoding="utf-8"))
             for path in (ROOT / "fairseq_plugins").rglob("*.py")}
    assert sum(len(REFERENCE.findall(path.read_text(encoding="utf-8")))
               for path in (ROOT / "fairseq_plugins").rglob("*.py")) > 300  # the scan sees them
    assert {path: refs for path, refs in found.items() if refs} == {}


def test_no_code_test_or_script_cites_a_project_issue():
    pattern = re.compile(r"\bissues? \d+", re.I)
    external = re.compile(r"(fairseq|OpenNMT-py|0\.12\.x,) issue \d+", re.I)
    files = [*ROOT.glob("*.sh"), *(ROOT / "configs").glob("*.conf")]
    for folder in ("fairseq_plugins", "scripts", "tests"):
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".sh", ".sbatch")]
    cited = [f"{path.relative_to(ROOT)}: {line.strip()[:80]}" for path in files
             for line in path.read_text(encoding="utf-8").splitlines()
             if pattern.search(line) and not external.search(line) and path.name != Path(__file__).name]
    assert cited == []
