"""The 2026-07-28 half of the conformance fixture: the diagnostic tools of the
`server-stateless` scenario and the tools and prompt of the
`input-required-result-*` (MRTR, SEP-2322) scenarios, with the exact input keys,
messages and result texts the pinned suite checks (read from its scenario
descriptions). `register(srv)` adds them to fixture.py's MCPServer.

The MRTR tools build their `InputRequiredResult`s by hand (not through the SDK's
`Resolve` framework) because the suite names the `inputRequests` keys. Their
`requestState` is HMAC-signed with a per-process key, so a tampered or foreign
state is rejected with -32602 — the integrity rule Junction's own envelope must
keep when it wraps these states.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from typing import Annotated, Any

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.shared.exceptions import MCPError
from mcp.types import InputRequiredResult, TextContent
from pydantic import BaseModel, Field

MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
INVALID_PARAMS = -32602
KEY = os.urandom(32)


# ---- requestState: signed, opaque to the client (and to Junction) -------------

def seal(state: dict[str, Any]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()
    mac = hmac.new(KEY, body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def unseal(token: str | None, tool: str) -> dict[str, Any] | None:
    """None when there is no state; MCPError(-32602) when it fails verification."""
    if token is None:
        return None
    body, _, mac = token.rpartition(".")
    good = hmac.new(KEY, body.encode(), hashlib.sha256).hexdigest()
    if not body or not hmac.compare_digest(mac, good):
        raise MCPError(code=INVALID_PARAMS, message="Invalid requestState: integrity check failed",
                       data={"reason": "invalid_request_state"})
    state = json.loads(base64.urlsafe_b64decode(body))
    if state.get("tool") != tool:
        raise MCPError(code=INVALID_PARAMS, message="requestState belongs to another request",
                       data={"reason": "invalid_request_state"})
    return state


# ---- inputRequests and inputResponses -----------------------------------------

def elicit(message: str, prop: str, kind: str = "string") -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {prop: {"type": kind}}, "required": [prop]}}}


def sample(text: str, max_tokens: int) -> dict[str, Any]:
    return {"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens}}


ROOTS = {"method": "roots/list", "params": {}}


def input_required(requests: dict[str, Any], state: dict[str, Any] | None = None) -> InputRequiredResult:
    raw: dict[str, Any] = {"resultType": "input_required", "inputRequests": requests}
    if state is not None:
        raw["requestState"] = seal(state)
    return InputRequiredResult.model_validate(raw)


def responses(ctx: Context) -> dict[str, dict[str, Any]]:
    """The retry's inputResponses as plain JSON objects (the SDK parsed and validated them)."""
    got = ctx.input_responses or {}
    return {k: (v.model_dump(by_alias=True, mode="json", exclude_none=True) if hasattr(v, "model_dump") else v)
            for k, v in got.items()}


def accepted(resp: dict[str, Any] | None, field: str) -> str | None:
    if not resp or resp.get("action") != "accept":
        return None
    value = (resp.get("content") or {}).get(field)
    return None if value is None else str(value)


def sampled_text(resp: dict[str, Any] | None) -> str | None:
    content = (resp or {}).get("content")
    if isinstance(content, list):
        content = content[0] if content else None
    return content.get("text") if isinstance(content, dict) else None


def text(t: str) -> list[TextContent]:
    return [TextContent(type="text", text=t)]


def client_caps(ctx: Context) -> dict[str, Any]:
    caps = ctx.client_capabilities
    return caps.model_dump(by_alias=True, exclude_none=True) if caps is not None else {}


# ---- the tools ----------------------------------------------------------------

class Confirm(BaseModel):
    ok: bool = Field(description="Go ahead?")


def ask_confirm() -> Elicit[Confirm]:
    return Elicit("Please confirm the streaming operation", Confirm)


def register(srv: MCPServer) -> None:  # noqa: C901  (one flat list of tools reads best)
    @srv.tool(description="Requires the client's sampling capability (server-stateless diagnostic)")
    def test_missing_capability(ctx: Context) -> list[TextContent]:
        if "sampling" not in client_caps(ctx):
            raise MCPError(code=MISSING_REQUIRED_CLIENT_CAPABILITY,
                           message="Client did not declare the sampling capability this tool needs",
                           data={"requiredCapabilities": {"sampling": {}}})
        return text("sampling capability present")

    @srv.tool(description="Asks the client through elicitation (InputRequiredResult on 2026-07-28)")
    def test_streaming_elicitation(
        answer: Annotated[ElicitationResult[Confirm], Resolve(ask_confirm)],
    ) -> str:
        ok = isinstance(answer, AcceptedElicitation) and answer.data.ok
        return "streaming elicitation confirmed" if ok else "streaming elicitation declined"

    @srv.tool(description="Emits log messages (only at the level the request's _meta asks for)")
    async def test_logging_tool(ctx: Context) -> list[TextContent]:
        for msg in ("logging tool started", "logging tool finished"):
            await ctx.info(msg)
        return text("logging tool done")

    @srv.tool(description="MRTR: one elicitation (user_name), then Hello, <name>!")
    def test_input_required_result_elicitation(ctx: Context) -> list[TextContent] | InputRequiredResult:
        name = accepted(responses(ctx).get("user_name"), "name")
        if name is None:  # first round, or a retry without a usable user_name: ask (again)
            return input_required({"user_name": elicit("What is your name?", "name")})
        return text(f"Hello, {name}!")

    @srv.tool(description="MRTR: one sampling request (capital_question)")
    def test_input_required_result_sampling(ctx: Context) -> list[TextContent] | InputRequiredResult:
        answer = sampled_text(responses(ctx).get("capital_question"))
        if answer is None:
            return input_required({"capital_question": sample("What is the capital of France?", 100)})
        return text(f"Sampling response: {answer}")

    @srv.tool(description="MRTR: one roots/list request (client_roots)")
    def test_input_required_result_list_roots(ctx: Context) -> list[TextContent] | InputRequiredResult:
        roots = (responses(ctx).get("client_roots") or {}).get("roots")
        if roots is None:
            return input_required({"client_roots": ROOTS})
        uris = ", ".join(str(r.get("uri")) for r in roots)
        return text(f"Client roots: {uris}")

    @srv.tool(description="MRTR: elicitation plus signed requestState; answers state-ok")
    def test_input_required_result_request_state(ctx: Context) -> list[TextContent] | InputRequiredResult:
        state = unseal(ctx.request_state, "request_state")
        ok = accepted(responses(ctx).get("confirm"), "ok")
        if state is None or ok is None:
            return input_required({"confirm": elicit("Please confirm", "ok", "boolean")},
                                  {"tool": "request_state", "round": 1})
        return text(f"state-ok: round {state['round']} confirmed={ok}")

    @srv.tool(description="MRTR: elicitation, sampling and roots/list in one round")
    def test_input_required_result_multiple_inputs(ctx: Context) -> list[TextContent] | InputRequiredResult:
        state = unseal(ctx.request_state, "multiple_inputs")
        got = responses(ctx)
        name = accepted(got.get("user_name"), "name")
        greeting = sampled_text(got.get("greeting"))
        roots = (got.get("client_roots") or {}).get("roots")
        if state is None or name is None or greeting is None or roots is None:
            return input_required({
                "user_name": elicit("What is your name?", "name"),
                "greeting": sample("Generate a greeting", 50),
                "client_roots": ROOTS,
            }, {"tool": "multiple_inputs"})
        return text(f"All inputs received: name={name}, greeting={greeting}, roots={len(roots)}")

    @srv.tool(description="MRTR: two rounds of elicitation, requestState updated between them")
    def test_input_required_result_multi_round(ctx: Context) -> list[TextContent] | InputRequiredResult:
        state = unseal(ctx.request_state, "multi_round")
        got = responses(ctx)
        if state is None:
            return input_required({"step1": elicit("Step 1: What is your name?", "name")},
                                  {"tool": "multi_round", "round": 1})
        if state.get("round") == 1:
            name = accepted(got.get("step1"), "name")
            if name is None:
                return input_required({"step1": elicit("Step 1: What is your name?", "name")},
                                      {"tool": "multi_round", "round": 1})
            return input_required({"step2": elicit("Step 2: What is your favorite color?", "color")},
                                  {"tool": "multi_round", "round": 2, "name": name})
        color = accepted(got.get("step2"), "color")
        if color is None:
            return input_required({"step2": elicit("Step 2: What is your favorite color?", "color")}, state)
        return text(f"Multi-round complete: {state.get('name')} likes {color}")

    @srv.tool(description="MRTR: signed requestState; a tampered one is -32602")
    def test_input_required_result_tampered_state(ctx: Context) -> list[TextContent] | InputRequiredResult:
        state = unseal(ctx.request_state, "tampered_state")
        ok = accepted(responses(ctx).get("confirm"), "ok")
        if state is None or ok is None:
            return input_required({"confirm": elicit("Please confirm", "ok", "boolean")},
                                  {"tool": "tampered_state"})
        return text("state verified")

    @srv.tool(description="MRTR: asks only for what the client's capabilities allow")
    def test_input_required_result_capabilities(ctx: Context) -> list[TextContent] | InputRequiredResult:
        caps = client_caps(ctx)
        got = responses(ctx)
        wanted: dict[str, Any] = {}
        if "elicitation" in caps and accepted(got.get("user_name"), "name") is None:
            wanted["user_name"] = elicit("What is your name?", "name")
        if "sampling" in caps and sampled_text(got.get("greeting")) is None:
            wanted["greeting"] = sample("Generate a greeting", 50)
        if "roots" in caps and "client_roots" not in got:
            wanted["client_roots"] = ROOTS
        if wanted:
            return input_required(wanted)
        return text(f"capabilities honoured: {sorted(caps)}")

    # The suite calls these while a subscriptions/listen stream is open and
    # expects the matching list_changed on it: each call really changes the list.
    def dynamic_tool() -> str:
        """A tool that test_trigger_tool_change adds and removes."""
        return "dynamic"

    def dynamic_prompt() -> str:
        """A prompt that test_trigger_prompt_change adds and removes."""
        return "dynamic prompt"

    @srv.tool(description="Adds or removes test_dynamic_tool and announces the list change")
    async def test_trigger_tool_change(ctx: Context) -> list[TextContent]:
        if any(t.name == "test_dynamic_tool" for t in await srv.list_tools()):
            srv.remove_tool("test_dynamic_tool")
        else:
            srv.add_tool(dynamic_tool, name="test_dynamic_tool")
        await ctx.notify_tools_changed()
        return text("tool list changed")

    @srv.tool(description="Adds or removes test_dynamic_prompt and announces the list change")
    async def test_trigger_prompt_change(ctx: Context) -> list[TextContent]:
        if any(p.name == "test_dynamic_prompt" for p in await srv.list_prompts()):
            srv.remove_prompt("test_dynamic_prompt")
        else:
            srv.prompt(name="test_dynamic_prompt")(dynamic_prompt)
        await ctx.notify_prompts_changed()
        return text("prompt list changed")

    @srv.prompt(name="test_input_required_result_prompt", description="MRTR on prompts/get")
    def input_required_prompt(ctx: Context) -> str | InputRequiredResult:
        context = accepted(responses(ctx).get("user_context"), "context")
        if context is None:
            return input_required({"user_context": elicit("What context should the prompt use?", "context")})
        return f"Prompt with context: {context}"
