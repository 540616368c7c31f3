"""``brutus demo``: replay the sample session shipped in the package under a small context limit.

The sample is a real OpenCode export (``brutus/data/sample_session.json``, from the MIT-licensed corpus; its
licence is ``brutus/data/LICENSE-sample``). At 36,000 tokens of context the replay prunes once and compacts
once, so the whole of brutus's job shows in a few seconds. Unless ``--db`` names a database, each run writes
to a new temporary SQLite file (the demo never piles sessions up in the user's own database).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..replay import ReplayReport
from ..store import SessionStore

__all__ = ["DEMO_CONTEXT_LIMIT", "run_demo", "sample_path", "store_path", "temporary_database"]

DEMO_CONTEXT_LIMIT = 36_000


def store_path(url: str) -> str:
    """A SQLite store by its file path (what ``--db`` takes), anything else by its URL."""
    from ..db.engine import describe

    return describe(url)


def sample_path() -> Path:
    """Where the shipped sample session lives."""
    return Path(str(resources.files("brutus") / "data" / "sample_session.json"))


def temporary_database(kind: str = "demo") -> str:
    """A new SQLite file in a temporary directory of its own (``brutus-demo-…/demo.db``), kept after the run so
    it can be looked at: ``demo`` and ``replay`` write there unless ``--db`` names a database."""
    import tempfile

    return str(Path(tempfile.mkdtemp(prefix=f"brutus-{kind}-")) / f"{kind}.db")


def run_demo(store: SessionStore, *, as_json: bool = False, context_limit: int = DEMO_CONTEXT_LIMIT) -> ReplayReport:
    """Replay the sample into ``store`` and print the report (JSON with ``as_json``)."""
    import click

    from ..replay import replay_file
    from ..summarizers import ExtractiveSummarizer
    from .options import print_json
    from .replay_output import print_report, progress

    path = sample_path()
    with progress("replaying the sample session") as on_step:
        report = replay_file(
            store, path, context_limit=context_limit, summarizer=ExtractiveSummarizer(), on_step=on_step
        )
    url = store.url
    store.close()
    if as_json:
        print_json(report.model_dump(mode="json"))
        return report
    print_report(report)
    where = store_path(url)
    click.echo(f"\nstored in {where}; look at it with:")
    click.echo(f"  export BRUTUS_DATABASE_URL={where}")
    click.echo(f"  brutus show {report.session_id}          # the view the model sees")
    click.echo(f"  brutus show {report.session_id} --full   # the whole history")
    click.echo(f"  brutus stats {report.session_id}")
    return report
