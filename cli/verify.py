"""`wikitrace verify`."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("verify")
@click.argument("corpus", type=click.Path(path_type=Path, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def verify_command(corpus: Path, as_json: bool) -> None:
    """Check every file of CORPUS against the sha256 its manifest recorded.

    Lists files that are missing, changed or extra (one per line: `missing PATH`, ...).
    Exit 0 when all match, 1 otherwise. File modes are not trusted (root ignores them):
    the hashes are.
    """
    import orjson

    from wikitrace.corpus_schema import verify

    report = verify(corpus)
    if as_json:
        click.echo(orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        for kind in ("missing", "changed", "extra"):
            for rel in getattr(report, kind):
                click.echo(f"{kind} {rel}")
        summary = (
            f"ok: {report.checked} files match the manifest"
            if report.ok
            else f"FAILED: {len(report.missing)} missing, {len(report.changed)} changed, "
            f"{len(report.extra)} extra ({report.checked} checked)"
        )
        click.echo(summary, err=True)
    if not report.ok:
        sys.exit(1)
