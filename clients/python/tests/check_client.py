#!/usr/bin/env python3
"""Checks cairn_client against a running cairnd that has a version installed.

    python clients/python/tests/check_client.py --socket PATH --query TEXT \\
        --expect-id ID --chunk-id ID [--require-langchain]

Prints one line per check ("ok NAME: …", "FAIL NAME: …" or "skip NAME: …"), then
"N passed, N failed, N skipped"; exits 1 when a check failed, 2 on bad arguments. The
cairn_client beside this script (clients/python) is imported, not an installed copy.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import traceback
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cairn_client import Cairn, CairnError, CairnUnavailable, Chunk, SearchAnswer, Status  # noqa: E402


class CheckFailed(Exception):
    pass


def require(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def expect_error(call, code: str, status: Optional[int], what: str) -> str:
    """Runs ``call`` and requires a CairnError with that code and status."""
    try:
        value = call()
    except CairnUnavailable as exc:
        raise CheckFailed(f"{what}: cairnd unreachable: {exc}")
    except CairnError as exc:
        require(exc.code == code and exc.status == status,
                f"{what}: expected CairnError {code} (HTTP {status}), got {exc.code} (HTTP {exc.status}): {exc.message}")
        require(bool(exc.message), f"{what}: the error has an empty message")
        return f"CairnError {exc.code} (HTTP {exc.status}): {exc.message}"
    raise CheckFailed(f"{what}: expected CairnError {code}, got an answer: {value!r:.200}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Check cairn_client against a running cairnd.")
    parser.add_argument("--socket", required=True, help="cairnd's Unix socket")
    parser.add_argument("--query", required=True, help="a query whose best result is --expect-id")
    parser.add_argument("--expect-id", required=True, help="the id of the first result of --query (k=3)")
    parser.add_argument("--chunk-id", required=True, help="an id the installed version holds")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per call (default 30)")
    parser.add_argument("--require-langchain", action="store_true",
                        help="fail (instead of skip) when langchain_core is not importable")
    args = parser.parse_args(argv)

    cairn = Cairn(socket=args.socket, timeout=args.timeout)
    counts = {"ok": 0, "FAIL": 0, "skip": 0}

    def check(name, body):
        try:
            detail = body()
        except CheckFailed as exc:
            verdict, detail = "FAIL", str(exc)
        except CairnError as exc:
            verdict, detail = "FAIL", f"unexpected {type(exc).__name__}: {exc}"
        except Exception as exc:  # a bug in the client: show where
            verdict = "FAIL"
            detail = f"unexpected {type(exc).__name__}: {exc} | " + " | ".join(
                line.strip() for line in traceback.format_exc().strip().splitlines()[-3:])
        else:
            verdict = "ok"
        counts[verdict] += 1
        print(f"{verdict} {name}: {detail}", flush=True)

    def check_status():
        status = cairn.status()
        require(isinstance(status, Status), f"status() returned {type(status).__name__}")
        require(status.installed is True, f"installed is {status.installed!r}")
        require(isinstance(status.version, int) and not isinstance(status.version, bool),
                f"version is {status.version!r}")
        require(isinstance(status.state_root, str) and status.state_root, f"state_root is {status.state_root!r}")
        require(isinstance(status.sync, dict), f"sync is {type(status.sync).__name__}")
        require(status.raw.get("installed") is True, "raw does not hold the answer")
        require(isinstance(status.published, str) and status.published.startswith("20"), f"published is {status.published!r}")
        return (f"installed version {status.version} channel {status.channel} "
                f"state_root {status.state_root[:12]}… expired {status.expired}")

    def check_search():
        answer = cairn.search(args.query, k=3)
        require(isinstance(answer, SearchAnswer), f"search() returned {type(answer).__name__}")
        ids = [result.id for result in answer.results]
        require(1 <= len(ids) <= 3, f"{len(ids)} results for k=3")
        require(ids[0] == args.expect_id, f"first id {ids[0]!r}, expected {args.expect_id!r} (ids {ids})")
        require(isinstance(answer.version, int) and not isinstance(answer.version, bool),
                f"version is {answer.version!r}")
        require(isinstance(answer.state_root, str) and answer.state_root, f"state_root is {answer.state_root!r}")
        first = answer.results[0]
        require(first.rank == 1, f"first rank is {first.rank!r}")
        require(isinstance(first.content, str) and first.content, "first result has no content")
        require(isinstance(first.score, (int, float)), f"first score is {first.score!r}")
        require(isinstance(first.tags, list), f"first tags is {first.tags!r}")
        require(answer.unmatched_filter is None, f"unmatched_filter is {answer.unmatched_filter!r} with no filter")
        # Each result names its channel and version, as get takes them.
        require(first.version == answer.version, f"first result's version {first.version!r}, the answer's {answer.version!r}")
        require(isinstance(first.channel, str) and first.channel, f"first result's channel is {first.channel!r}")
        require(answer.channels is None, f"channels is {answer.channels!r} with one channel searched")
        scoped = cairn.search(args.query, k=3, channels=first.channel)
        # The same passages (as a set: near-equal scores may swap), all from that channel.
        require(sorted(result.id for result in scoped.results) == sorted(ids)
                and all(result.channel == first.channel for result in scoped.results),
                f"search(channels={first.channel!r}) found {[(r.id, r.channel) for r in scoped.results]}")
        expect_error(lambda: cairn.search(args.query, channels=["no-such-channel"]), "unknown_channel", 400,
                     'search(channels=["no-such-channel"])')
        found = cairn.get(first.id, channel=first.channel, version=first.version)
        require(found.content == first.content and found.channel == first.channel,
                f"get({first.id!r}, channel={first.channel!r}, version={first.version}) gave {found!r:.200}")
        guessed = cairn.search(args.query, k=3, tags=["No-Such-Tag"])
        require((guessed.unmatched_filter or {}).get("tags") == ["No-Such-Tag"],
                f"unmatched_filter for a tag no chunk has is {guessed.unmatched_filter!r}")
        return f"{ids} version {answer.version} state_root {answer.state_root[:12]}… mode {answer.mode}"

    def check_get():
        chunk = cairn.get(args.chunk_id)
        require(isinstance(chunk, Chunk), f"get() returned {type(chunk).__name__}")
        require(chunk.id == args.chunk_id, f"id {chunk.id!r}, expected {args.chunk_id!r}")
        require(isinstance(chunk.content, str) and chunk.content, "the chunk has no content")
        require(isinstance(chunk.version, int), f"version is {chunk.version!r}")
        require(isinstance(chunk.state_root, str) and chunk.state_root, f"state_root is {chunk.state_root!r}")
        require(isinstance(chunk.channel, str) and chunk.channel, f"channel is {chunk.channel!r}")
        pinned = cairn.get(args.chunk_id, version=chunk.version)
        require(pinned.version == chunk.version, f"pinned to version {chunk.version}, got {pinned.version}")
        expect_error(lambda: cairn.get(args.chunk_id, version=chunk.version + 1), "version_changed", 409,
                     f"get(version={chunk.version + 1})")
        return f"{chunk.id!r} {chunk.title!r} version {chunk.version}"

    def check_missing_chunk():
        return expect_error(lambda: cairn.get("no-such-chunk"), "chunk_not_found", 404, 'get("no-such-chunk")')

    def check_bad_k():
        return expect_error(lambda: cairn.search(args.query, k=0), "bad_k", 400, "search(k=0)")

    def check_nan_similarity():
        # JSON has no NaN: refused by the client before sending, with the code cairnd gives
        # (sent as Python writes it, cairnd read a body that is not JSON: bad_json).
        expect_error(lambda: cairn.search(args.query, k=float("inf")), "bad_json", None, "search(k=inf)")
        return expect_error(lambda: cairn.search(args.query, min_similarity=float("nan")), "bad_min_similarity", None,
                            'search(min_similarity=nan)')

    def check_body_too_large():
        # About 4 MB of tags, more than the socket buffers: refused from its Content-Length and
        # read at once, not after the client's timeout spent writing to a daemon that stopped
        # reading.
        return expect_error(lambda: cairn.search(args.query, tags=["x" * 400] * 10_000), "body_too_large", 413,
                            "search(tags=[10,000 tags])")

    def check_bad_mode():
        return expect_error(lambda: cairn.search(args.query, mode="nonsense"), "bad_mode", 400,
                            'search(mode="nonsense")')

    def check_unavailable():
        with tempfile.TemporaryDirectory(prefix="cairn-check-") as folder:
            missing = os.path.join(folder, "absent.sock")
            try:
                value = Cairn(socket=missing, timeout=5).status()
            except CairnUnavailable as exc:
                require(exc.code == "unavailable", f"code {exc.code!r}, expected 'unavailable'")
                require(exc.status is None, f"status {exc.status!r}, expected None")
                require(missing in exc.message, f"the message does not name the socket: {exc.message}")
                require("CAIRN_SOCKET" in exc.message, f"the message does not mention CAIRN_SOCKET: {exc.message}")
                return f"CairnUnavailable {exc.code}: {exc.message}"
            except CairnError as exc:
                raise CheckFailed(f"expected CairnUnavailable, got {type(exc).__name__} {exc}")
            raise CheckFailed(f"expected CairnUnavailable, got an answer: {value!r:.200}")

    def check_langchain():
        from langchain_core.documents import Document

        from cairn_client.langchain import CairnRetriever

        documents = CairnRetriever(socket=args.socket, k=2).invoke(args.query)
        require(isinstance(documents, list) and documents, f"invoke returned {documents!r:.200}")
        require(all(isinstance(doc, Document) for doc in documents), "not every item is a Document")
        require(len(documents) <= 2, f"{len(documents)} documents for k=2")
        metadata = documents[0].metadata
        require(metadata.get("id") == args.expect_id,
                f"first metadata id {metadata.get('id')!r}, expected {args.expect_id!r}")
        missing = [key for key in ("id", "title", "scenario", "tags", "source", "score", "channel", "version",
                                   "state_root", "stale", "expired") if key not in metadata]
        require(not missing, f"metadata lacks {missing}")
        require(documents[0].page_content, "the first Document has no page_content")
        require(isinstance(metadata["channel"], str) and isinstance(metadata["version"], int),
                f"metadata channel {metadata['channel']!r} version {metadata['version']!r}")
        return f"{[doc.metadata['id'] for doc in documents]} version {metadata['version']}"

    check("status", check_status)
    check("search", check_search)
    check("get", check_get)
    check("get missing chunk", check_missing_chunk)
    check("bad k", check_bad_k)
    check("bad mode", check_bad_mode)
    check("NaN min_similarity", check_nan_similarity)
    check("body too large", check_body_too_large)
    check("unavailable socket", check_unavailable)

    try:
        import langchain_core  # noqa: F401
    except ImportError:
        if args.require_langchain:
            def langchain_missing():
                raise CheckFailed("langchain_core is not importable (--require-langchain)")

            check("langchain", langchain_missing)
        else:
            print("skip langchain: not installed", flush=True)
            counts["skip"] += 1
    else:
        check("langchain", check_langchain)

    print(f"{counts['ok']} passed, {counts['FAIL']} failed, {counts['skip']} skipped", flush=True)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
