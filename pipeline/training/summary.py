"""A run's metrics, for people: what `genni train`, `genni evaluate` and the
pipeline's evaluate step print."""

from __future__ import annotations

from genni.components import schema


def format_table(metrics: dict) -> str:
    names = [n for n in metrics if n != "MRR"] + ["MRR"]
    return "  " + "  ".join(f"{n} {metrics[n]:.2f}" for n in names)


def format_metrics(result: dict) -> str:
    from genni.pipeline.training import train

    if not result["valid"]:  # --no-validation: nothing was held out.
        return (
            f"Trained {result['epochs_run']} epochs with no validation "
            f"({result['seconds_per_epoch']:.1f} s per epoch): the last epoch's "
            "weights are the run's."
        )
    lines = [
        f"Best epoch {result['best_epoch']} of {result['epochs_run']} "
        f"({result['seconds_per_epoch']:.1f} s per epoch)",
        f"valid (%):\n{format_table(result['valid'])}",
        f"test (%):\n{format_table(result['test'])}",
    ]
    cases = result.get("cases")
    if cases:
        lines.append(
            "cases (scoreable: a target the vocabulary knows): "
            + ", ".join(
                f"{s} {cases[s]['scoreable']:,} scoreable of {cases[s]['cases']:,}"
                for s in (schema.VALID, schema.TEST)
            )
        )
    if not result.get("validation_signal", True):
        lines.append(
            f"Warning: {train.no_signal_message(result)}; {train.NOT_PUBLISHED}"
        )
    repeats = result.get("repeats", {}).get(schema.TEST)
    if repeats:
        lines.append(
            train.repeat_line(
                schema.TEST,
                repeats["users"],
                repeats["repeat_targets"],
                repeats["candidates"],
            )
        )
    by_target = result.get("test_by_target")
    if by_target:
        lines.append(format_by_target(schema.TEST, by_target))
    new = result.get("new_item_targets")
    if new:
        lines.append(
            f"test targets that are new items: {100 * new[schema.TEST]:.1f}% "
            "(unknown before the cutoff: each a miss)"
        )
    return "\n".join(lines)


def format_by_target(split: str, by_target: dict) -> str:
    """'test targets never trained on: 2,257 cases, HR@10 ...' for people
    (`Evaluator.by_target`)."""
    cold, warm = by_target.get("cold"), by_target.get("warm")
    among = by_target.get("cold_among_cold")
    line = (
        f"{split} targets never trained on: {cold['cases']:,} cases, HR@10 "
        f"{cold['HR@10']:.2f} NDCG@10 {cold['NDCG@10']:.2f} over every item"
    )
    if among:
        line += (
            f", HR@10 {among['HR@10']:.2f} NDCG@10 {among['NDCG@10']:.2f} among the "
            f"{by_target['cold_items']:,} items never trained on"
        )
    content = by_target.get("content_baseline")
    if content:
        line += (
            f" (the content baseline among them: HR@10 {content['HR@10']:.2f} "
            f"NDCG@10 {content['NDCG@10']:.2f}"
        )
        every = content.get("every_item")  # Runs before it lack it.
        line += (
            f"; over every item: HR@10 {every['HR@10']:.2f} NDCG@10 "
            f"{every['NDCG@10']:.2f})"
            if every
            else ")"
        )
    if warm:
        line += (
            f"; the other {warm['cases']:,}: HR@10 {warm['HR@10']:.2f} NDCG@10 "
            f"{warm['NDCG@10']:.2f}"
        )
    return line
