"""Printing streamed events as they arrive (the `retrieve` command and the demo)."""

from __future__ import annotations

from sounding.cli.common import console


def print_retrieve(
    client,
    collection: str,
    query: str,
    top_k: int,
    arms: list[str],
    expansion=None,
    learned_ranking=True,
    fusion: str | None = None,
):
    """Prints every event; returns the Final one."""
    from sounding_client import Expansion, Final, Fused, Plan, StrategyResult

    final = None
    events = client.retrieve(
        collection,
        query,
        top_k=top_k,
        arms=arms,
        expansion=expansion,
        learned_ranking=learned_ranking,
        fusion=fusion,
    )
    for event in events:
        if isinstance(event, Plan):
            planned = ", ".join(
                f"{a.arm} ({a.reason}, score {a.score:.2f})"
                if a.chosen
                else f"[dim]{a.arm} ({a.reason})[/dim]"
                for a in event.arms
            )
            adapter = f", query adapter v{event.query_adapter_version}" if event.query_adapter_version else ""
            fusion = f", {event.fusion} fusion" if event.fusion else ""
            console.print(f"[bold]plan[/bold] {event.retrieval_id}{adapter}{fusion}: {planned}")
        elif isinstance(event, StrategyResult):
            top = ", ".join(h.document_id for h in event.hits[:top_k])
            console.print(f"[bold]{event.arm}[/bold] {event.latency_ms:.1f} ms: {top}")
            if event.generated_text:
                console.print(f"     generated: {event.generated_text[:200]!r}", style="dim", highlight=False)
        elif isinstance(event, Fused):
            console.print(f"[bold]fused[/bold] {', '.join(h.document_id for h in event.hits)}")
        elif isinstance(event, Expansion):
            console.print(
                f"[bold]expansion[/bold] #{event.iteration} {event.strategy} ({event.gap}): "
                f"{event.queries} -> {event.new_hits} new, recall {event.estimated_recall.value:.2f} "
                f"({event.estimated_recall.kind})",
                highlight=False,
            )
        elif isinstance(event, Final):
            console.print(f"[bold]final[/bold] {event.latency_ms:.1f} ms")
            for rank, hit in enumerate(event.hits, start=1):
                found = ", ".join(f"{c.arm}#{c.rank}" for c in hit.contributions)
                console.print(
                    f"  {rank}. [cyan]{hit.document_id}[/cyan] {hit.score:.4f} ({found}) {hit.title}"
                )
                console.print(f"     {hit.text[:160]}…", style="dim", highlight=False)
            u = event.uncertainty
            console.print(
                f"  corpus coverage: {u.corpus_coverage.value} ({u.corpus_coverage.kind}: "
                f"{u.corpus_coverage.reason})\n"
                f"  miss rate: {u.miss_rate.value:.2f} ({u.miss_rate.kind}: {u.miss_rate.formula})\n"
                f"  estimated recall: {u.estimated_recall.kind} ({u.estimated_recall.reason})\n"
                f"  query difficulty: {u.query_difficulty.value:.2f} ({u.query_difficulty.formula})"
            )
            for gap in u.semantic_gaps:
                console.print(
                    f"  gap {gap.kind} (severity {gap.severity:.2f}, mitigation {gap.mitigation}): "
                    f"{gap.description}",
                    highlight=False,
                )
            final = event
    return final


def print_calibration(events) -> None:
    from sounding_client import CalibrationReport, SoundingError

    try:
        for event in events:
            if isinstance(event, CalibrationReport):
                console.print(
                    f"[bold]calibrate[/bold] {event.target} v{event.version}, {event.sample_size} "
                    f"outcomes: {event.summary}",
                    highlight=False,
                )
            else:
                console.print(f"[bold]calibrate[/bold] {event.stage}", style="dim")
    except SoundingError as error:
        console.print(f"[bold]calibrate[/bold] refused: {error.code.name}: {error.message}")
