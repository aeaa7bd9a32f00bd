"""A LangChain retriever backed by cairnd: ``CairnRetriever(k=4).invoke("question")``.

Needs langchain-core (``pip install 'cairn-client[langchain]'``); ``import cairn_client``
itself does not.
"""

from __future__ import annotations

from typing import List, Optional

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "cairn_client.langchain needs langchain-core: pip install 'cairn-client[langchain]' (or pip install langchain-core)"
    ) from _exc

from .client import Cairn

__all__ = ["CairnRetriever"]


class CairnRetriever(BaseRetriever):
    """Retrieves chunks from cairnd's installed version (``POST /v1/search``).

    Each Document's ``page_content`` is the chunk's content; its ``metadata`` holds ``id``,
    ``title``, ``scenario``, ``tags``, ``source``, ``score`` (the fused score), ``rank``, the
    ``channel`` and ``version`` it came from, and the answer's ``state_root``, ``stale`` and
    ``expired`` (None over several channels). ``channels`` searches only those knowledge
    bases of a cairnd that follows several. Errors are
    ``cairn_client.CairnError`` / ``CairnUnavailable``.
    """

    socket: Optional[str] = None
    """cairnd's socket; None: ``$CAIRN_SOCKET``, else ``/run/cairn/cairnd.sock``."""
    k: int = 4
    mode: str = "hybrid"
    scenario: Optional[str] = None
    tags: Optional[List[str]] = None
    min_similarity: Optional[float] = None
    channels: Optional[List[str]] = None
    timeout: float = 30.0

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> List[Document]:
        answer = Cairn(socket=self.socket, timeout=self.timeout).search(
            query, k=self.k, mode=self.mode, scenario=self.scenario, tags=self.tags,
            min_similarity=self.min_similarity, channels=self.channels)
        return [
            Document(
                id=result.id,
                page_content=result.content,
                metadata={
                    "id": result.id,
                    "title": result.title,
                    "scenario": result.scenario,
                    "tags": list(result.tags),
                    "source": result.source,
                    "score": result.score,
                    "rank": result.rank,
                    "channel": result.channel,
                    "version": result.version if result.version is not None else answer.version,
                    "state_root": answer.state_root,
                    "stale": answer.stale,
                    "expired": answer.expired,
                },
            )
            for result in answer.results
        ]
