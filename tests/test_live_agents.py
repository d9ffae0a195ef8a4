"""The recall hooks driven by the real Claude Code and Codex CLIs: `wikitrace hooks install`
puts them into a user's settings, and a real session of each agent, its model a local stub
(tests/agent_stub.py), fires them. A session in repository A ends and is captured; it is
labelled and added (compiled through the local OpenAI stub); the next session in A starts with
its lesson, as the stub sees in the model request; a session in repository B starts with
nothing.

Gemini CLI's session goes the same way, its prompt hook BeforeAgent.

The CLIs come from npm: .ci/run installs the pinned versions into a folder it names in
$WIKITRACE_AGENTS (else `claude`, `codex` and `gemini` on PATH are used); without one, its
test is skipped, saying so."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import test_recall_hooks
from agent_stub import AgentStub, serving_agents
from test_recall_hooks import label_and_add, listed, wait_for

from helpers import Stub, run

pytestmark = pytest.mark.integration

# The fixtures of the tests that drive the hooks by hand: a user's empty home (HOME and the
# caches in it) and a corpus compiled by the local OpenAI stub.
home = test_recall_hooks.home
corpus = test_recall_hooks.corpus

AGENTS_ENV = "WIKITRACE_AGENTS"
"""A folder with the agents installed by npm (node_modules/.bin/claude, .../codex)."""
MEMORY = "# Memory: lessons from past runs\n"
"""How every recalled text starts."""
SESSION_SECONDS = 180
"""No agent session here may take this long (each takes a few seconds)."""
RECALL_LIMIT = ["--time-limit", "10"]
"""Recall's own limit (the agents' is 4 s more): the default 1 s answers nothing on a busy
machine, and at a load of 16 on 2 cores a recall of 0.25 s of CPU took 2 to 4 s of wall time."""


def agent_cli(name: str) -> str:
    """The agent's command: from $WIKITRACE_AGENTS, else PATH; the test is skipped without."""
    folder = os.environ.get(AGENTS_ENV)
    if folder:
        found = Path(folder) / "node_modules" / ".bin" / name
        if found.exists():
            return str(found)
    on_path = shutil.which(name)
    if on_path is None:
        pytest.skip(
            f"`{name}` is not installed: .ci/run installs it with npm into ${AGENTS_ENV}; or "
            "put it on PATH"
        )
    return on_path


def agent_env(user: Path, **more: str) -> dict[str, str]:
    """The environment of an agent run here: this user's home, no key or setting of the
    developer's, and nothing sent anywhere but to the stub."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "CLAUDE", "CODEX_", "OPENAI_", "WIKITRACE_"))
    }
    return kept | {
        "HOME": str(user),
        "XDG_CACHE_HOME": str(user / ".cache"),
        "XDG_CONFIG_HOME": str(user / ".config"),
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        **more,
    }


def committed_repository(path: Path, remote: str) -> Path:
    """A git repository with one commit and an `origin` remote (its project's name)."""
    path.mkdir(parents=True)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(path)], check=True, timeout=30)
    subprocess.run([*git, "remote", "add", "origin", remote], check=True, timeout=30)
    (path / "app.py").write_text("def main() -> None:\n    pass\n")
    subprocess.run([*git, "add", "app.py"], check=True, timeout=30)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True, timeout=30)
    return path


def texts(value: Any) -> list[str]:
    """Every string in a request's JSON body, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in texts(item)]
    if isinstance(value, list):
        return [text for item in value for text in texts(item)]
    return []


def session(
    model: AgentStub, command: list[str], repository: Path, env: dict[str, str]
) -> list[str]:
    """Run one agent session; the texts of the model requests it made."""
    before = len(model.requests)
    done = subprocess.run(
        command, cwd=repository, env=env, capture_output=True, text=True, timeout=SESSION_SECONDS
    )
    assert done.returncode == 0, f"{command[0]} failed:\n{done.stdout}\n{done.stderr}"
    # Nothing install wrote is out of date for this version (Codex warns of a renamed flag).
    assert not [line for line in done.stderr.splitlines() if "deprecated" in line], done.stderr
    asked = model.requests[before:]
    assert asked, f"{command[0]} asked the model nothing:\n{done.stdout}\n{done.stderr}"
    return ["\n".join(texts(request["body"])) for request in asked]


def recalled(requests: list[str]) -> list[str]:
    """The recalled texts the agent put into its model requests: each from a memory heading
    to the next, or to the end of the text that holds it."""
    return [part for text in requests for part in text.split(MEMORY)[1:]]


def the_whole_loop(
    *,
    model: AgentStub,
    command: list[str],
    env: dict[str, str],
    home: Path,
    corpus: Path,
    tmp_path: Path,
    openai_stub: Stub,
    session_id: Any,
    prompt_event: str = "UserPromptSubmit",
) -> None:
    """Session 1 in A is captured and added; session 2 in A starts with its lesson; a
    session in B starts with nothing."""
    app = committed_repository(tmp_path / "work/app", "git@github.com:me/app.git")
    other = committed_repository(tmp_path / "work/other", "git@github.com:me/other.git")
    hook_log = home / ".cache/wikitrace/hook.log"

    first = session(model, command, app, env)
    assert recalled(first) == []  # the corpus has no run of this repository yet
    wait_for(hook_log, "not added, unlabelled")
    added = label_and_add(corpus, session_id(), openai_stub, tmp_path)
    assert len(added) == 1

    second = recalled(session(model, command, app, env))
    # Both recall events reached the model: the session's start and its prompt.
    assert len(second) >= 2, second
    for text in second:
        assert listed(text) == added
    log = hook_log.read_text()
    assert re.search(r" SessionStart \S+: recalled 1 lessons for github.com/me/app", log)
    assert re.search(rf" {prompt_event} \S+: recalled 1 lessons for github.com/me/app", log)

    # In B the session starts with nothing, and its prompt gets nothing either: another
    # project's lessons are listed only where they bear on the prompt (docs/hooks.md), and A's
    # one lesson (the stub's, on pick-and-place) shares no word with it.
    assert recalled(session(model, command, other, env)) == []
    log = hook_log.read_text()
    assert re.search(r" SessionStart \S+: nothing recalled: github.com/me/other has no runs", log)
    assert re.search(rf" {prompt_event} \S+: nothing recalled: no lesson applies", log)


PROMPT = "Fix the failing test in app.py"


@pytest.fixture
def claude() -> str:
    return agent_cli("claude")


@pytest.fixture
def codex() -> str:
    return agent_cli("codex")


@pytest.fixture
def gemini() -> str:
    return agent_cli("gemini")


# Each test asks for its agent first: one that is not installed skips it before the corpus
# is built.


def test_claude_code_s_real_session_recalls_the_lesson_of_its_repository_only(
    claude: str, home: Path, corpus: Path, tmp_path: Path, openai_stub: Stub
) -> None:
    code, _, err = run(["hooks", "install", "claude-code", str(corpus), *RECALL_LIMIT])
    assert code == 0, err

    def session_id() -> str:
        (transcript,) = (home / ".claude/projects").glob("*/*.jsonl")
        return transcript.stem

    with serving_agents() as model:
        env = agent_env(home, ANTHROPIC_BASE_URL=model.url, ANTHROPIC_API_KEY="sk-ant-stub")
        the_whole_loop(
            model=model,
            command=[claude, "-p", PROMPT],
            env=env,
            home=home,
            corpus=corpus,
            tmp_path=tmp_path,
            openai_stub=openai_stub,
            session_id=session_id,
        )


def codex_config(user: Path, url: str) -> None:
    """Codex's user config: its model the stub (OpenAI's Responses API), no update check, and
    no plugins or apps (Codex 0.171 fetches https://github.com/openai/plugins.git at start
    otherwise: strace showed it)."""
    config = user / ".codex/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        'model = "stub-model"\n'
        'model_provider = "stub"\n'
        "check_for_update_on_startup = false\n\n"
        "[model_providers.stub]\n"
        'name = "stub"\n'
        f"base_url = {json.dumps(url + '/v1')}\n"
        'wire_api = "responses"\n'
        'env_key = "STUB_API_KEY"\n\n'
        "[analytics]\n"
        "enabled = false\n\n"
        "[features]\n"
        "plugins = false\n"
        "remote_plugin = false\n"
        "apps = false\n"
    )


def test_codex_s_real_session_recalls_the_lesson_of_its_repository_only(
    codex: str, home: Path, corpus: Path, tmp_path: Path, openai_stub: Stub
) -> None:

    def session_id() -> str:
        (rollout,) = (home / ".codex/sessions").glob("*/*/*/rollout-*.jsonl")
        return re.sub(r"^rollout-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-", "", rollout.stem)

    with serving_agents() as model:
        codex_config(home, model.url)
        code, _, err = run(["hooks", "install", "codex", str(corpus), *RECALL_LIMIT])
        assert code == 0, err
        env = agent_env(home, CODEX_HOME=str(home / ".codex"), STUB_API_KEY="sk-stub")
        # Codex runs a hook only once its user has trusted it (`/hooks` in its TUI); a run
        # without a terminal can only be told to run them untrusted.
        command = [codex, "exec", "--dangerously-bypass-hook-trust", PROMPT]
        the_whole_loop(
            model=model,
            command=command,
            env=env,
            home=home,
            corpus=corpus,
            tmp_path=tmp_path,
            openai_stub=openai_stub,
            session_id=session_id,
        )


def test_gemini_cli_s_real_session_recalls_the_lesson_of_its_repository_only(
    gemini: str, home: Path, corpus: Path, tmp_path: Path, openai_stub: Stub
) -> None:
    settings = home / ".gemini/settings.json"
    settings.parent.mkdir(parents=True)
    # An API key (the stub's), no usage statistics, no update check.
    settings.write_text(
        json.dumps(
            {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            }
        )
    )
    code, _, err = run(["hooks", "install", "gemini", str(corpus), *RECALL_LIMIT])
    assert code == 0, err

    def session_id() -> str:
        (chat,) = (home / ".gemini/tmp").glob("*/chats/session-*.jsonl")
        return str(json.loads(chat.read_text().splitlines()[0])["sessionId"])

    with serving_agents() as model:
        env = agent_env(
            home,
            GEMINI_API_KEY="stub-key",
            GOOGLE_GEMINI_BASE_URL=model.url,
            GEMINI_CLI_TRUST_WORKSPACE="true",
        )
        # A model named: "auto" first asks a router model for a JSON verdict.
        the_whole_loop(
            model=model,
            command=[gemini, "-m", "gemini-2.5-flash", "-p", PROMPT],
            env=env,
            home=home,
            corpus=corpus,
            tmp_path=tmp_path,
            openai_stub=openai_stub,
            session_id=session_id,
            prompt_event="BeforeAgent",
        )
