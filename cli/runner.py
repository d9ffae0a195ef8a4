"""Options shared by the commands that run the user's agent (update, gate)."""

from __future__ import annotations

from typing import Any

import click


def runner_options(function: Any) -> Any:
    """--runner and how its runs go: shared by update and gate."""
    options = [
        click.option(
            "--runner",
            "runner_template",
            required=True,
            envvar="WIKITRACE_RUNNER",
            metavar="COMMAND",
            help="How to run your agent on one task: a command with {task_id} and {memory} "
            "(the corpus version's folder), optionally {seed}, {run_id}, {attempt}. It must "
            'print a JSON object such as {"success": true} or {"score": 0.8} as its last JSON '
            "line on stdout. Env: WIKITRACE_RUNNER.",
        ),
        click.option(
            "--runner-concurrency",
            type=click.IntRange(1, 256),
            default=4,
            show_default=True,
            help="Agent runs at once.",
        ),
        click.option(
            "--runner-timeout",
            type=click.FloatRange(0.1),
            default=600.0,
            show_default=True,
            help="Seconds before an agent run is killed (and counted as an error).",
        ),
        click.option(
            "--runner-retries",
            type=click.IntRange(0, 10),
            default=2,
            show_default=True,
            help="Extra attempts of an agent run that crashes, times out or prints no valid JSON.",
        ),
        click.option(
            "--score-threshold",
            type=float,
            default=1.0,
            show_default=True,
            help="An agent run that prints a score succeeds when the score is at least this.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def make_runner_spec(params: dict[str, Any]) -> Any:
    """The RunnerSpec the runner options describe (pops them from params)."""
    from wikitrace.control.runner import RunnerSpec

    return RunnerSpec(
        template=params.pop("runner_template"),
        concurrency=params.pop("runner_concurrency"),
        timeout_seconds=params.pop("runner_timeout"),
        retries=params.pop("runner_retries"),
        success_threshold=params.pop("score_threshold"),
    )


class RunProgress:
    """`agent runs N/M` on stderr every tenth of the way."""

    def __init__(self, *, quiet: bool) -> None:
        self.quiet = quiet
        self.last = -1

    def __call__(self, done: int, total: int) -> None:
        decile = done * 10 // max(total, 1)
        if not self.quiet and (decile != self.last or done == total):
            self.last = decile
            click.echo(f"agent runs {done}/{total}", err=True)
