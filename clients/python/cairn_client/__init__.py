"""cairn_client: a standard-library client of cairnd's socket API (protocol/socket-api.md).

    from cairn_client import Cairn
    answer = Cairn().search("how do I purify water", k=3)
    print(answer.version, [r.id for r in answer.results])

The LangChain retriever lives in ``cairn_client.langchain`` (needs langchain-core).
"""

from .client import DEFAULT_SOCKET, Cairn, default_socket
from .errors import CairnError, CairnUnavailable
from .models import Chunk, SearchAnswer, SearchResult, Status

__version__ = "0.1.0"

__all__ = [
    "Cairn",
    "CairnError",
    "CairnUnavailable",
    "Chunk",
    "DEFAULT_SOCKET",
    "SearchAnswer",
    "SearchResult",
    "Status",
    "default_socket",
]
