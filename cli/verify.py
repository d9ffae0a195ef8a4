"""`wikitrace verify`."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from wikitrace.corpus_schema.setting_fields import declared

from .common import option
from .options import print_json


@click.command("verify")
@click.argument("corpus", type=click.Path(path_type=Path, file_okay=False))
@option(declared("all"))
@option(declared("json"), help="Print the result as one JSON object.")
def verify_command(corpus: Path, every_version: bool, as_json: bool) -> None:
    """Check every file of CORPUS against the sha256 its manifest recorded.

    CORPUS is a corpus (the version it points at is checked) or one version's folder
    (CORPUS.versions/v0002). Prints the files that are missing, changed or extra (one per
    line: `missing PATH`, ...; an empty folder is extra too: `extra PATH/`), then `ok: ...` or
    `FAILED: ...`. Exit 0 when all match, 1
    otherwise.

    \b
    Example:
      wikitrace verify corpus
      wikitrace verify corpus --all --json File modes are not trusted (root
    ignores them): the hashes are.
    """

    from wikitrace.corpus_schema import verify
    from wikitrace.versions import Store

    if every_version:
        store = Store(corpus)
        store.current()  # a clear error when CORPUS has no versions
        roots = [store.version_path(name) for name in store.versions()]
    else:
        roots = [corpus]
    reports = [verify(root) for root in roots]
    if as_json:
        data = [r.as_dict() for r in reports] if every_version else reports[0].as_dict()
        print_json(data)
    else:
        for report in reports:
            prefix = f"{Path(report.root).name}: " if every_version else ""
            if report.manifest:
                click.echo(f"{prefix}changed manifest.json: {report.manifest}")
            for kind in ("missing", "changed", "extra"):
                for rel in getattr(report, kind):
                    click.echo(f"{prefix}{kind} {rel}")
            summary = (
                f"ok: {report.checked} files match the manifest"
                if report.ok
                else f"FAILED: {len(report.missing)} missing, {len(report.changed)} changed, "
                f"{len(report.extra)} extra ({report.checked} checked)"
                + ("; the manifest itself does not check" if report.manifest else "")
            )
            click.echo(prefix + summary)
    if not all(report.ok for report in reports):
        sys.exit(1)
