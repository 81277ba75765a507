"""``skillopt-sleep export``: a proposal (its report, scores, edits and diff) or the history of
nights as JSON or Markdown, to stdout or a file (``-o x.json`` writes JSON unless ``--format``
says otherwise)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

export_app = typer.Typer(
    help="A proposal or the nights' history as JSON or Markdown.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
FormatOpt = typer.Option(
    None,
    "--format",
    "-f",
    help="md (Markdown) or json (default: from the -o file's extension, .json -> json; md).",
)
OutOpt = typer.Option(None, "--output", "-o", help="Write to this file (default: stdout).")


def _emit(text: str, output: Path | None) -> None:
    from skillopt_sleep.cli.console import err

    if output is None:
        print(text, end="" if text.endswith("\n") else "\n")
        return
    output.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    err.print(f"wrote {output}", markup=False)


def _check(fmt: str | None, output: Path | None) -> str:
    """The format asked for, or the output file's (``x.json``: json), or Markdown."""
    from skillopt_sleep.errors import BadArgument

    if fmt is None:
        return "json" if output is not None and output.suffix.lower() == ".json" else "md"
    if fmt not in ("md", "json"):
        raise BadArgument(f"--format must be md or json, not {fmt!r}")
    return fmt


@export_app.command("proposal")
def export_proposal(
    proposal_id: str = typer.Argument(..., metavar="ID"),
    fmt: str | None = FormatOpt,
    output: Path | None = OutOpt,
) -> None:
    """A proposal: its report (Markdown) or report, status and diff (JSON)."""
    from skillopt_sleep.cli.console import service

    fmt = _check(fmt, output)
    svc = service()
    detail = svc.proposal(proposal_id)
    if fmt == "md":
        _emit(svc.proposal_markdown(proposal_id), output)
        return
    data = svc.report(proposal_id).model_dump(mode="json") | {
        "status": detail.status,
        "diff": detail.diff,
    }
    _emit(json.dumps(data, indent=2, ensure_ascii=False), output)


@export_app.command("history")
def export_history(
    limit: int = typer.Option(1000, "--limit", min=1, help="How many nights, newest first."),
    fmt: str | None = FormatOpt,
    output: Path | None = OutOpt,
) -> None:
    """Every night (newest first): status, scores, cost, proposal; Markdown is a table."""
    from skillopt_sleep.cli.console import fmt_score, service
    from skillopt_sleep.results import night_label

    fmt = _check(fmt, output)
    nights = service().nights(limit)
    if fmt == "json":
        rows: list[dict[str, Any]] = [n.model_dump(mode="json") for n in nights]
        _emit(json.dumps(rows, indent=2, ensure_ascii=False), output)
        return
    lines = [
        "# skillopt-sleep nights",
        "",
        "| night | started | status | val | test | calls | tokens | seconds | proposal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in nights:
        tokens = (n.input_tokens or 0) + (n.output_tokens or 0)
        status = n.status.value + (" (dry run)" if n.dry_run else "")
        lines.append(
            f"| {night_label(n.id)} | {n.started_at or ''} | {status} "
            f"| {fmt_score(n.val_before)} → {fmt_score(n.val_after)} "
            f"| {fmt_score(n.test_before)} → {fmt_score(n.test_after)} "
            f"| {n.calls or 0} | {tokens} | {fmt_score(n.seconds)} | {n.proposal_id or ''} |"
        )
    _emit("\n".join(lines) + "\n", output)


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
