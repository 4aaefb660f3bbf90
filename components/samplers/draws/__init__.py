"""GenNi's draw modes, one module each, over one shared pick (`pick`).

`GenNiSampler` (`genni.components.samplers.genni`) owns the settings and the
state; a draw goes through one of these:

- `exact`: every item is a candidate (beta 1, no cap below the catalog);
- `capped`: a uniform subset V' of the catalog (beta's share, at most
  `max_candidates`), one per batch or one per group of positions;
- `per_row`: each position its own V' (`beta_group` 1 on a large catalog);
- `successors`: each position's input item and its most frequent successors,
  beside a capped or per-row V';
- `two_level`: the item clusters' proposal, resampled by exact scores.

`chunks` runs the first four over the batch a chunk of positions at a time;
`pick` turns a chunk's scores into its k negatives and their log Q. Core ops
only: the draws run in `tf.function`, under XLA, on CPU and GPU.
"""
