"""docs/cli.md is generated from the click commands: it must say what the code says."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import click

ROOT = Path(__file__).resolve().parent.parent


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli", ROOT / "docs" / "gen_cli.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_up_to_date() -> None:
    gen = generator()
    written = (ROOT / "docs" / "cli.md").read_text()
    assert written == gen.render(), f"docs/cli.md is out of date: run `{gen.REGENERATE}`"


def test_it_lists_every_command_and_option_hidden_ones_too() -> None:
    gen = generator()
    page = gen.render()
    from wikitrace.cli.main import cli

    root = click.Context(cli, info_name="wikitrace", **cli.context_settings)
    for path, command, ctx in gen._commands(cli, root, ()):
        assert f"\n## wikitrace {' '.join(path)}\n" in page, path
        for param in command.get_params(ctx):
            for flag in getattr(param, "opts", []):
                if flag.startswith("-"):
                    assert flag in page, (path, flag)

    @click.command()
    @click.option("--shown", help="On the help page.")
    @click.option("--secret", hidden=True, help="Only for those who know.")
    def tool(shown: str, secret: str) -> None:
        """A command with a hidden option."""

    text = gen._help(tool, click.Context(tool, info_name="tool"))
    assert "Options:\n  --shown TEXT" in text
    assert "Hidden options:\n  --secret TEXT  Only for those who know." in text


def test_the_settings_tables_are_up_to_date() -> None:
    gen = generator()
    written = (ROOT / "docs" / "settings.md").read_text()
    assert written == gen.settings_page(written), (
        f"docs/settings.md's tables are out of date: run `{gen.REGENERATE}`"
    )
    assert gen.settings_tables() in written
