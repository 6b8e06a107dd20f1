"""The A2A requests of one served agent, answered with its runs: ``message/send`` submits a run
(the A2A message's text is its focus, its messageId the idempotency key, so a retried send is
the same task) and waits for it to end or park, ``message/stream`` follows its events,
``tasks/get`` reads it, ``tasks/cancel`` is ``Cancel``.

It implements the SDK's ``RequestHandler`` over the service instead of the SDK's
``DefaultRequestHandler`` + ``AgentExecutor``: that one keeps each task in a ``TaskStore`` it
writes after every event, a second record of what the ledger already holds, and it would not
see a run resumed outside A2A (an approval answered in the console). Here the task id is the
run id and every answer is read from the run's stream, so there is nothing else to keep.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator
from typing import Any, Protocol, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length

from events import Ledger
from events import catalog as ev
from owlclaw.a2a.states import TERMINAL, state_name
from owlclaw.a2a.tasks import CONTEXT_KEY, answer_artifact, run_task
from owlclaw.access.caller import caller
from owlclaw.messages import Cancel, Message, Result, Submit
from projections.feed import afollow_run

R = TypeVar("R")

TRIGGER = "a2a"
FOLLOW_S = 3600.0
"""How long ``message/stream`` follows one run before it gives up with an error."""
POLL_S = 0.1
MAX_TRACEPARENT = 256


class RunService(Protocol):
    """What the handler needs of ``owlclaw.server.service.Service``."""

    ledger: Ledger | None

    async def ask(self, message: Message[R]) -> R: ...


def message_text(request: SendMessageRequest) -> str:
    """The text parts of the request's message, one per line; InvalidParams without any."""
    text = "\n".join(part.text for part in request.message.parts if part.text)
    if not text.strip():
        raise InvalidParamsError(message="the message has no text part")
    return text


def traceparent(context: ServerCallContext) -> str | None:
    headers: dict[str, Any] = context.state.get("headers", {})
    value = headers.get("traceparent")
    if isinstance(value, str) and 0 < len(value) <= MAX_TRACEPARENT and value.isprintable():
        return value
    return None


def settled(task: Task) -> bool:
    """The task ended, or waits for a person: nothing changes until someone acts."""
    state = task.status.state
    return state in TERMINAL or state == TaskState.TASK_STATE_INPUT_REQUIRED


class RunTasks(RequestHandler):
    """The A2A tasks of ``agent_id``: its runs."""

    def __init__(self, service: RunService, agent_id: str):
        self.service = service
        self.agent_id = agent_id

    @property
    def ledger(self) -> Ledger:
        assert self.service.ledger is not None  # the webhook answers 503 until it has started
        return self.service.ledger

    async def _submit(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        message = params.message
        if message.task_id:
            raise UnsupportedOperationError(
                message="an OwlClaw task takes one message: a run parked for approval is "
                "answered in the console, `owlclaw approve` or POST /approvals/{id}"
            )
        text = message_text(params)
        context_id = message.context_id or str(uuid.uuid4())
        key = f"{TRIGGER}:{message.message_id}" if message.message_id else None
        run_id = await self.service.ask(
            Submit(
                agent_id=self.agent_id,
                trigger=TRIGGER,
                focus=text,
                context={CONTEXT_KEY: {"context_id": context_id, "message_id": message.message_id}},
                idempotency_key=key,
                traceparent=traceparent(context),
                by=caller().name,
            )
        )
        return await self._task(run_id, context_id)

    async def _task(self, run_id: str, context_id: str = "") -> Task:
        """The task of one of this agent's runs; TaskNotFound for anything else."""
        try:
            stream = uuid.UUID(run_id)
        except ValueError:
            raise TaskNotFoundError from None
        events = await asyncio.to_thread(self.ledger.stream, stream)
        if events:
            first = events[0]
            if not isinstance(first, ev.RunStarted) or first.agent_id != self.agent_id:
                raise TaskNotFoundError
        elif stream not in await asyncio.to_thread(self.ledger.list_runs, self.agent_id):
            raise TaskNotFoundError
        return run_task(run_id, events, context_id)

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        task = await self._submit(params, context)
        if params.configuration.return_immediately or settled(task):  # a retried send
            return task
        await self.service.ask(Result(agent_id=self.agent_id, run_id=task.id))  # ended or parked
        return await self._task(task.id, task.context_id)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        task = await self._submit(params, context)
        yield task
        async for event in self._follow(task):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        task = await self._task(params.id)
        yield task
        async for event in self._follow(task):
            yield event

    async def _follow(self, task: Task) -> AsyncGenerator[Event]:
        """Each change of the task's state as the run records it, until it ends or waits for a
        person (input-required: the caller reads it again with ``tasks/get``)."""
        if settled(task):
            return
        state = task.status.state
        events: list[ev.LedgerEvent] = []
        async for event in afollow_run(self.ledger, task.id, poll_s=POLL_S, timeout_s=FOLLOW_S):
            events.append(event)
            now = run_task(task.id, events, task.context_id)
            if now.status.state == state:
                continue
            state = now.status.state
            if state == TaskState.TASK_STATE_COMPLETED:
                yield TaskArtifactUpdateEvent(
                    task_id=task.id,
                    context_id=now.context_id,
                    artifact=answer_artifact(now.artifacts[0].parts[0].text),
                    last_chunk=True,
                )
            yield TaskStatusUpdateEvent(
                task_id=task.id, context_id=now.context_id, status=now.status
            )
            if state == TaskState.TASK_STATE_INPUT_REQUIRED:
                return

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        return apply_history_length(await self._task(params.id), params)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        task = await self._task(params.id)
        if task.status.state in TERMINAL:
            state = state_name(task.status.state)
            raise TaskNotCancelableError(message=f"the task has ended ({state})")
        cancel = Cancel(agent_id=self.agent_id, run_id=task.id, by=caller().name)
        if not await self.service.ask(cancel):
            raise TaskNotCancelableError(message="the run is neither running nor parked")
        return await self._task(task.id, task.context_id)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(message="list the agent's runs with `owlclaw runs`")

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError
