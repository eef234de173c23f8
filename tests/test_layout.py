"""The README's layout map and contents list against the tree: every package and module of fairseq_plugins/ and
every top-level folder and script is on the map, everything on the map exists, and every page the README links
exists."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


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
