#!/usr/bin/env python3
"""Drives `cairn mcp` with the official MCP Python SDK's stdio client (PyPI `mcp`), as an agent
would: initialize, list the tools, call search, get and status, and a call that must fail.

    python Tests/Reference/mcp_check.py --cairn PATH --socket SOCK --query TEXT --expect-id ID

Prints one line per check and a JSON summary on the last line; exits 1 if a check fails.
`--dead-socket PATH` also checks that a cairnd that is not there gives a tool error, not a hang.
"""
import argparse, asyncio, json, sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(what)


def code_of(result):
    """A tool error's code, from its text (`code: message`); None unless the result is an error
    without structured_content (the tool's outputSchema describes its answer, and a client may
    check an error's structured_content against it too, as the TypeScript SDK's 1.x did)."""
    if not result.is_error or result.structured_content is not None or not result.content:
        return None
    return result.content[0].text.split(": ", 1)[0]


async def session_for(cairn, socket, body):
    params = StdioServerParameters(command=cairn, args=["mcp", "--socket", socket, "--timeout", "5"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            return await body(session)


async def main(args):
    summary = {}

    async def drive(session):
        init = await session.initialize()
        check("initialize names the server", init.server_info.name == "cairn", init.server_info.name)
        summary["protocol_version"] = init.protocol_version
        tools = (await session.list_tools()).tools
        names = sorted(t.name for t in tools)
        check("tools are get, search, status", names == ["get", "search", "status"], names)
        # The SDK checks each structured result against its tool's outputSchema (an error if not).
        check("every tool declares an outputSchema", all(t.output_schema for t in tools),
              {t.name: bool(t.output_schema) for t in tools})
        search_tool = next(t for t in tools if t.name == "search")
        check("search says when to use it", "before answering" in (search_tool.description or ""))
        check("search requires a query", search_tool.input_schema.get("required") == ["query"], search_tool.input_schema)

        found = await session.call_tool("search", {"query": args.query, "k": 3})
        structured = found.structured_content or {}
        ids = [r["id"] for r in structured.get("results", [])]
        check("search is not an error", not found.is_error, found.content)
        check("search finds the expected passage first", ids[:1] == [args.expect_id], ids)
        text = found.content[0].text if found.content else ""
        check("the text numbers passages for a prompt", text.splitlines()[1].startswith("[1] ") if len(text.splitlines()) > 1 else False, text)
        check("the text names each id", all(f"(id: {i}" in text for i in ids), text)
        check("the first line says how fresh the knowledge is", text.splitlines()[0].startswith("Knowledge base version"), text)
        check("structured content has the version", isinstance(structured.get("version"), int), structured)
        summary["search_ids"] = ids
        summary["freshness"] = text.splitlines()[0] if text else ""

        got = await session.call_tool("get", {"id": args.expect_id})
        check("get returns the passage", not got.is_error and (got.structured_content or {}).get("id") == args.expect_id,
              got.structured_content)
        missing = await session.call_tool("get", {"id": "no-such-chunk"})
        check("a missing id is a tool error with the daemon's code",
              code_of(missing) == "chunk_not_found", (missing.content, missing.structured_content))
        bad = await session.call_tool("search", {"query": args.query, "k": 500})
        check("an argument outside the schema is a tool error", bad.is_error, bad.content)
        summary["bad_arguments_code"] = code_of(bad)
        refused = await session.call_tool("search", {"query": args.query, "channel": "no-such-channel"})
        check("a request cairnd refuses is a tool error with the daemon's code", refused.is_error, refused.content)
        summary["bad_request_code"] = code_of(refused)
        status = await session.call_tool("status", {})
        check("status reports the installed version", (status.structured_content or {}).get("version") == structured.get("version"),
              status.structured_content)
        status_text = status.content[0].text if status.content else ""
        check("status says whether the device is online", "; online" in status_text or "; offline" in status_text, status_text)
        try:
            await session.call_tool("nonexistent", {})
            check("an unknown tool is a protocol error", False, "no error raised")
        except Exception as error:  # the SDK raises McpError for JSON-RPC errors
            check("an unknown tool is a protocol error", "Unknown tool" in str(error), str(error))

    await session_for(args.cairn, args.socket, drive)

    if args.dead_socket:
        async def dead(session):
            await session.initialize()
            answer = await session.call_tool("search", {"query": "water"})
            check("an unreachable cairnd is a tool error naming the socket",
                  answer.is_error and args.dead_socket in answer.content[0].text, answer.content)
            summary["unreachable_code"] = code_of(answer)
        await asyncio.wait_for(session_for(args.cairn, args.dead_socket, dead), timeout=60)

    print(json.dumps(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cairn", required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--query", required=True)
    parser.add_argument("--expect-id", required=True)
    parser.add_argument("--dead-socket")
    sys.exit(asyncio.run(main(parser.parse_args())))
