"""``brutus replay FILE`` (the main job) and ``brutus demo`` (the same on a sample that ships with brutus)."""

from __future__ import annotations

from pathlib import Path

import click

from .options import db_option, json_option, open_store, print_json

__all__ = ["POLICIES", "register"]

POLICIES = ("on-compaction", "after-turn", "off", "cold-cache")


def register(cli: click.Group) -> None:
    cli.add_command(replay)
    cli.add_command(demo)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--context-limit", type=click.IntRange(min=1), default=None, metavar="N",
              help="Replay under a context of N tokens (default: the session's model's limit).")
@click.option("--model", default=None, metavar="M", help="Take the limits of model M (default: the session's model).")
@click.option("--policy", type=click.Choice(POLICIES), default="on-compaction",
              show_default=True, help="When to prune: with each compaction, after each turn, never, or once the cache is cold.")
@click.option("--compare", is_flag=True, help="Replay under every policy and print cost, cache reads, peak, compactions.")
@click.option("--as-recorded", is_flag=True,
              help="Replay the recording as it ran (its own compactions, sub-agents included) and price it beside its bill.")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE.png",
              help="Also draw the context curve into a PNG (needs matplotlib: pip install 'brutus-store[plot]').")
@db_option
@json_option
def replay(file: Path, context_limit: int | None, model: str | None, policy: str, compare: bool, as_recorded: bool,
           plot: Path | None, db: str | None, as_json: bool) -> None:
    """Replay a recorded session (OpenCode export JSON or Claude Code JSONL) through the store as a live agent
    would: message by message, tools pending → running → done, under the model's context limit, pruning and
    compacting by the context policy a live Conversation runs. Prints the prunes, the compactions and the
    context curve, and the session written for each policy: into a new temporary SQLite database (it says
    where) unless --db names one. --compare adds other thresholds, the 1-hour cache and server-side
    compaction beside the recording as it ran; --as-recorded prices the recording as it ran beside its bill."""
    from ..live import ContextPolicy
    from ..models import ModelLimits
    from ..replay import WHAT_IFS, ReplayReport, comparison, load_recording, replay as run_replay, replay_limits
    from ..replay_recorded import recorded_bill
    from ..summarizers import default_summarizer
    from .chart import require_matplotlib, write_png
    from .demo import temporary_database
    from .replay_output import print_report, print_written, progress

    if as_recorded:
        clashing = [name for name, given in (("--context-limit", context_limit is not None), ("--model", model),
                    ("--compare", compare), ("--plot", plot is not None)) if given]
        if clashing:
            raise click.UsageError(f"--as-recorded replays the recording as it ran: not with {', '.join(clashing)}")
        _as_recorded(file, db, as_json)
        return
    if plot is not None:
        require_matplotlib()
    recording = load_recording(file)  # read and checked before the database is opened
    model, limits = replay_limits(recording.history, context_limit=context_limit, model=model)
    store = open_store(db or temporary_database("replay"))
    where, reports, what_ifs = store.url, [], []

    def run(label: str, policy: ContextPolicy, *, limited: bool = True, server: bool = False) -> ReplayReport:
        with progress(f"replaying {file.name}" + (f" ({label})" if compare else "")) as on_step:
            return run_replay(
                store,
                recording.history,
                limits=limits if limited else ModelLimits(context=0),
                model=model,
                summarizer=default_summarizer(),
                title=recording.title,
                directory=recording.directory,
                source=str(file),
                on_step=on_step,
                policy=policy,
                server_compaction=server,
            )

    try:
        reports = [run(mode, ContextPolicy(prune=mode)) for mode in (POLICIES if compare else (policy,))]
        if compare:
            what_ifs = [(label, run(label, ContextPolicy(**fields), server=server) if fields or server else reports[0])
                        for label, fields, server in WHAT_IFS]
            recorded = run("as recorded", ContextPolicy(), limited=False)
    finally:
        store.close()
    if compare:
        from .replay_output import print_comparison

        bill = recorded_bill(recording.history)
        table = comparison(reports, what_ifs, recorded, bill.cost_usd if bill else None)
        if plot is not None:
            write_png(reports, plot)
        if as_json:
            print_json({**table, "database": _path(where)})
            return
        print_comparison(table)
        written = [(r.policy, r.session_id) for r in reports]
        written += [(label, r.session_id) for label, r in what_ifs if r not in reports]
        print_written(_path(where), [*written, ("as recorded", recorded.session_id)], temporary=db is None)
        if plot is not None:
            click.echo(f"curves and costs drawn in {plot}")
        return
    report = reports[0]
    if plot is not None:
        write_png(report, plot)
    if as_json:
        print_json(report.model_copy(update={"database": _path(where)}).model_dump(mode="json"))
        return
    print_report(report)
    print_written(_path(where), [(report.policy, report.session_id)], temporary=db is None)
    if plot is not None:
        click.echo(f"context curve drawn in {plot}")


def _as_recorded(file: Path, db: str | None, as_json: bool) -> None:
    """``replay --as-recorded``: every session of the file replayed with no limit and priced, its bill beside."""
    from ..replay import load_recordings
    from ..replay_recorded import as_recorded
    from .demo import temporary_database
    from .replay_output import print_as_recorded, progress

    recordings = load_recordings(file)  # read and checked before the database is opened
    store = open_store(db or temporary_database("replay"))
    where = store.url
    try:
        with progress(f"replaying {file.name} as recorded") as on_step:
            report = as_recorded(store, recordings, source=str(file), on_step=on_step)
    finally:
        store.close()
    report = report.model_copy(update={"database": _path(where)})
    if as_json:
        print_json(report.model_dump(mode="json"))
        return
    print_as_recorded(report, temporary=db is None)


def _path(url: str) -> str:
    from .demo import store_path

    return store_path(url)


@click.command()
@db_option
@json_option
def demo(db: str | None, as_json: bool) -> None:
    """Replay the sample session that ships with brutus (a real OpenCode session) under a 36,000-token
    context and print what pruning and compaction did. It writes to a new temporary SQLite database (it says
    where) unless --db names one."""
    from .demo import run_demo, temporary_database

    run_demo(open_store(db or temporary_database()), as_json=as_json)
