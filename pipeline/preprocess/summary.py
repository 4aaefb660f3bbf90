"""A preprocessed dataset's statistics (`stats.json`), for people: what
`genni preprocess`, `genni stats` and the pipeline's preprocess step print."""

from __future__ import annotations

from genni.components import schema


def format_stats(stats: dict) -> str:
    """The dataset table and what each filter removed, for people."""
    kcore = stats["kcore"]
    rows = [
        ("format", stats["format"]),
        ("lines read", f"{stats['lines_read']:,}"),
        ("malformed lines (dead letter)", f"{stats['malformed_lines']:,}"),
        ("events dropped by rating", f"{stats['dropped_by_rating']:,}"),
        ("duplicate events dropped", f"{stats['duplicate_events']:,}"),
        (
            f"{stats['min_count']}-core removed",
            f"{kcore['users_removed']:,} users, {kcore['items_removed']:,} items"
            + (
                f" ({100 * kcore['items_removed'] / kcore['items_before']:.1f}% of "
                "the catalog)"
                if kcore.get("items_before")
                else ""
            )
            + f", {kcore['events_removed']:,} events in {kcore['rounds']} rounds",
        ),
        ("users", f"{stats['users']:,}"),
        ("items", f"{stats['items']:,}"),
        ("events", f"{stats['events']:,}"),
        ("avg length", f"{stats['avg_length']:.2f}"),
        ("sparsity", f"{100 * stats['sparsity']:.2f}%"),
        (
            "examples train/valid/test",
            "/".join(f"{stats['examples'][s]:,}" for s in schema.SPLITS),
        ),
    ]
    split = stats.get("time_split")
    if split:
        rows += [
            (
                "split by time",
                f"validation from {split['valid_cutoff']} ({split['valid_days']:g} "
                f"days), test from {split['test_cutoff']} ({split['test_days']:g} "
                "days); training: the events before the validation cutoff",
            ),
            (
                "scoreable cases",
                f"valid {split.get('valid_scoreable_cases', 0):,}, test "
                f"{split.get('test_scoreable_cases', 0):,} (a target the vocabulary "
                "knows)"
                + (
                    f"; at least {split['min_cases']:,} asked"
                    if split.get("min_cases")
                    else ""
                )
                + (
                    f"; windows widened from {split['asked_days']['valid']:g} + "
                    f"{split['asked_days']['test']:g} days"
                    if split.get("asked_days")
                    else ""
                ),
            ),
            (
                "targets that are new items",
                f"valid {split['valid_new_item_targets']:,} of "
                f"{split['valid_cases']:,} ({100 * split['valid_new_item_share']:.1f}%)"
                f", test {split['test_new_item_targets']:,} of "
                f"{split['test_cases']:,} ({100 * split['test_new_item_share']:.1f}%)"
                "; each a miss"
                + (
                    f"; of them removed by the {stats['min_count']}-core: valid "
                    f"{split['valid_kcore_removed_targets']:,}, test "
                    f"{split['test_kcore_removed_targets']:,}"
                    if "test_kcore_removed_targets" in split
                    else ""
                ),
            ),
        ]
    repeats = stats.get("repeats")
    if repeats:
        rows.append(
            (
                "repeated items",
                f"{100 * repeats['event_share']:.1f}% of events; targets that "
                f"repeat an earlier item: valid {repeats['valid_targets']:,} "
                f"({100 * repeats['valid_share']:.1f}%), test "
                f"{repeats['test_targets']:,} ({100 * repeats['test_share']:.1f}%)",
            )
        )
    hold_out = stats.get("hold_out")
    if hold_out:
        rows.append(
            (
                "items held out",
                f"{hold_out['items']:,} ({100 * hold_out['share']:g}%, seed "
                f"{hold_out['seed']}): no training or validation example holds "
                f"them; {hold_out['test_targets']:,} test targets",
            )
        )
    attributes = stats.get("item_attributes")
    if attributes:
        rows.append(
            (
                "item attributes",
                f"{attributes['attributes']:,} attributes, "
                f"{attributes['items_with_attributes']:,} items with some, "
                f"{attributes['items_without_attributes']:,} without, "
                f"{attributes.get('malformed_metadata_lines', 0):,} unreadable "
                "metadata lines",
            )
        )
        if "catalog_items" in attributes:
            read_as = attributes.get("catalog_layout", "")
            if attributes.get("catalog_encoding", "utf-8") != "utf-8":
                read_as += f", {attributes['catalog_encoding']} (not UTF-8)"
            rows.append(
                (
                    "items file",
                    (f"read as {read_as}; " if read_as else "")
                    + f"{attributes['catalog_items']:,} items listed: "
                    f"{attributes['catalog_items_without_events']:,} of them "
                    "without a kept event (no events, or cut by the k-core), in "
                    "the vocabulary after the log's items; "
                    f"{attributes['items_not_in_catalog']:,} items of the log "
                    "not listed",
                )
            )
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"  {name:<{width}}  {value}" for name, value in rows)
