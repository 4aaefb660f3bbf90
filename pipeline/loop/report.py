"""The replay's report: `replay.json` (the rows), `replay.md` (a table per
step and the summary lines) and, with matplotlib, `replay.png`."""

from __future__ import annotations

import json
import os

# The replay's variants, in the order its rows and report show them.
VARIANTS = ("warm", "scratch", "never", "popular")


def write_report(rows, output, log_path, every_days, steps) -> None:
    """replay.md, replay.json and, with matplotlib, replay.png."""
    with open(os.path.join(output, "replay.json"), "w") as f:
        json.dump(rows, f, indent=2)
    shown = [v for v in VARIANTS if any(r[v] for r in rows)]
    loops = [v for v in ("warm", "scratch") if v in shown]
    head = (
        "| step | cases | items | k-core removed: catalog / test targets | "
        "targets unknown to the served model: never met / met before the cut | "
        + " | ".join(f"{v} NDCG@10" for v in shown)
        + "".join(f" | {v} new targets: cases, HR@10" for v in loops)
        + "".join(
            f" | {v} serves | {v} epochs trained (chosen) | {v} train s | "
            f"{v} pipeline s"
            for v in loops
        )
        + " | warm export |"
    )
    lines = [
        f"# Replay of {os.path.basename(log_path)}: {steps} steps, every "
        f"{every_days:g} days",
        "",
        "Each step's served version scored on the next period's events (%); "
        "**bold**: a served model below the popularity ranking.",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]

    def ndcg(r, v):
        value = f"{r[v].get('NDCG@10', float('nan')):.2f}"
        return f"**{value}**" if r.get(f"{v}_below_popular") else value

    for r in rows:
        gone, kcore = r.get("unservable") or {}, r.get("kcore") or {}
        lines.append(
            f"| {r['step']} | {r['cases']:,} | {r.get('items', 0):,} | "
            + (
                f"{100 * kcore['catalog']:.1f}% / {100 * kcore.get('test', 0):.1f}%"
                if "catalog" in kcore
                else ""
            )
            + " | "
            + (f"{100 * gone['new']:.1f}% / {100 * gone['met']:.1f}%" if gone else "")
            + " | "
            + " | ".join(ndcg(r, v) for v in shown)
            + "".join(f" | {new_targets_cell(r[v])}" for v in loops)
            + "".join(
                f" | {r.get(f'{v}_served', '')}"
                f" | {epochs_cell(r.get(f'{v}_epochs'), r.get(f'{v}_reused'))}"
                f" | {r.get(f'{v}_train_seconds', float('nan')):.0f}"
                f" | {r.get(f'{v}_seconds', float('nan')):.0f}"
                for v in loops
            )
            + f" | {r.get('warm_export', '')} |"
        )
    means = {v: sum(r[v].get("NDCG@10", 0.0) for r in rows) / len(rows) for v in shown}
    lines += [
        "",
        "Steps whose served model was below the popularity ranking: "
        + ", ".join(
            f"{v} {sum(bool(r.get(f'{v}_below_popular')) for r in rows)} of {len(rows)}"
            for v in loops
        )
        + ".",
    ]
    refusals = [
        f"- step {r['step']}: {r['warm_why']}"
        for r in rows
        if r.get("warm_export") not in (None, "published")
    ]
    if refusals:
        lines += ["", "Candidates of the warm loop refused:", "", *refusals]
    shared = [
        f"- step {r['step']}: the {v} loop's run is the {r[f'{v}_reused']} loop's "
        "(the same data, settings and seed), trained once"
        for r in rows
        for v in loops
        if r.get(f"{v}_reused")
    ]
    if shared:
        lines += ["", "Runs trained once for two loops:", "", *shared]
    for v in loops:  # The cases no trained ID row answers, over the steps.
        steps_new = [r[v]["new_targets"] for r in rows if r[v].get("new_targets")]
        cases = sum(t["cases"] for t in steps_new)
        if cases:
            hits = sum(t["cases"] * t["HR@10"] for t in steps_new if t["cases"])
            lines += [
                "",
                f"{v}: {cases:,} cases whose target had no trained ID row in the "
                f"served version, HR@10 {hits / cases:.2f} over them.",
            ]
    arrived = sum(r.get("new_items", 0) for r in rows)
    later = rows[1:]  # Step 1: the same run for both loops (nothing serves).
    spent = {
        v: sum(r.get(f"{v}_train_seconds", 0.0) for r in later)
        for v in ("warm", "scratch")
    }
    lines += [
        "",
        "Mean NDCG@10: "
        + ", ".join(f"{v} {m:.2f}" for v, m in means.items())
        + (
            f" (warm / scratch: {means['warm'] / means['scratch']:.3f})"
            if means.get("scratch") and means.get("warm")
            else ""
        )
        + (
            f" (warm / popular: {means['warm'] / means['popular']:.3f})"
            if means.get("warm") and means.get("popular")
            else ""
        ),
        "",
        f"Training seconds after step 1: warm {spent['warm']:.0f}, scratch "
        f"{spent['scratch']:.0f}"
        + (
            f" (warm / scratch: {spent['warm'] / spent['scratch']:.3f})."
            if spent["scratch"]
            else "."
        ),
        "",
        f"Items that entered the loop's vocabulary after the first step: {arrived}; "
        "in a served top-10 of the loop from the step that first knew them: "
        f"{rows[-1].get('new_items_reached', 0)}.",
    ]
    serving = rows[-1].get("serve")
    if serving:
        by_api = serving["by_api"]
        lines += [
            "",
            f"`--serve`: {serving['requests']:,} requests to `genni serve` on the "
            f"loop's models (REST {by_api['rest']['requests']:,}, gRPC "
            f"{by_api['grpc']['requests']:,}), {serving['failures']:,} failed; "
            "versions that answered, in order: "
            + ", ".join(str(v) for v in serving["versions"])
            + ".",
        ]
        lines += [f"- {error}" for error in serving["errors"]]
    with open(os.path.join(output, "replay.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    steps = [r["step"] for r in rows]
    figure, (ndcg, seconds, catalog) = plt.subplots(
        3, 1, figsize=(6.5, 8), sharex=True, height_ratios=(2, 1, 1)
    )
    for v in shown:
        ndcg.plot(steps, [r[v].get("NDCG@10") for r in rows], marker="o", label=v)
    refused = [r for r in rows if r.get("warm_export", "published") != "published"]
    if refused:  # The loop kept the version it served.
        ndcg.scatter(
            [r["step"] for r in refused],
            [r["warm"].get("NDCG@10") for r in refused],
            s=120,
            facecolors="none",
            edgecolors="black",
            label="warm: candidate refused",
        )
    ndcg.set_ylabel("NDCG@10, next period (%)")
    ndcg.legend(fontsize="small")
    for v in loops:
        seconds.plot(
            steps, [r.get(f"{v}_train_seconds") for r in rows], marker="o", label=v
        )
    seconds.set_ylabel("training seconds")
    seconds.legend(fontsize="small")
    catalog.plot(steps, [r.get("items", 0) for r in rows], marker="o", color="gray")
    catalog.set_ylabel("items")
    share = catalog.twinx()
    share.bar(
        steps,
        [100 * (r.get("new_item_share") or 0.0) for r in rows],
        alpha=0.3,
        color="tab:red",
    )
    share.set_ylabel("new-item test targets (%)", color="tab:red")
    catalog.set_xlabel("step")
    catalog.set_xticks(steps)
    figure.tight_layout()
    figure.savefig(os.path.join(output, "replay.png"), dpi=120)
    plt.close(figure)


def new_targets_cell(scores: dict) -> str:
    """'29, 3.45': a loop's cases whose target has no trained ID row in its
    served version, and their HR@10; '0' without such cases."""
    new = scores.get("new_targets")
    if not new:
        return ""
    if not new["cases"]:
        return "0"
    return f"{new['cases']:,}, {new['HR@10']:.2f}"


def epochs_cell(epochs: dict | None, reused: str | None = None) -> str:
    """'200 (7) + refit 7': the epochs a loop trained at a step, its chosen
    epoch, and its refit's epochs; 'reused (7)' for a run an earlier step
    trained; "warm's run (7)" for the run another loop (`reused`) trained
    at this step."""
    if not epochs:
        return ""
    met = f"{reused}'s" if reused else "reused"
    trained = epochs["trained"] or (f"{met} run" if reused else met)
    cell = f"{trained} ({epochs['chosen']})"
    if epochs.get("refit") is not None:
        cell += f" + refit {epochs['refit'] or met}"
    return cell
