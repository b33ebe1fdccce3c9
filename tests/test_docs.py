"""The README and docs/ tell the truth about the repository: their links lead somewhere, the
commands and options they show exist, the two set-up commands at the top are real scripts, and no
comment in the code cites a document a reader of the repository cannot open."""

from __future__ import annotations

import os
import re
import shlex
import unicodedata

import pytest
import typer
from typer.testing import CliRunner

from sparkrecover.cli.app import app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUP_COMMANDS = ("bash scripts/demo.sh", "bash scripts/test.sh")

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^ *```[^\n]*\n(.*?)^ *```", re.S | re.M)
# `sparkrecover` where a shell would run it: at the start of a line (after a `$ ` prompt) or
# after `&&`, `;`, `|` or `$(`; not the word in prose or in a command's printed output.
COMMAND = re.compile(r"(?:^|&&|;|\||\$\()\s*(?:\$\s+)?(?:\S*/)?sparkrecover((?:\s+\S+)*)")
FLAG = re.compile(r"^(--[a-z][a-z0-9-]*|-[a-zA-Z])(?:=.*)?$")
# What a comment may not cite: the design contract outside the repository, or a ticket.
FOREIGN_CITATION = re.compile(r"\bDESIGN(?:\.md)?\s*§|\bDESIGN\.md\b|\b[Ii]ssues?\s+#?\d+")
DOCS_FILE = re.compile(r"\bdocs/[A-Za-z0-9_./-]*\.md\b")
# A file of the repository named in inline code: `driver/lifecycle/stages.py`, `scripts/lint.sh: main`.
# The decision records: docs/decisions/NNNN-short-slug.md, each context, decision, consequences.
DECISIONS = "decisions"
RECORD_NAME = re.compile(r"(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.md")
RECORD_PARTS = ["Context", "Decision", "Consequences"]
NAMED_FILE = re.compile(r"`([\w./-]+/[\w.-]+\.(?:py|java|sh|md|toml))\b")


def markdown_files() -> list[str]:
    """README.md and every page under docs/, relative to the repository."""
    found = ["README.md"]
    for folder, _, names in os.walk(os.path.join(ROOT, "docs")):
        found += [os.path.relpath(os.path.join(folder, n), ROOT) for n in sorted(names) if n.endswith(".md")]
    return found


def read(relative: str) -> str:
    with open(os.path.join(ROOT, relative), encoding="utf-8") as handle:
        return handle.read()


def without_code(text: str) -> str:
    """The prose of a page: fenced blocks and inline code hold no links."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(relative: str) -> set[str]:
    """The anchors of a page's headings; a repeated heading gets -1, -2, ... as on GitHub."""
    names: set[str] = set()
    counts: dict[str, int] = {}
    for line in FENCE.sub("", read(relative)).splitlines():
        if re.match(r"#{1,6} ", line):
            base = slug(line.lstrip("#"))
            count = counts.get(base, 0)
            counts[base] = count + 1
            names.add(base if count == 0 else f"{base}-{count}")
    return names


def broken_links(page: str, text: str) -> list[str]:
    """The relative links of a page (at ``page``, relative to the repository) that lead nowhere."""
    broken = []
    for target in LINK.findall(without_code(text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: — not the repository's
            continue
        path, _, anchor = target.partition("#")
        resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(os.path.join(ROOT, resolved)):
            broken.append(f"{target}: no file {resolved}")
        elif anchor and resolved.endswith(".md") and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved}")
    return broken


@pytest.mark.parametrize("page", markdown_files())
def test_every_relative_link_resolves(page):
    assert broken_links(page, read(page)) == [], f"{page} has broken links"


def test_a_link_to_a_missing_file_or_heading_is_found():
    text = "[a](docs/nowhere.md), [b](docs/cli.md#no-such-heading), [c](docs/cli.md#sparkrecover-submit), `[d](x.md)`"
    assert broken_links("README.md", text) == [
        "docs/nowhere.md: no file docs/nowhere.md",
        "docs/cli.md#no-such-heading: no heading #no-such-heading in docs/cli.md",
    ]


def missing_files(text: str) -> list[str]:
    """The repository files a page names in code that do not exist: a path given from the top, or
    from inside sparkrecover/ or tests/ as docs/architecture.md does. A path whose first folder is
    none of the repository's (``sql/hive.py`` of Spark's examples) is someone else's."""
    tops = ("", "sparkrecover", "tests")
    ours = {name for top in tops for name in os.listdir(os.path.join(ROOT, top) if top else ROOT)}
    return [
        named
        for named in NAMED_FILE.findall(text)
        if named.split("/")[0] in ours and not any(os.path.exists(os.path.join(ROOT, top, named)) for top in tops)
    ]


@pytest.mark.parametrize("page", markdown_files())
def test_every_file_a_page_names_exists(page):
    assert missing_files(read(page)) == [], f"{page} names files the repository does not have"


def test_a_file_that_does_not_exist_is_found():
    text = "`driver/lifecycle/stages.py`, `scripts/lint.sh`, `driver/nowhere.py: run`, `sql/hive.py` of Spark's"
    assert missing_files(text) == ["driver/nowhere.py"]


def shown_commands(text: str) -> list[list[str]]:
    """Every sparkrecover command line in a page's code blocks, as words (an indented line that
    starts with an option continues the command above it, as in the README's command summary)."""
    found: list[list[str]] = []
    for block in FENCE.findall(text):
        previous: list[str] | None = None
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s#\s.*$", "", line)  # a shell comment
            match = COMMAND.search(line)
            if match:
                previous = re.split(r"\s(?:\||;|&&|\d?>)", match.group(1))[0].split()
                found.append(previous)
            elif previous is not None and line.startswith(" ") and line.strip().startswith("-"):
                previous.extend(line.split())
            else:
                previous = None
    return found


def options_of(command) -> set[str]:
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)} | {"--help"}


def wrong_commands(text: str) -> list[str]:
    """The sparkrecover commands and options a page's code blocks show that the CLI does not have;
    each command shown must also answer ``--help``."""
    group = typer.main.get_command(app)
    runner = CliRunner()
    wrong = []
    for words in shown_commands(text):
        name = words[0] if words and not words[0].startswith("-") else None
        command = group.commands.get(name) if name else group
        if command is None:
            wrong.append(f"sparkrecover {name}: no such command")
            continue
        if name:
            result = runner.invoke(app, [name, "--help"])
            if result.exit_code != 0:
                wrong.append(f"sparkrecover {name} --help: exit {result.exit_code}")
        known = options_of(command)
        for word in words[1:] if name else words:
            if word == "--":  # what follows is spark-submit's
                break
            for part in word.strip("[]()`").split("|"):
                flag = FLAG.match(part)
                if flag and flag.group(1) not in known:
                    wrong.append(f"sparkrecover {name or ''} {flag.group(1)}: no such option".replace("  ", " "))
    return wrong


@pytest.mark.parametrize("page", markdown_files())
def test_every_command_and_option_shown_exists(page):
    assert wrong_commands(read(page)) == [], f"{page} shows commands that do not exist"


def test_a_command_or_option_that_does_not_exist_is_found():
    text = """```console
$ sparkrecover resumee nightly
$ sparkrecover resume nightly --dry-runn | grep -v --dry-runn
$ sparkrecover resume nightly --dry-run -- --driver-memory 8g
sparkrecover inspect [RUN]
    --follow  --tail
$ sparkrecover --versions
```"""
    assert wrong_commands(text) == [
        "sparkrecover resumee: no such command",
        "sparkrecover resume --dry-runn: no such option",
        "sparkrecover inspect --tail: no such option",
        "sparkrecover --versions: no such option",
    ]


def test_the_readme_shows_some_commands():
    """The parser above finds what the README shows (a parser that finds nothing proves nothing)."""
    names = {words[0] for words in shown_commands(read("README.md")) if words}
    assert {"submit", "resume", "inspect", "replay"} <= names


def test_the_docs_index_lists_every_page():
    """docs/README.md lists the pages; the decision records are listed by their own index."""
    listed = set(LINK.findall(read("docs/README.md")))
    pages = {os.path.relpath(page, "docs") for page in markdown_files() if page.startswith("docs/")}
    records = {page for page in pages if page.startswith(DECISIONS + "/")}
    assert sorted(pages - records - listed - {"README.md"}) == [], "docs/README.md does not list these pages"
    assert f"{DECISIONS}/README.md" in listed


def decision_records() -> list[str]:
    return sorted(name for name in os.listdir(os.path.join(ROOT, "docs", DECISIONS)) if name != "README.md")


def record_problems(name: str, text: str) -> list[str]:
    """What a decision record lacks: a name NNNN-slug.md, a title with its number, a status, and
    the parts context, decision and consequences, in that order."""
    match = RECORD_NAME.fullmatch(name)
    if not match:
        return [f"{name}: not named NNNN-short-slug.md"]
    problems = []
    if not text.startswith(f"# {match.group(1)}. "):
        problems.append(f"{name}: the title does not start with '# {match.group(1)}. '")
    if not re.search(r"^Status: \S", text, re.M):
        problems.append(f"{name}: no 'Status:' line")
    parts = re.findall(r"^## (.+)$", FENCE.sub("", text), re.M)
    if parts != RECORD_PARTS:
        problems.append(f"{name}: parts {parts}, not {RECORD_PARTS}")
    return problems


def test_every_decision_record_has_its_parts_and_is_in_the_index():
    index = read(f"docs/{DECISIONS}/README.md")
    listed = set(LINK.findall(index))
    records = decision_records()
    assert records, "no decision records"
    assert [p for name in records for p in record_problems(name, read(f"docs/{DECISIONS}/{name}"))] == []
    assert sorted(set(records) - listed) == [], "docs/decisions/README.md does not list these records"
    numbers = [name[:4] for name in records]
    assert len(numbers) == len(set(numbers)), "two records share a number"


def test_a_record_without_its_parts_or_name_is_found():
    good = "# 0007. A title\n\nStatus: Accepted\n\n## Context\n\nx\n\n## Decision\n\ny\n\n## Consequences\n\nz\n"
    assert record_problems("0007-a-title.md", good) == []
    assert record_problems("0007-a-title.md", good.replace("## Context\n\nx\n\n", "")) == [
        "0007-a-title.md: parts ['Decision', 'Consequences'], not ['Context', 'Decision', 'Consequences']"
    ]
    assert record_problems("7-a-title.md", good) == ["7-a-title.md: not named NNNN-short-slug.md"]
    assert record_problems("0008-a-title.md", good.replace("Status: Accepted\n", "")) == [
        "0008-a-title.md: the title does not start with '# 0008. '",
        "0008-a-title.md: no 'Status:' line",
    ]
    swapped = good.replace("## Context", "## x").replace("## Consequences", "## Context")
    swapped = swapped.replace("## x", "## Consequences")
    assert record_problems("0007-a-title.md", swapped) == [
        "0007-a-title.md: parts ['Consequences', 'Decision', 'Context'], not ['Context', 'Decision', 'Consequences']"
    ]


def test_a_link_to_a_decision_record_that_does_not_exist_is_found():
    """A page and a comment that cite a record by its file: a renumbered or removed record breaks both."""
    assert broken_links("docs/design.md", "[d](decisions/0999-gone.md)") == [
        "decisions/0999-gone.md: no file docs/decisions/0999-gone.md"
    ]
    assert foreign_citations("x.py", "# (docs/decisions/0999-gone.md)") == [
        "x.py:1: docs/decisions/0999-gone.md does not exist"
    ]


def test_the_two_set_up_commands_open_the_readme_and_exist():
    first_block = FENCE.search(read("README.md")).group(1)
    lines = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert lines[:2] == list(SETUP_COMMANDS)
    for command in SETUP_COMMANDS:
        script = shlex.split(command)[1]
        assert os.path.isfile(os.path.join(ROOT, script)), script


def source_files() -> list[str]:
    found = []
    for top in ("sparkrecover", "scripts", "tests"):
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            found += [
                os.path.relpath(os.path.join(folder, n), ROOT)
                for n in sorted(names)
                if n.endswith((".py", ".java", ".sh"))
            ]
    # This file's own examples of wrong citations are what its checks must find.
    return [path for path in found if path != os.path.join("tests", "test_docs.py")]


def foreign_citations(path: str, text: str) -> list[str]:
    """The lines of a source file that cite the design contract outside the repository, a ticket,
    or a docs/ page that does not exist."""
    wrong = []
    for number, line in enumerate(text.splitlines(), 1):
        if FOREIGN_CITATION.search(line):
            wrong.append(f"{path}:{number}: {line.strip()}")
        wrong += [f"{path}:{number}: {cited} does not exist" for cited in DOCS_FILE.findall(line) if not exists(cited)]
    return wrong


def exists(relative: str) -> bool:
    return os.path.isfile(os.path.join(ROOT, relative))


def test_no_source_cites_a_document_the_repository_does_not_have():
    """Code cites docs/design.md by section and rule ("docs/design.md §4 rule 2"), or says why."""
    assert [line for path in source_files() for line in foreign_citations(path, read(path))] == []


def test_a_citation_of_what_the_repository_does_not_have_is_found():
    text = "# (DESIGN §4 rule 2)\n# see issue 13\n# docs/design.md §4 rule 2, docs/nowhere.md\n# a rule 5 issue"
    assert foreign_citations("x.py", text) == [
        "x.py:1: # (DESIGN §4 rule 2)",
        "x.py:2: # see issue 13",
        "x.py:3: docs/nowhere.md does not exist",
    ]
