"""The tasks half of the conformance fixture: the server side of the 2026-07-28
tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), because no server
in the registries implements it and the pinned suite's `tasks-*` scenarios need
one to prove Junction against. `register(srv)` adds it to fixture.py's
MCPServer through the SDK's own extension mechanism (mcp/server/extension.py):
`capabilities.extensions` on `server/discover`, the methods `tasks/get`,
`tasks/update` and `tasks/cancel`, and a `tools/call` interceptor that decides
per request whether a call becomes a task.

The tools are the ones the suite's scenario descriptions name, with the
arguments and outcomes its checks read:

  greet               sync only: `Hello, {name}!`, never a task
  slow_compute        task optional: sleeps `seconds`, then reports `label`
  failing_job         task required: a tool error after ~1 s (completed, isError)
  protocol_error_job  task required: a JSON-RPC error (failed, inlined `error`)
  confirm_delete      task optional: one elicitation, via `inputRequests` in a
                      task, as an MRTR round (InputRequiredResult) without one
  multi_input         task required: two elicitations pending at once
  test_tool_with_task task required: MRTR round (`user_name`) first, then a task

Negotiation is per request, as the 2026-07-28 wire has it: a call becomes a
task only when that request's `_meta["io.modelcontextprotocol/clientCapabilities"]`
declares the extension (the suite's "session-level" capabilities are the ones
its client stamps on every request; a per-request opt-in is one request's own).
Without it, an optional tool runs synchronously, a required one is -32021 with
`requiredCapabilities`, and `tasks/*` are -32021. Tasks exist on the 2026-07-28
wire only (on the handshake wire `tasks/*` are -32601). `tasks/*` also check
the routing header SEP-2663 requires: `Mcp-Name` must be present and equal
`params.taskId`, else -32020 (HTTP 400), as the SDK does for `tools/call`.

Task state lives in this process: a dict of tasks, each running its tool as an
asyncio task. `tasks/get` answers a DetailedTask (outcome or pending
`inputRequests` inlined), `tasks/update` and `tasks/cancel` answer empty acks,
an unknown task id is -32602. `tasks/result` and `tasks/list` (removed in v2)
are simply not served: -32601. `notifications/tasks` are not sent (optional;
the SDK's `subscriptions/listen` acknowledges no `taskIds`, which says so).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import decode_header_value
from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolRequestParams,
    InputRequiredResult,
    RequestParams,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from fixture_modern import accepted, elicit, input_required, responses, text, unseal

EXTENSION = "io.modelcontextprotocol/tasks"
TTL_MS = 600_000  # a task stays readable for 10 minutes after it was created
POLL_MS = 200
TERMINAL = ("completed", "failed", "cancelled")

# Which tools may become tasks; a tool not listed here (greet) never does.
# confirm_delete is optional, not required, so a client without the extension
# gets an answer from it too: the suite's http-header-validation calls the
# first listed tool with no arguments, and Junction lists tools sorted by name.
SUPPORT = {
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "required",
    "confirm_delete": "optional",
    "multi_input": "required",
    "test_tool_with_task": "required",
}


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---- one task ------------------------------------------------------------------

@dataclass
class Task:
    task_id: str
    created_at: str = field(default_factory=now)
    last_updated_at: str = ""
    expires: float = field(default_factory=lambda: time.monotonic() + TTL_MS / 1000)
    status: str = "working"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)  # inputRequests not yet answered
    answers: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    gathered: dict[str, Any] = field(default_factory=dict)  # what an MRTR round collected first
    runner: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.last_updated_at = self.created_at

    def set_status(self, status: str) -> None:
        self.status, self.last_updated_at = status, now()

    def handle(self) -> dict[str, Any]:
        """The Task fields every shape carries (CreateTaskResult is exactly these)."""
        return {"taskId": self.task_id, "status": self.status, "createdAt": self.created_at,
                "lastUpdatedAt": self.last_updated_at, "ttlMs": TTL_MS, "pollIntervalMs": POLL_MS}

    def detailed(self) -> dict[str, Any]:
        """The DetailedTask of tasks/get: the outcome or the pending requests inlined."""
        out = self.handle()
        if self.status == "input_required":
            out["inputRequests"] = dict(self.pending)
        elif self.status == "completed":
            out["result"] = self.result
        elif self.status == "failed":
            out["error"] = self.error
        return out


TASKS: dict[str, Task] = {}
CURRENT: contextvars.ContextVar[Task | None] = contextvars.ContextVar("fixture_task", default=None)


def purge() -> None:
    """Forgets tasks past their TTL (cancelling any still running)."""
    for task_id, task in list(TASKS.items()):
        if task.expires < time.monotonic():
            if task.runner is not None:
                task.runner.cancel()
            del TASKS[task_id]


async def ask(requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """From inside a running task: park it as input_required with `requests`
    (keys unique over the task's life) until tasks/update answered every one."""
    task = CURRENT.get()
    if task is None:
        raise ToolError("this tool asks for input only while it runs as a task")
    loop = asyncio.get_running_loop()
    futures = {key: loop.create_future() for key in requests}
    task.pending.update(requests)
    task.answers.update(futures)
    task.set_status("input_required")
    return {key: await fut for key, fut in futures.items()}


def gathered() -> dict[str, Any]:
    """From inside a running task: what its MRTR round collected before it was created."""
    task = CURRENT.get()
    return task.gathered if task is not None else {}


async def run(srv: MCPServer, task: Task, name: str, arguments: dict[str, Any]) -> None:
    """Runs the tool as the task, with the sync call's error semantics: a tool
    error is a completed task with `isError`, a JSON-RPC error a failed one."""
    CURRENT.set(task)
    try:
        result = await srv.call_tool(name, arguments)
        outcome: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        outcome.setdefault("resultType", "complete")
    except MCPError as exc:
        if task.status not in TERMINAL:
            task.error = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
            task.set_status("failed")
        return
    except Exception as exc:  # what MCPServer turns into an isError result on the sync path
        outcome = {"resultType": "complete", "content": [{"type": "text", "text": str(exc)}], "isError": True}
    if task.status not in TERMINAL:  # a cancel that came first wins
        task.result = outcome
        task.set_status("completed")


def create(srv: MCPServer, name: str, arguments: dict[str, Any], collected: dict[str, Any]) -> dict[str, Any]:
    """Creates the task (readable by tasks/get before this returns) and starts it."""
    purge()
    task = Task(task_id=str(uuid.uuid4()), gathered=collected)
    TASKS[task.task_id] = task
    task.runner = asyncio.get_running_loop().create_task(run(srv, task, name, arguments))
    return {"resultType": "task", **task.handle()}


# ---- negotiation, routing header, lookup ------------------------------------------

def declares(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request may get a task: 2026-07-28 wire, extension in its capabilities."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    return bool(caps is not None and caps.extensions and EXTENSION in caps.extensions)


def missing_extension() -> MCPError:
    return MCPError(code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                    message=f"Client did not declare the {EXTENSION} extension",
                    data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}})


def check_routing_header(ctx: ServerRequestContext[Any, Any], task_id: str) -> None:
    """SEP-2663: tasks/* over HTTP carry `Mcp-Name: <taskId>`; missing or different is -32020."""
    if ctx.request is None:  # not HTTP: no headers to check
        return
    got = decode_header_value(ctx.request.headers.get("mcp-name"))
    if got is None or got.strip() != task_id:
        raise MCPError(code=HEADER_MISMATCH,
                       message=f"Mcp-Name header must equal params.taskId on {ctx.method}")


def lookup(ctx: ServerRequestContext[Any, Any], task_id: str) -> Task:
    """The routing header, the capability gate, then the task (-32602 when unknown)."""
    check_routing_header(ctx, task_id)
    if not declares(ctx):
        raise missing_extension()
    purge()
    task = TASKS.get(task_id)
    if task is None:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown taskId: {task_id}")
    return task


# ---- tasks/get, tasks/update, tasks/cancel -------------------------------------------

class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId")


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


async def tasks_get(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    return lookup(ctx, params.task_id).detailed()  # the SDK adds resultType:"complete"


async def tasks_update(ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> dict[str, Any]:
    """Delivers answers to pending keys; keys not pending (unknown, already answered) are ignored."""
    task = lookup(ctx, params.task_id)
    for key, response in params.input_responses.items():
        if key in task.pending:
            del task.pending[key]
            task.answers.pop(key).set_result(response)
    if task.status == "input_required" and not task.pending:
        task.set_status("working")
    return {}


async def tasks_cancel(ctx: ServerRequestContext[Any, Any], params: TaskParams) -> dict[str, Any]:
    """Cancels a running task at once; on a terminal one it is the same empty ack."""
    task = lookup(ctx, params.task_id)
    if task.status not in TERMINAL:
        task.set_status("cancelled")
        task.pending.clear()
        if task.runner is not None:
            task.runner.cancel()
    return {}


# ---- tools/call: task or not ------------------------------------------------------

def input_responses(params: CallToolRequestParams) -> dict[str, Any]:
    got = params.input_responses or {}
    return {k: (v.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(v, "model_dump") else v)
            for k, v in got.items()}


def ask_user_name(params: CallToolRequestParams) -> InputRequiredResult | dict[str, Any]:
    """test_tool_with_task's MRTR round, answered synchronously before any task
    exists (SEP-2663): an InputRequiredResult until `user_name` and our signed
    requestState come back, then what it gathered."""
    state = unseal(params.request_state, "test_tool_with_task")
    name = accepted(input_responses(params).get("user_name"), "name")
    if state is None or name is None:
        return input_required({"user_name": elicit("What is your name?", "name")},
                              {"tool": "test_tool_with_task"})
    return {"user_name": name}


PRELUDES = {"test_tool_with_task": ask_user_name}


class TasksExtension(Extension):
    identifier = EXTENSION

    def __init__(self, srv: MCPServer) -> None:
        self.srv = srv

    def methods(self) -> list[MethodBinding]:
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [MethodBinding("tasks/get", TaskParams, tasks_get, modern),
                MethodBinding("tasks/update", UpdateParams, tasks_update, modern),
                MethodBinding("tasks/cancel", TaskParams, tasks_cancel, modern)]

    async def intercept_tool_call(self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any],
                                  call_next: CallNext) -> HandlerResult:
        support = SUPPORT.get(params.name)
        if support is None:  # not a task tool (a legacy `task` param changes nothing)
            return await call_next(ctx)
        if not declares(ctx):
            if support == "required":
                raise missing_extension()
            return await call_next(ctx)
        collected: dict[str, Any] = {}
        if params.name in PRELUDES:
            step = PRELUDES[params.name](params)
            if isinstance(step, InputRequiredResult):
                return step
            collected = step
        return create(self.srv, params.name, dict(params.arguments or {}), collected)


# ---- the tools ------------------------------------------------------------------

def register(srv: MCPServer) -> None:
    @srv.tool(description="Sync only (never a task): Hello, {name}!")
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    @srv.tool(description="Task optional: sleeps `seconds`, then reports `label`")
    async def slow_compute(seconds: float = 0, label: str = "") -> str:
        await asyncio.sleep(seconds)
        return f"slow_compute done: label={label!r} after {seconds:g} s"

    @srv.tool(description="Task required: fails with a tool error after about 1 s")
    async def failing_job() -> str:
        await asyncio.sleep(1)
        raise ToolError("failing_job failed on purpose")

    @srv.tool(description="Task required: fails with a JSON-RPC (protocol) error")
    async def protocol_error_job() -> str:
        await asyncio.sleep(0.2)
        raise MCPError(code=INTERNAL_ERROR, message="protocol_error_job crashed on purpose")

    @srv.tool(description="Task optional: asks to confirm (task: inputRequests; no task: MRTR)")
    async def confirm_delete(filename: str, ctx: Context) -> list[TextContent] | InputRequiredResult:
        request = {"confirm": elicit(f"Delete {filename}?", "confirm", "boolean")}
        if CURRENT.get() is not None:
            got = await ask(request)
        else:  # synchronous: one MRTR round on this very request
            got = responses(ctx)
            if "confirm" not in got:
                return input_required(request)
        ok = accepted(got["confirm"], "confirm")
        return text(f"deleted {filename}" if ok in ("True", "true") else f"kept {filename}")

    @srv.tool(description="Task required: two elicitations pending at once")
    async def multi_input() -> str:
        got = await ask({"name": elicit("What is your name?", "name"),
                         "confirm": elicit("Proceed?", "confirm", "boolean")})
        name, ok = accepted(got["name"], "name"), accepted(got["confirm"], "confirm")
        return f"multi_input done: name={name}, confirm={ok}"

    @srv.tool(description="Task required: MRTR round for user_name, then a task that greets them")
    async def test_tool_with_task() -> str:
        await asyncio.sleep(0.5)
        return f"Hello, {gathered().get('user_name')}! (from the task)"

    srv._apply_extension(TasksExtension(srv))  # MCPServer takes extensions at construction only
    srv._install_extension_interceptor()
