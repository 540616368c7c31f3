"""Installing brutus (issue 33): the distribution's name is free on the package index (``brutus`` there is
another project), every pip line a user reads names it and extras that exist, and every optional part used
without its extra raises ``MissingDependency`` with that line."""

from __future__ import annotations

import asyncio
import importlib
import re
import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from brutus import AsyncSessionStore, BrutusError, MissingDependency, SessionStore
from brutus.extras import DISTRIBUTION, pip_install
from cli_helpers import run

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = set(PROJECT["optional-dependencies"])
PG_URL = "postgresql+psycopg://root@127.0.0.1:5432/test"  # refused before any connection is made


def test_the_distribution_is_brutus_store_and_the_command_and_package_stay_brutus() -> None:
    assert PROJECT["name"] == DISTRIBUTION == "brutus-store"
    assert PROJECT["scripts"] == {"brutus": "brutus.cli:main"}
    assert "brutus" in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert pip_install("postgres", "claude-agent-sdk") == "pip install 'brutus-store[postgres,claude-agent-sdk]'"


def _pip_lines() -> list[tuple[str, str]]:
    """Every ``pip install …`` a user reads: README and the package's messages, docstrings and help."""
    sources = [ROOT / "README.md", ROOT / "pyproject.toml", *sorted((ROOT / "brutus").rglob("*.py"))]
    found = []
    for source in sources:
        for match in re.finditer(r"pip install ([^`\n\"]+)", source.read_text()):
            command = re.split(r"&&|;|#", match.group(1))[0]  # up to the next command or a comment
            if "{" in command:  # pip_install's own template: its lines are the messages tested below
                continue
            found.append((source.name, command))
    return found


def test_every_pip_line_names_the_distribution_and_extras_that_exist() -> None:
    lines = _pip_lines()
    requirements = []
    for where, line in lines:
        for token in shlex.split(line):
            if token.startswith("-"):
                continue
            requirement = re.match(r"([\w.-]+)(?:\[([\w,-]+)\])?", token)  # a sentence's ")." may follow
            assert requirement, (where, line)
            name, extras = requirement.groups()
            assert name != "brutus", (where, line)  # the unrelated project on the index
            if extras:
                assert name in (DISTRIBUTION, "."), (where, line)
                assert set(extras.split(",")) <= EXTRAS, (where, line)
            requirements.append(requirement.group(0))
    readme = (ROOT / "README.md").read_text()
    assert "pip install brutus-store " in readme
    assert "pip install -e '.[postgres,claude-agent-sdk]'" in readme
    assert {"brutus-store[postgres,claude-agent-sdk]", "brutus-store[claude-agent-sdk]", "brutus-store[openai-agents]",
            "brutus-store[plot]", "brutus-store[async]"} <= set(requirements)
    assert not re.search(r"\bbrutus\[", readme + "".join(p.read_text() for p in (ROOT / "brutus").rglob("*.py")))


# -- a missing optional dependency: MissingDependency with the pip line -------------------------------------


def _missing(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """Make ``import module`` raise ImportError, as when the package is not installed."""
    for name in modules:
        monkeypatch.setitem(sys.modules, name, None)


def test_postgresql_without_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, "psycopg")
    message = "brutus on PostgreSQL needs psycopg: pip install 'brutus-store[postgres]'"
    with pytest.raises(MissingDependency) as raised:
        SessionStore.open(PG_URL)
    assert str(raised.value) == message and isinstance(raised.value, BrutusError)
    result = run("sessions", "list", "--db", PG_URL)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"brutus: error: {message}\n")


def test_the_async_store_on_postgresql_without_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    """The case of issue 33: ``[claude-agent-sdk]`` installed (aiosqlite, greenlet), ``[postgres]`` not."""
    _missing(monkeypatch, "psycopg")
    with pytest.raises(MissingDependency) as raised:
        asyncio.run(AsyncSessionStore.open(PG_URL))
    assert str(raised.value) == "the async store on PostgreSQL needs psycopg: pip install 'brutus-store[postgres]'"


def test_the_async_store_on_postgresql_without_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch, "psycopg", "greenlet")
    with pytest.raises(MissingDependency) as raised:
        asyncio.run(AsyncSessionStore.open(PG_URL))
    assert str(raised.value) == "the async store on PostgreSQL needs greenlet and psycopg: pip install 'brutus-store[async,postgres]'"


def test_the_async_store_on_sqlite_without_greenlet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _missing(monkeypatch, "greenlet")
    with pytest.raises(MissingDependency) as raised:
        asyncio.run(AsyncSessionStore.open(str(tmp_path / "x.db")))
    assert str(raised.value) == "the async store on SQLite needs greenlet: pip install 'brutus-store[async]'"
    assert list(tmp_path.iterdir()) == []  # refused before the file was made


@pytest.mark.parametrize(
    "module, gone, message",
    [
        ("brutus.async_store", "greenlet", "the async store needs greenlet: pip install 'brutus-store[async]'"),
        ("brutus.integrations.claude_agent_sdk", "claude_agent_sdk",
         "brutus.integrations.claude_agent_sdk needs claude_agent_sdk: pip install 'brutus-store[claude-agent-sdk]'"),
        ("brutus.integrations.claude_agent_sdk", "aiosqlite",
         "brutus.integrations.claude_agent_sdk needs aiosqlite: pip install 'brutus-store[claude-agent-sdk]'"),
        ("brutus.integrations.openai_agents", "agents",
         "brutus.integrations.openai_agents needs agents: pip install 'brutus-store[openai-agents]'"),
    ],
    ids=lambda v: v if "." not in v and " " not in v else None,
)
def test_importing_an_optional_module_without_its_extra(monkeypatch: pytest.MonkeyPatch, module: str, gone: str, message: str) -> None:
    _missing(monkeypatch, gone)
    monkeypatch.delitem(sys.modules, module, raising=False)  # import it afresh (monkeypatch puts it back)
    with pytest.raises(MissingDependency) as raised:
        importlib.import_module(module)
    assert str(raised.value) == message
