"""A tool's typed parameters generate its OpenAI function schema and validate the model's
arguments — one source for both, no hand-written JSON schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from owlclaw.tools.errors import ToolError, invalid_arguments

MAX_ARGUMENTS_BYTES = 64 * 1024


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: type[msgspec.Struct]
    idempotent: bool = False
    """Safe to retry, and to re-run after a crash left its outcome unknown."""

    def function_schema(self) -> dict[str, Any]:
        """The OpenAI/litellm ``tools`` entry for this tool."""
        schema = msgspec.json.schema(self.params)
        body = schema["$defs"][self.params.__name__] if "$ref" in schema else schema
        parameters = {k: v for k, v in body.items() if k != "title"}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def parse(self, arguments: str | bytes | dict[str, Any] | None) -> msgspec.Struct | ToolError:
        """The model's arguments as the typed parameters, or why they are not acceptable.

        Numbers sent as strings ("5") are accepted, as models sometimes quote them; anything
        else that does not fit the declared types and bounds is an ``INVALID_ARGUMENTS`` error
        naming the field.
        """
        if arguments is None or arguments == "":
            arguments = "{}"
        if isinstance(arguments, str | bytes):
            if len(arguments) > MAX_ARGUMENTS_BYTES:
                return invalid_arguments(
                    f"arguments of {self.name} are {len(arguments)} bytes; "
                    f"the limit is {MAX_ARGUMENTS_BYTES}"
                )
            try:
                arguments = msgspec.json.decode(arguments)
            except msgspec.DecodeError as e:
                return invalid_arguments(f"arguments of {self.name} are not valid JSON: {e}")
        if not isinstance(arguments, dict):
            return invalid_arguments(
                f"arguments of {self.name} must be a JSON object, got {type(arguments).__name__}"
            )
        try:
            return msgspec.convert(arguments, self.params, strict=False)
        except msgspec.ValidationError as e:
            return invalid_arguments(f"invalid arguments for {self.name}: {e}")
