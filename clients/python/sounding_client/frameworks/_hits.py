"""What the framework retrievers share: a hit's metadata and the outcome report built from the
documents an agent used."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from sounding_client import types as t
from sounding_client.client import Client

Item = TypeVar("Item")

# Metadata keys every document a framework retriever returns carries.
RETRIEVAL_ID = "sounding_retrieval_id"
DOCUMENT_ID = "sounding_document_id"


def hit_metadata(final: t.Final, hit: t.Hit) -> dict[str, Any]:
    """The hit's own metadata, its ids, title and score, how each arm ranked it, and the
    retrieval's stated uncertainty (None where the service states none)."""
    uncertainty = final.uncertainty
    return {
        **hit.metadata,
        RETRIEVAL_ID: final.retrieval_id,
        DOCUMENT_ID: hit.document_id,
        "sounding_chunk_id": hit.chunk_id,
        "sounding_title": hit.title,
        "sounding_score": hit.score,
        "sounding_arm_ranks": {c.arm: c.rank for c in hit.contributions},
        "sounding_confidence": final.confidence.value,
        "sounding_miss_rate": uncertainty.miss_rate.value,
        "sounding_coverage_estimate": uncertainty.coverage_estimate.value,
        "sounding_estimated_recall": uncertainty.estimated_recall.value,
        "sounding_semantic_gaps": [gap.description for gap in uncertainty.semantic_gaps],
    }


def outcome(
    used: Iterable[Mapping[str, Any]],
    retrieval_id: str | None,
    missed_document_ids: Iterable[str],
    success: bool | None,
    feedback: str,
    found_missing_content: bool,
) -> t.RetrievalOutcome:
    """The outcome of one retrieval from the metadata of the documents the agent used (all from
    that retrieval); `retrieval_id` names it when none was used."""
    used = list(used)
    ids: set[str] = {retrieval_id} if retrieval_id else set()
    for metadata in used:
        if not isinstance(found := metadata.get(RETRIEVAL_ID), str) or DOCUMENT_ID not in metadata:
            raise ValueError("a used document does not come from a Sounding retriever (no retrieval id)")
        ids.add(found)
    if not ids:
        raise ValueError("an outcome reports one retrieval: pass retrieval_id when no document was used")
    if len(ids) > 1:
        raise ValueError(f"an outcome reports one retrieval, not {len(ids)}: {sorted(ids)}")
    return t.RetrievalOutcome(
        retrieval_id=ids.pop(),
        used_document_ids=tuple(dict.fromkeys(m[DOCUMENT_ID] for m in used)),
        feedback=feedback,
        agent_success=success,
        found_missing_content=found_missing_content,
        missed_document_ids=tuple(missed_document_ids),
    )


class ReportsOutcomes(Generic[Item]):
    """`report_outcome` for a retriever whose items (documents, nodes) carry `hit_metadata`."""

    def _sounding_client(self) -> Client:
        raise NotImplementedError

    def _metadata_of(self, item: Item) -> Mapping[str, Any]:
        raise NotImplementedError

    def report_outcome(
        self,
        used: Sequence[Item],
        *,
        retrieval_id: str | None = None,
        success: bool | None = None,
        missed_document_ids: Iterable[str] = (),
        feedback: str = "",
        found_missing_content: bool = False,
    ) -> t.ObserveResult:
        """Report through Observe which of a retrieval's results the agent used (and what it found
        missing), so the collection learns; `retrieval_id` (a result's `sounding_retrieval_id`)
        names the retrieval when none was used."""
        reported = outcome(
            (self._metadata_of(item) for item in used),
            retrieval_id,
            missed_document_ids,
            success,
            feedback,
            found_missing_content,
        )
        return self._sounding_client().observe([reported])
