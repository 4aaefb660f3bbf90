"""The paper's numbers, as data: the only copy in the project.

Test metrics (%, full ranking) from ../shared/docs/GENNI.md, by dataset and
variant (the variant names of `benchmarks/reproduce.py`; `uniform`,
`popularity` and `genni` are also the rows of the report's main table). The
beta rows come from the paper's fixed vs growing beta table, which gives HR@5
and NDCG@5 only. Also the efficiency table's seconds per epoch and the HR@5
of the BPR study.
"""

from __future__ import annotations

METRICS = ("HR@5", "HR@10", "NDCG@5", "NDCG@10")

PAPER: dict[str, dict[str, dict[str, float]]] = {
    "beauty": {
        "uniform": {"HR@5": 3.84, "HR@10": 6.07, "NDCG@5": 2.49, "NDCG@10": 3.21},
        "popularity": {"HR@5": 4.08, "HR@10": 6.18, "NDCG@5": 2.69, "NDCG@10": 3.37},
        "genni": {"HR@5": 6.30, "HR@10": 8.79, "NDCG@5": 4.48, "NDCG@10": 5.33},
        "genni_beta0.1": {"HR@5": 6.09, "NDCG@5": 4.33},
        "genni_growing_m20": {"HR@5": 6.35, "NDCG@5": 4.53},
        "s3rec": {"HR@5": 3.85, "HR@10": 6.35, "NDCG@5": 2.40, "NDCG@10": 3.20},
        "s3rec_genni": {"HR@5": 6.47, "HR@10": 9.45, "NDCG@5": 4.64, "NDCG@10": 5.39},
    },
    "toys": {
        "uniform": {"HR@5": 4.68, "HR@10": 6.81, "NDCG@5": 3.18, "NDCG@10": 3.87},
        "genni": {"HR@5": 7.18, "HR@10": 9.96, "NDCG@5": 5.15, "NDCG@10": 5.90},
        "genni_beta0.1": {"HR@5": 6.50, "NDCG@5": 4.72},
        "genni_growing_m20": {"HR@5": 7.16, "NDCG@5": 5.07},
        "s3rec_genni": {"HR@5": 6.96, "HR@10": 9.50, "NDCG@5": 4.89, "NDCG@10": 5.86},
    },
}

# Seconds per epoch of the efficiency table (Beauty, one V100 GPU).
EFFICIENCY = {
    "dataset": "Beauty",
    "device": "V100",
    "seconds_per_epoch": {
        "uniform": 2.44,
        "genni beta 1": 6.30,
        "genni beta 0.1": 2.47,
    },
}

# HR@5 of the BPR study (Beauty) with 1 and with 8 negatives; GenNi at alpha 2.2.
BPR = {"uniform": (2.32, 2.07), "genni": (5.64, 6.08)}
BPR_ALPHA = 2.2


def four_metrics(dataset: str | None) -> dict[str, dict[str, float]]:
    """The variants of `dataset` with all four test metrics, in the paper's order."""
    rows = PAPER.get(dataset or "", {})
    return {v: m for v, m in rows.items() if all(name in m for name in METRICS)}


def efficiency_line() -> str:
    """The paper's efficiency numbers in one line of text."""
    s = EFFICIENCY["seconds_per_epoch"]
    return (
        f"{EFFICIENCY['dataset']}, {EFFICIENCY['device']}: SASRec "
        f"{s['uniform']:.2f} s/epoch, GenNi beta 1 {s['genni beta 1']:.2f}, "
        f"beta 0.1 {s['genni beta 0.1']:.2f}"
    )
