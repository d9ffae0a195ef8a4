"""One record of the first message's options (tools/message_options.py), passed whole by every
front end: an option such as flag_conflicts reaches the message from each of them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from wikitrace.integrations.harbor import MemorySettings, attach_memory
from wikitrace.tools.mcp_server import Corpus, build_server
from wikitrace.tools.memory import Memory
from wikitrace.tools.message_options import MessageOptions

from helpers import CONFLICT_PAIR, CONFLICT_TASK, conflicting_lessons, run


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return conflicting_lessons(tmp_path_factory.mktemp("conflicts"))


def test_keywords_build_the_record_and_an_unknown_one_is_a_type_error(corpus: Path) -> None:
    memory = Memory.load(corpus)
    plain = memory.first_message(CONFLICT_TASK).text
    flagged = memory.first_message(CONFLICT_TASK, MessageOptions(flag_conflicts=True)).text
    assert CONFLICT_PAIR not in plain and CONFLICT_PAIR in flagged
    assert memory.first_message(CONFLICT_TASK, flag_conflicts=True).text == flagged
    # A record with keywords: the record changed by them.
    given = MessageOptions(flag_conflicts=True, exclude_tasks=["t2"])
    assert memory.first_message(CONFLICT_TASK, given, exclude_tasks=()).text == flagged
    with pytest.raises(TypeError, match="flag_conflict"):
        memory.first_message(CONFLICT_TASK, flag_conflict=True)
    with pytest.raises(TypeError, match="flag_conflict"):
        memory.first_message(CONFLICT_TASK, given, flag_conflict=True)
    assert given.exclude_tasks == ("t2",)  # frozen all through
    with pytest.raises(dataclasses.FrozenInstanceError):
        given.similar = 1  # type: ignore[misc]


def test_the_cli_passes_flag_conflicts(corpus: Path) -> None:
    code, plain, err = run(["prompt", str(corpus), CONFLICT_TASK])
    assert code == 0, err
    code, flagged, err = run(["prompt", str(corpus), CONFLICT_TASK, "--flag-conflicts"])
    assert code == 0, err
    assert CONFLICT_PAIR not in plain and CONFLICT_PAIR in flagged


def test_the_mcp_tool_passes_flag_conflicts(corpus: Path) -> None:
    async def main(**arguments: Any) -> str:
        async with Client(build_server(Corpus(corpus))) as client:
            result = await client.call_tool("first_message", {"task": CONFLICT_TASK, **arguments})
            return "".join(block.text for block in result.content)

    assert CONFLICT_PAIR not in anyio.run(main)
    assert CONFLICT_PAIR in anyio.run(lambda: main(flag_conflicts=True))


class _Environment:
    """A Harbor environment that takes every upload and command (nothing runs)."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        self.commands.append(f"upload {target_dir}")

    async def exec(self, command: str, **_: Any) -> Any:
        self.commands.append(command)
        return type("Result", (), {"return_code": 0, "stdout": "", "stderr": ""})()


@pytest.mark.parametrize("flag", [False, True])
def test_harbor_passes_flag_conflicts(corpus: Path, tmp_path: Path, flag: bool) -> None:
    kwargs: dict[str, Any] = {"wikitrace_corpus": str(corpus), "max_turns": 3}
    if flag:
        kwargs["wikitrace_flag_conflicts"] = True
    settings = MemorySettings.take(kwargs)
    assert kwargs == {"max_turns": 3} and settings.flag_conflicts is flag
    environment = _Environment()
    text = anyio.run(attach_memory, settings, CONFLICT_TASK, "t9", environment, tmp_path)
    assert text.startswith("# Your task\n\n" + CONFLICT_TASK)
    assert (CONFLICT_PAIR in text) is flag
    assert environment.commands[1] == f"upload {settings.mount}"
