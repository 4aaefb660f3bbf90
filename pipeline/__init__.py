"""GenNi pipeline: what runs (preprocessing, training, export, serving, CLI).

TFRS and this project need Keras 2 (tf-keras). The switch must be set before
TensorFlow is first imported, so every package of the project sets it here.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
