"""Typed answers of cairnd's socket API (protocol/socket-api.md).

Every class keeps the decoded JSON object in ``raw``, so fields the daemon adds later are
never lost, and decoding ignores keys it does not know.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["Chunk", "SearchResult", "SearchAnswer", "Status"]


def _tags(value: Any) -> List[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise TypeError(f"tags is {type(value).__name__}, not a list")
    return [str(tag) for tag in value]


def _object(value: Any, what: str) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{what} is {type(value).__name__}, not an object")
    return value


@dataclass
class Chunk:
    """One chunk: the body of ``GET /v1/chunks/{id}`` (``version``, ``state_root`` and
    ``channel`` name the version it came from), or the ``chunk`` of a search result (there
    they are None; the result's ``channel`` and ``version`` apply)."""

    id: str
    title: str
    content: str
    scenario: Optional[str] = None
    tags: List[str] = field(default_factory=list)
    source: Optional[str] = None
    version: Optional[int] = None
    state_root: Optional[str] = None
    channel: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, obj: Any) -> "Chunk":
        obj = _object(obj, "chunk")
        return cls(
            id=str(obj["id"]),
            title=obj.get("title") or "",
            content=obj.get("content") or "",
            scenario=obj.get("scenario"),
            tags=_tags(obj.get("tags")),
            source=obj.get("source"),
            version=obj.get("version"),
            state_root=obj.get("state_root"),
            channel=obj.get("channel"),
            raw=obj,
        )


@dataclass
class SearchResult:
    """One ranked result of ``POST /v1/search``: the chunk's fields, flattened, and its
    scores. ``score`` is the daemon's ``fused_score`` (what ranked; in ``hybrid`` a weighted
    sum of z-scores, which can be negative). ``lexical_score`` (−BM25) and ``dense_score``
    (cosine) are None when the chunk was not in that list. ``channel`` and ``version`` name
    the knowledge base and version it came from: pass them to ``Cairn.get`` to read this
    chunk as found (a cairnd following several channels answers from all of them)."""

    id: str
    title: str
    content: str
    scenario: Optional[str]
    tags: List[str]
    source: Optional[str]
    score: Optional[float]
    lexical_score: Optional[float]
    dense_score: Optional[float]
    rank: Optional[int]
    channel: Optional[str] = None
    version: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def fused_score(self) -> Optional[float]:
        return self.score

    @property
    def chunk(self) -> Chunk:
        return Chunk.from_json(self.raw.get("chunk") or {"id": self.id})

    @classmethod
    def from_json(cls, obj: Any) -> "SearchResult":
        obj = _object(obj, "result")
        chunk = Chunk.from_json(obj["chunk"])
        return cls(
            id=chunk.id,
            title=chunk.title,
            content=chunk.content,
            scenario=chunk.scenario,
            tags=chunk.tags,
            source=chunk.source,
            score=obj.get("fused_score"),
            lexical_score=obj.get("lexical_score"),
            dense_score=obj.get("dense_score"),
            rank=obj.get("rank"),
            channel=obj.get("channel"),
            version=obj.get("version"),
            raw=obj,
        )


@dataclass
class SearchAnswer:
    """The answer of ``POST /v1/search``. Every result comes from the one version named by
    ``version`` / ``state_root``. ``online`` / ``stale`` / ``expired`` / ``expires`` are the
    daemon's flags at the time of the answer (None when unknown). ``mode`` is the mode that
    actually ranked; ``fusion`` and ``dense_available`` say how."""

    results: List[SearchResult]
    version: Optional[int]
    state_root: Optional[str]
    mode: Optional[str]
    online: Optional[bool]
    stale: Optional[bool]
    expired: Optional[bool]
    expires: Optional[str]
    fusion: Optional[str] = None
    dense_available: Optional[bool] = None
    timings: Dict[str, Any] = field(default_factory=dict)
    #: The filter values no chunk has (``scenario``/``scenarios``, ``tags``/``similar_tags``),
    #: None when every value names some chunk: an unknown scenario leaves only general chunks.
    unmatched_filter: Optional[Dict[str, Any]] = None
    #: Each channel searched, when several were (its ``channel``, ``version``, ``state_root``
    #: and flags); the answer's own ``version`` and ``state_root`` are then None.
    channels: Optional[List[Dict[str, Any]]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __iter__(self):
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index):
        return self.results[index]

    @classmethod
    def from_json(cls, obj: Any) -> "SearchAnswer":
        obj = _object(obj, "answer")
        results = obj["results"]
        if not isinstance(results, list):
            raise TypeError("results is not a list")
        return cls(
            results=[SearchResult.from_json(item) for item in results],
            version=obj.get("version"),
            state_root=obj.get("state_root"),
            mode=obj.get("mode"),
            online=obj.get("online"),
            stale=obj.get("stale"),
            expired=obj.get("expired"),
            expires=obj.get("expires"),
            fusion=obj.get("fusion"),
            dense_available=obj.get("dense_available"),
            timings=obj.get("timings") or {},
            unmatched_filter=obj.get("unmatched_filter"),
            channels=obj.get("channels"),
            raw=obj,
        )


@dataclass
class Status:
    """The answer of ``GET /v1/status``. Before the first install ``installed`` is False and
    the version fields are None. ``sync`` is the sync state (every field may be None),
    ``trust`` what the device trusts (None without a sync side)."""

    installed: bool
    version: Optional[int] = None
    state_root: Optional[str] = None
    channel: Optional[str] = None
    chunk_count: Optional[int] = None
    model_id: Optional[str] = None
    dimension: Optional[int] = None
    model_loaded: Optional[bool] = None
    lexical_only: Optional[bool] = None
    data_dir: Optional[str] = None
    data_dir_bytes: Optional[int] = None
    sync_available: Optional[bool] = None
    sync: Dict[str, Any] = field(default_factory=dict)
    trust: Optional[Dict[str, Any]] = None
    expired: Optional[bool] = None
    expires: Optional[str] = None
    #: When the publisher made the installed version (its manifest's ``created``).
    published: Optional[str] = None
    clock_floor: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def online(self) -> Optional[bool]:
        return self.sync.get("online")

    @property
    def stale(self) -> Optional[bool]:
        return self.sync.get("stale")

    @classmethod
    def from_json(cls, obj: Any) -> "Status":
        obj = _object(obj, "status")
        sync = obj.get("sync")
        trust = obj.get("trust")
        return cls(
            installed=bool(obj["installed"]),
            version=obj.get("version"),
            state_root=obj.get("state_root"),
            channel=obj.get("channel"),
            chunk_count=obj.get("chunk_count"),
            model_id=obj.get("model_id"),
            dimension=obj.get("dimension"),
            model_loaded=obj.get("model_loaded"),
            lexical_only=obj.get("lexical_only"),
            data_dir=obj.get("data_dir"),
            data_dir_bytes=obj.get("data_dir_bytes"),
            sync_available=obj.get("sync_available"),
            sync=_object(sync, "sync") if sync is not None else {},
            trust=_object(trust, "trust") if trust is not None else None,
            expired=obj.get("expired"),
            expires=obj.get("expires"),
            published=obj.get("published"),
            clock_floor=obj.get("clock_floor"),
            raw=obj,
        )
