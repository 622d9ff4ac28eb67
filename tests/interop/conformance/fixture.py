"""Conformance fixture upstream (mcp 2.x MCPServer) for the official MCP conformance
suite's server scenarios: the tools, prompts, resources and completion those
scenarios call by fixed name, with the contents they check.

Run with tests/interop/.peers/py-mcp2/bin/python:

    fixture.py PORT [--stateful|--stateless] [--sse|--json]

PORT 0 picks a free port; prints exactly one stdout line `READY <port>` once the
socket listens (logs go to stderr). Binds 127.0.0.1 only. Defaults: stateful and
SSE, so the handshake-era scenarios (sessions, progress, logging) have a stream.

The 2026-07-28 scenarios' diagnostic and MRTR tools (test_missing_capability,
test_streaming_elicitation, test_logging_tool, test_input_required_result_*)
live in fixture_modern.py, and the tasks extension (io.modelcontextprotocol/tasks,
SEP-2663) with the tools the suite's tasks-* scenarios call lives in
fixture_tasks.py; both are registered on the same server.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import _serve  # noqa: E402  (the shared READY/port/flags boilerplate)
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.types import (
    AudioContent,
    Completion,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
)

# 1x1 red PNG and a minimal WAV: the suite only checks type, mimeType and base64.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

srv = MCPServer(name="junction-conformance-fixture", version="1.0.0")


def embedded(uri: str, text: str, mime: str = "text/plain") -> EmbeddedResource:
    return EmbeddedResource(
        type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=text)
    )


# ---- tools -------------------------------------------------------------------

@srv.tool(description="Tests simple text content response")
def test_simple_text() -> list[TextContent]:
    return [TextContent(type="text", text="This is a simple text response for testing.")]


@srv.tool(description="Tests image content response")
def test_image_content() -> list[ImageContent]:
    return [ImageContent(type="image", data=PNG, mime_type="image/png")]


@srv.tool(description="Tests audio content response")
def test_audio_content() -> list[AudioContent]:
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


@srv.tool(description="Tests embedded resource content response")
def test_embedded_resource() -> list[EmbeddedResource]:
    return [embedded("test://embedded-resource", "This is an embedded resource content.")]


@srv.tool(description="Tests response with multiple content types (text, image, resource)")
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        embedded(
            "test://mixed-content-resource",
            json.dumps({"test": "data", "value": 123}),
            "application/json",
        ),
    ]


@srv.tool(description="Tests tool that emits log messages during execution")
async def test_tool_with_logging(ctx: Context) -> list[TextContent]:
    for msg in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(msg)
        await asyncio.sleep(0.05)
    return [TextContent(type="text", text="Tool with logging executed successfully")]


@srv.tool(description="Tests tool that reports progress notifications")
async def test_tool_with_progress(ctx: Context) -> list[TextContent]:
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        await asyncio.sleep(0.05)
    return [TextContent(type="text", text="progress reported")]


@srv.tool(description="Tests error response handling")
def test_error_handling() -> str:
    raise RuntimeError("This tool intentionally returns an error for testing")


@srv.tool(description="Tests server-initiated sampling (LLM completion request)")
async def test_sampling(prompt: str, ctx: Context) -> str:
    from mcp.types import SamplingMessage

    result = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
    )
    content = result.content
    text = getattr(content, "text", None) or "No response"
    return f"LLM response: {text}"


@srv.tool(description="Tests server-initiated elicitation (user input request)")
async def test_elicitation(message: str, ctx: Context) -> str:
    from pydantic import BaseModel, Field

    class Answer(BaseModel):
        response: str = Field(description="User's response")

    res = await ctx.elicit(message, Answer)
    content = res.data.model_dump() if getattr(res, "data", None) is not None else {}
    return f"User response: action={res.action}, content={json.dumps(content)}"


SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status",
                   "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}

SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option",
                           "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "description": "Select one option with titles",
                         "oneOf": [{"const": "value1", "title": "First Option"},
                                   {"const": "value2", "title": "Second Option"},
                                   {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                       "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Select multiple options",
                          "minItems": 1, "maxItems": 3,
                          "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                        "minItems": 1, "maxItems": 3,
                        "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                            {"const": "value2", "title": "Second Choice"},
                                            {"const": "value3", "title": "Third Choice"}]}},
    },
    "required": [],
}


async def elicit_raw(ctx: Context, message: str, schema: dict) -> str:
    res = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return f"Elicitation completed: action={res.action}, content={json.dumps(res.content or {})}"


@srv.tool(description="Tests elicitation with default values per SEP-1034")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    return await elicit_raw(ctx, "Please review and update the form fields with defaults", SEP1034_SCHEMA)


@srv.tool(description="Tests elicitation with enum schema improvements per SEP-1330")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    return await elicit_raw(ctx, "Please select options from the enum fields", SEP1330_SCHEMA)


# ---- resources ---------------------------------------------------------------

@srv.resource("test://static-text", name="static-text", title="Static Text Resource",
              description="A static text resource for testing", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@srv.resource("test://static-binary", name="static-binary", title="Static Binary Resource",
              description="A static binary resource (image) for testing", mime_type="image/png")
def static_binary() -> bytes:
    import base64

    return base64.b64decode(PNG)


@srv.resource("test://template/{id}/data", name="template", title="Resource Template",
              description="A resource template with parameter substitution",
              mime_type="application/json")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@srv.resource("test://watched-resource", name="watched-resource", title="Watched Resource",
              description="A resource for subscription tests", mime_type="text/plain")
def watched() -> str:
    return "Watched resource content"


# ---- prompts -----------------------------------------------------------------

@srv.prompt(name="test_simple_prompt", title="Simple Test Prompt",
            description="A simple prompt without arguments")
def simple_prompt() -> str:
    return "This is a simple prompt for testing."


@srv.prompt(name="test_prompt_with_arguments", title="Prompt With Arguments",
            description="A prompt with required arguments")
def prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@srv.prompt(name="test_prompt_with_embedded_resource", title="Prompt With Embedded Resource",
            description="A prompt that includes an embedded resource")
def prompt_with_embedded_resource(resourceUri: str) -> list:
    return [
        UserMessage(content=embedded(resourceUri, "Embedded resource content for testing.")),
        UserMessage(content=TextContent(type="text", text="Please process the embedded resource above.")),
    ]


@srv.prompt(name="test_prompt_with_image", title="Prompt With Image",
            description="A prompt that includes image content")
def prompt_with_image() -> list:
    return [
        UserMessage(content=ImageContent(type="image", data=PNG, mime_type="image/png")),
        UserMessage(content=TextContent(type="text", text="Please analyze the image above.")),
    ]


@srv.completion()
async def complete(ref, argument, context) -> Completion:
    return Completion(values=[], total=0, has_more=False)


# Methods MCPServer has no decorator for: accepted and answered empty, as the
# suite's reference server does.
async def empty_result(ctx, params) -> EmptyResult:
    return EmptyResult()


for _method, _params in (
    ("logging/setLevel", SetLevelRequestParams),
    ("resources/subscribe", SubscribeRequestParams),
    ("resources/unsubscribe", SubscribeRequestParams),
):
    srv._lowlevel_server.add_request_handler(_method, _params, empty_result)


def main() -> None:
    import fixture_modern
    import fixture_tasks

    fixture_modern.register(srv)
    fixture_tasks.register(srv)
    args = _serve.parse(__doc__, stateless=False, json_response=False)
    app = srv.streamable_http_app(
        streamable_http_path=args.path,
        json_response=args.json_response,
        stateless_http=args.stateless,
        host="127.0.0.1",
    )
    _serve.serve(app, args.port)


if __name__ == "__main__":
    sys.exit(main())
