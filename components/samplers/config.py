"""`SamplerConfig`: every setting of the negative samplers, each declared once.

A sampler setting is one field here (its default, `--help` line and check),
the sampler code that reads it, and a test: `genni train`'s flag, the run's
`config.json` and its run key follow from the field
(`genni.components.settings`).
"""

from __future__ import annotations

import dataclasses

from genni.components.samplers import budget
from genni.components.samplers.budget import (
    DEFAULT_CLUSTER_REFRESH,
    DEFAULT_CLUSTER_SAMPLES,
    DEFAULT_MAX_LOGITS,
)
from genni.components.settings import (
    NON_NEGATIVE,
    POSITIVE,
    Settings,
    at_least,
    setting,
    within,
)


def _sampler_names() -> tuple[str, ...]:
    from genni.components.samplers import registry

    return registry.names()


@dataclasses.dataclass(frozen=True)
class SamplerConfig(Settings):
    """Settings of the negative sampler of a run (defaults: the paper's GenNi).

    Each sampler reads the settings it has; `validate` refuses GenNi's knobs
    for a sampler whose negatives the model does not generate.
    """

    KIND = "sampler settings"

    name: str = setting(
        "genni", "Negative sampler.", key="sampler", choices=_sampler_names
    )
    num_negatives: int = setting(
        1,
        "k negatives per position, at most the catalog's items - 1.",
        check=at_least(1),
    )
    alpha: float = setting(2.5, "GenNi sharpness, 0 = uniform.", check=NON_NEGATIVE)
    beta: float = setting(
        1.0,
        "Fraction of items GenNi scores.",
        check=within(0.0, 1.0, low_open=True, high_open=False),
        exclusive="beta",
    )
    beta_growth: float | None = setting(
        None,
        "Growing beta = min(0.001 * 10^(epoch / M), 1).",
        check=POSITIVE,
        flag="--beta-schedule",
        metavar="M",
        exclusive="beta",
    )
    beta_group: int | None = setting(
        None,
        "Draw GenNi's candidates (its beta fraction, or --max-candidates) afresh "
        "for every G positions (50: about one subset per user, 1: one per "
        "position) instead of once per batch, so that a batch's negatives do "
        "not all come from the same few items. On a large catalog (M at most "
        "1/32 of it) G 1 draws each position's own M ids at once.",
        check=POSITIVE,
        metavar="G",
    )
    alpha_step: float | None = setting(
        None,
        "Let alpha follow the batch loss by STEP per batch.",
        check=POSITIVE,
        flag="--self-adjust-alpha",
        metavar="STEP",
    )
    gamma: float = setting(1.0, "Popularity exponent.")
    exclude_seen: bool = setting(
        False, "Never draw the user's own items as negatives (any sampler)."
    )
    max_logits: int = setting(
        DEFAULT_MAX_LOGITS,
        "Most scores GenNi holds at once (its memory bound).",
        check=POSITIVE,
        flag=None,
    )
    max_candidates: int | None = setting(
        None,
        "Most items one GenNi draw scores: beta's share of a larger catalog is "
        "cut to M items (a uniform subset, as beta's), so a draw costs the same "
        "at 10^6 items as at M.",
        check=POSITIVE,
        metavar="M",
        off=0,
    )
    draw_budget: int | None = setting(
        None,
        "Most scores a training step's GenNi draws compute, positions x "
        "candidates: on long histories M is cut to the largest power of two "
        "within S / (the mean positions of a batch), so a step's draw costs "
        "about the same whatever the histories' length.",
        check=POSITIVE,
        metavar="S",
        off=0,
    )
    clusters: int | None = setting(
        None,
        "GenNi's two-level draw: cluster the items into C groups (k-means on "
        "their embeddings, refreshed every --cluster-refresh steps), draw "
        "--cluster-samples candidates a position from the clusters' masses "
        "under its query, and resample its negatives from them by their exact "
        "scores. A position then scores C + R items whatever the catalog "
        "(--beta and --max-candidates do not apply).",
        check=at_least(2),
        metavar="C",
        off=0,
    )
    cluster_samples: int = setting(
        DEFAULT_CLUSTER_SAMPLES,
        "Candidates a position's two-level draw resamples from; its law tends "
        "to the exact one as R grows.",
        check=at_least(1),
        metavar="R",
    )
    cluster_refresh: int = setting(
        DEFAULT_CLUSTER_REFRESH,
        "Training steps between k-means refreshes of the two-level draw's clusters.",
        check=at_least(1),
        metavar="STEPS",
    )
    successors: int | None = setting(
        None,
        "Beside a capped GenNi draw's uniform candidates (--max-candidates "
        "below the catalog), each position also scores its input item and the "
        "S items that most often followed it in the training data, where a "
        "trained model's mass sits; the uniform ones are weighted up by the "
        "catalog over M, so the draw still estimates GenNi's exact law. 1 + S "
        "more scores a position; nothing changes where every item is scored.",
        check=POSITIVE,
        metavar="S",
        off=0,
    )

    # GenNi's own knobs: they need a sampler whose negatives the model makes.
    GENERATED_ONLY = (
        "alpha_step",
        "beta_growth",
        "beta_group",
        "clusters",
        "successors",
    )

    def validate(self) -> None:
        from genni.components.samplers import registry

        if self.clusters is not None and self.successors is not None:
            raise ValueError(
                "--clusters and --successors are two different GenNi draws: choose one."
            )
        generated = registry.model_generated()
        if self.name not in generated and any(
            getattr(self, name) for name in self.GENERATED_ONLY
        ):
            raise ValueError(
                "--self-adjust-alpha, --beta-schedule, --beta-group, "
                f"--clusters and --successors need --sampler {' or '.join(generated)}."
            )

    @property
    def model_generated(self) -> bool:
        """Whether the model's own scores make the negatives (GenNi's)."""
        from genni.components.samplers import registry

        return registry.get(self.name).model_generated

    def draw_candidates(
        self, num_items: int | None = None, positions: float | None = None
    ) -> int | None:
        """Most items one GenNi draw scores: `max_candidates`, cut by
        `draw_budget` to fit a step of `positions` positions over `num_items`
        items (`budget.budget_candidates`); None scores beta's whole share."""
        if self.draw_budget is None or num_items is None or positions is None:
            return self.max_candidates
        return budget.budget_candidates(
            self.draw_budget,
            positions,
            num_items,
            cap=self.max_candidates,
            minimum=min(self.num_negatives + 1, num_items),
        )

    def for_catalog(
        self,
        num_items: int | None = None,
        positions: float | None = None,
        epoch: int = 0,
    ) -> SamplerConfig:
        """The sampler a run builds on a catalog of `num_items` whose steps
        hold `positions` positions, at `epoch` (0-based): beta as its schedule
        has it then, k at most num_items - 1 (64 negatives on 40 items draw
        39), `draw_budget` resolved into `max_candidates`, at most `num_items`
        clusters."""
        from genni.components.schedules import beta_for_epoch

        k = self.num_negatives
        clusters = self.clusters
        if num_items is not None:
            k = max(1, min(k, num_items - 1))
            if clusters is not None:
                clusters = min(clusters, num_items)
        return dataclasses.replace(
            self,
            num_negatives=k,
            beta=beta_for_epoch(epoch, self.beta, self.beta_growth),
            beta_growth=None,
            max_candidates=self.draw_candidates(num_items, positions),
            draw_budget=None,
            clusters=clusters,
        )

    def scored_candidates(self, num_items: int, positions: float | None = None) -> int:
        """The items a GenNi draw of these settings scores at its first epoch
        on `num_items` items and steps of `positions` positions."""
        resolved = self.for_catalog(num_items, positions)
        return budget.scored_candidates(
            num_items, resolved.beta, resolved.max_candidates, resolved.num_negatives
        )
