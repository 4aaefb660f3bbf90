"""GenNi models: how the recommender works (SASRec encoder, TFRS retrieval model).

The training stack arrives with the training issue; this package already owns the
Keras 2 switch so that importing it first is always safe.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
