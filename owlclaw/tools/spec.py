"""A tool's typed parameters generate its OpenAI function schema and validate the model's
arguments — one source for both, no hand-written JSON schema. A tool from elsewhere (an MCP
server) brings its own JSON schema instead, and the same arguments are validated against it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema
import msgspec

from owlclaw.tools.errors import ToolError, invalid_arguments

MAX_ARGUMENTS_BYTES = 64 * 1024
SCHEMAS_CACHED = 1024


@lru_cache(maxsize=SCHEMAS_CACHED)
def _parameters_schema(params: type[msgspec.Struct]) -> bytes:
    """The JSON schema of a parameters type, encoded: generating it inspects the type's
    annotations (~0.1 ms a tool), and every run of the agent sends the same one."""
    schema = msgspec.json.schema(params)
    body = schema["$defs"][params.__name__] if "$ref" in schema else schema
    return msgspec.json.encode({k: v for k, v in body.items() if k != "title"})


@lru_cache(maxsize=SCHEMAS_CACHED)
def _validator(schema: bytes) -> Any:
    """A validator for an encoded JSON schema, of the draft the schema names (2020-12 when it
    names none); checked once, so a schema that is itself invalid raises SchemaError here."""
    decoded = msgspec.json.decode(schema)
    cls = jsonschema.validators.validator_for(decoded, default=jsonschema.Draft202012Validator)
    cls.check_schema(decoded)
    return cls(decoded)


@dataclass(frozen=True)
class ToolSource:
    """Where a tool not defined here comes from, recorded with each of its calls so replay and
    audit know exactly which tool was called."""

    schema_sha256: str
    """sha256 of the canonical JSON of the tool's name, description, schema and annotations."""
    server_name: str
    server_version: str

    def recorded(self) -> dict[str, str]:
        """The fields ToolCallRequested records."""
        return {
            "schema_sha256": self.schema_sha256,
            "server_name": self.server_name,
            "server_version": self.server_version,
        }


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: type[msgspec.Struct] | None = None
    """The typed parameters (a tool defined here); or else ``json_schema``."""
    json_schema: Mapping[str, Any] | None = None
    """The JSON schema of the arguments, for a tool defined elsewhere (an MCP server's)."""
    idempotent: bool = False
    """Safe to retry, and to re-run after a crash left its outcome unknown."""
    parallel_safe: bool | None = None
    """May run side by side with the other calls of one model response (its calls do not depend
    on each other's order); None: when it is idempotent."""
    timeout_s: float | None = None
    """How long one call may run (None: the runtime's ``tool_timeout_s``)."""
    max_result_bytes: int | None = None
    """Size of the result the model sees before it is cut (None: the agent's setting)."""
    category: str = "capability"
    """What kind of tool it is, for operators (``owlclaw tools``); not used to decide."""
    dangerous: bool = False
    """It acts on the outside world in a way worth an operator's attention."""
    effect_in_ledger: bool = False
    """Its only effect is ledger events committed with its outcome, so a call a crash left
    without an outcome had no effect and runs again on resume."""
    ask_if: str | None = None
    """A condition on the arguments (``"amount > 1000"``) under which a call waits for a
    person's approval, as the capability declares it; the app's ``[governance] ask_if`` wins."""
    source: ToolSource | None = None
    """Where the tool comes from when it is not defined here (an MCP server)."""
    question: bool = False
    """Each call is a question to a person (ask_human): it always parks its run until a person
    answers or the question expires, whatever the governance asks of other tools."""

    def __post_init__(self) -> None:
        if (self.params is None) == (self.json_schema is None):
            raise ValueError(f"tool {self.name!r} needs either params or json_schema, not both")
        if self.json_schema is not None:
            _validator(self._schema())  # jsonschema.SchemaError now, not at the first call

    @property
    def runs_in_parallel(self) -> bool:
        """Whether its calls run side by side with the other parallel calls of a model
        response; any other call is a barrier (``owlclaw.runtime.batch``)."""
        return self.idempotent if self.parallel_safe is None else self.parallel_safe

    def function_schema(self) -> dict[str, Any]:
        """The OpenAI/litellm ``tools`` entry for this tool (a fresh copy: callers may edit it)."""
        if self.params is not None:
            parameters = msgspec.json.decode(_parameters_schema(self.params))
        else:
            parameters = msgspec.json.decode(self._schema())
            parameters.pop("$schema", None)  # the validator's business, not the model's
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def _schema(self) -> bytes:
        return msgspec.json.encode(self.json_schema, order="sorted")

    def parse(
        self, arguments: str | bytes | dict[str, Any] | None
    ) -> msgspec.Struct | dict[str, Any] | ToolError:
        """The model's arguments as the typed parameters, or why they are not acceptable.

        Numbers sent as strings ("5") are accepted, as models sometimes quote them; anything
        else that does not fit the declared types and bounds is an ``INVALID_ARGUMENTS`` error
        naming the field.
        """
        if arguments is None or arguments == "":
            arguments = "{}"
        if isinstance(arguments, str | bytes) and len(arguments) > MAX_ARGUMENTS_BYTES:
            return invalid_arguments(
                f"arguments of {self.name} are {len(arguments)} bytes; "
                f"the limit is {MAX_ARGUMENTS_BYTES}"
            )
        try:
            return self._typed(arguments)
        except RecursionError:  # how deep fits depends on the caller's stack: refuse, never raise
            return invalid_arguments(f"arguments of {self.name} are nested too deeply")

    def _typed(
        self, arguments: str | bytes | dict[str, Any]
    ) -> msgspec.Struct | dict[str, Any] | ToolError:
        if isinstance(arguments, str | bytes):
            try:
                arguments = msgspec.json.decode(arguments)
            except msgspec.DecodeError as e:
                return invalid_arguments(f"arguments of {self.name} are not valid JSON: {e}")
        if not isinstance(arguments, dict):
            return invalid_arguments(
                f"arguments of {self.name} must be a JSON object, got {type(arguments).__name__}"
            )
        if self.params is None:
            return self._valid(arguments)
        try:
            return msgspec.convert(arguments, self.params, strict=False)
        except msgspec.ValidationError as e:
            return invalid_arguments(f"invalid arguments for {self.name}: {e}")

    def _valid(self, arguments: dict[str, Any]) -> dict[str, Any] | ToolError:
        """The arguments as they are when the JSON schema accepts them; else the first error,
        naming where it is."""
        error = jsonschema.exceptions.best_match(_validator(self._schema()).iter_errors(arguments))
        if error is None:
            return arguments
        where = "/".join(str(p) for p in error.absolute_path)
        at = f" at {where}" if where else ""
        return invalid_arguments(f"invalid arguments for {self.name}{at}: {error.message}")
