"""Asking the corpus's model one question: a template rendered with its untrusted data fenced,
one call, and the answer parsed into a typed record. The templates asked with are remembered
(name -> hash), so the version the answers go into records them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypeVar

import jinja2
import orjson
from pydantic import BaseModel, ValidationError

from wikitrace import prompts
from wikitrace.corpus_schema.errors import first_problem
from wikitrace.transport.llm import LLM

from .compile import CompileError, data_fence, reply_json

Answer = TypeVar("Answer", bound=BaseModel)


class Asker:
    """One model and one template folder (the `prompts-dir` setting's first, then ours)."""

    def __init__(self, llm: LLM, prompts_dir: Path | None = None) -> None:
        self.llm = llm
        self.env = prompts.environment(prompts_dir)
        self.used: dict[str, str] = {}
        """Templates asked with: name -> hash of their source."""

    def ask(self, template: str, answer: type[Answer], *, data: Any, **context: Any) -> Answer:
        """Render `template` with `context` and a `fence` made from `data` (what the prompt
        shows of logs or model text), call the model once, and validate its answer.

        A ValueError says what is wrong with an answer that cannot be used.
        """
        try:
            self.used[template] = prompts.source_hash(self.env, template)
            text = self.env.get_template(template).render(
                fence=data_fence(orjson.dumps(data)), **context
            )
        except jinja2.TemplateError as error:
            raise CompileError(f"prompt template {template}: {error}") from None
        reply = asyncio.run(self.llm.complete([{"role": "user", "content": text}]))
        try:
            return answer.model_validate(reply_json(reply.text))
        except ValidationError as error:  # a ValueError too: caught first
            where, message = first_problem(error)
            raise ValueError(f"field '{where}': {message}") from None
        except ValueError as error:
            raise ValueError(f"the answer: {error}") from None
