"""GenNi: sequential recommendation trained with model-generated negatives.

One import name for the three folders of the repository (setup.py maps them):

- `genni.components`: layers and functions with no knowledge of runs (negative
  samplers, losses, metrics, schedules) and the data contract models need
  (feature schema, packing).
- `genni.models`: SASRec, the TFRS retrieval model, S3-Rec.
- `genni.pipeline`: what runs: `preprocess` (Beam), `training`, `serving`,
  `loop` (the pipeline and its replay) and `cli` (the `genni` command).

The paper-reproduction tooling (`research/`) stays in the clone.

TFRS needs Keras 2 (tf-keras); the switch must be set before TensorFlow is first
imported, so it is set here, once, unless the caller chose otherwise.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

__version__ = "0.1.0"
