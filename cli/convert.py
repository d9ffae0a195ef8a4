"""`wikitrace convert`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import is_quiet, option, plural
from .input_options import InputSettings, announce, input_options, where_of


@click.command("convert")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@input_options
@option(declared("on-error"))
@option(declared("unlabelled"))
def convert_command(
    inputs: tuple[Path, ...], on_error: str, unlabelled: str, reading: InputSettings
) -> None:
    """Convert agent logs (files or folders) to wikitrace's native JSON Lines, on stdout.

    For inspection and editing: `wikitrace build` reads these formats directly, each file's
    detected from its content (or say --format; --help-all lists the formats). The summary
    goes to stderr.

    \b
    Example:
      wikitrace convert trajs/ --labels reports/ -f mini-swe-agent > runs.jsonl
    \f
    \b
    Formats:
      native          wikitrace's JSON Lines (task_id, task, success, turns)
      openai          {"messages": [...]} a line (or one JSON list of messages)
      tau-bench       results JSON list (task_id, trial, reward, traj); success: reward
      tau2-bench      simulations file; success: simulations[].reward_info.reward
      atif            ATIF trajectory.json (Harbor); reward from the trial's result.json
      terminal-bench  Terminal-Bench 1.0 trial results.json; success: is_resolved
      mini-swe-agent  *.traj.json; labels from SWE-bench reports (in the folder, or --labels)
      swe-agent       *.traj; labels from SWE-bench reports
      inspect         inspect_ai .json log; success: first scorer (C/I, P=0.5, numbers)
      inspect-eval    inspect_ai .eval log (zip)
      openhands       output.jsonl with event history; success: test_result
      alfworld        ReAct console log (Act k: / Obs k:); success: the result line
      hotpotqa        Reflexion ReAct log; success: the CORRECT / INCORRECT section
      fever           ReAct FEVER log, text or .ipynb (N Claim: ...); success: em
      webshop         ReAct WebShop log, text or .ipynb; success: score 1.0
      claude-code     Claude Code session .jsonl (sub-agents joined); no outcome
      codex           Codex CLI rollout-*.jsonl; no outcome
      gemini-cli      Gemini CLI chat (JSON or JSON Lines); no outcome
      langfuse        Langfuse trace export; success: a success/resolved/passed score
      otel-genai      OpenTelemetry GenAI spans (SDK or OTLP JSON); no outcome
      copilot-chat    GitHub Copilot chat in VS Code (chatSessions/*.json, .jsonl); no outcome
      cursor          Cursor's SQLite state.vscdb, read-only (a run per composer); no outcome
      opencode        OpenCode storage folder (session, message, part files); no outcome
      aider           aider .aider.chat.history.md (a run per session); no outcome
      openhands-events  OpenHands trajectory saved as a JSON list of events; no outcome

    A log with no outcome is unlabelled: label it with --labels, or `build --judge MODEL`.
    Every attempt of a task is its own run, with task_id and metadata.attempt; fields with no
    place in a native turn go into its metadata, verbatim. The summary on stderr gives per
    format the runs, successes, failures and unlabelled runs. Exit 2 for bad input (nothing
    written with --on-error stop).
    """
    from wikitrace.compiler.importers import plan_inputs

    quiet = is_quiet()
    plan = plan_inputs(
        list(inputs), reading.input_format, list(reading.labels), reading.success_threshold
    )
    from wikitrace.compiler.importers.runs import convert  # once there is something to read

    announce(plan, quiet=quiet)
    report = convert(
        plan,
        sys.stdout.buffer,
        on_error="skip" if on_error == "skip" else "stop",
        keep_unlabelled=unlabelled == "keep",
    )
    sys.stdout.flush()
    if not quiet:
        _print_summary(report, kept_unlabelled=unlabelled == "keep")


def _print_summary(report: Any, *, kept_unlabelled: bool) -> None:
    """On stderr: per format the runs and their outcomes, then each input left out, record
    skipped and run unlabelled, labels that matched no run, and how many runs were written."""
    from wikitrace.compiler.importers.labels import unmatched_message

    for name, counts in report.formats.items():
        click.echo(
            f"{name}: {plural(counts['runs'], 'run')} ({counts['successes']} succeeded, "
            f"{counts['failures']} failed), {counts['unlabelled']} unlabelled",
            err=True,
        )
    for item in report.left_out:
        click.echo(f"left out {item['path']}: {item['reason']}", err=True)
    for item in report.skipped:
        field = f" field '{item['field']}':" if item["field"] else ""
        click.echo(f"skipped {where_of(item)}:{field} {item['message']}", err=True)
    for item in report.unlabelled:
        kept = " (written with success null)" if kept_unlabelled else ""
        click.echo(
            f"unlabelled {where_of(item)}: task {item['task_id']}: {item['reason']}{kept}", err=True
        )
    unmatched = unmatched_message(report.unmatched_labels)
    if unmatched:
        click.echo(unmatched, err=True)
    wrote = f"wrote {plural(report.written, 'run')}"
    if report.duplicates:  # as a build says it
        wrote += f" ({plural(report.duplicates, 'duplicate run')} of the input left out)"
    click.echo(wrote, err=True)
