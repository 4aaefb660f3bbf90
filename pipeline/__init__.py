"""GenNi pipeline: what runs (preprocessing, training, export, serving, CLI).

TFRS and this project need Keras 2 (tf-keras). The switch must be set before
TensorFlow is first imported, so every package of the project sets it here.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# TensorFlow's pooling (BFC) allocator on the CPU too: with plain malloc each
# training step maps and unmaps GenNi's large score blocks afresh, and the page
# faults cost more than the math on small VMs (one Toys epoch, packed, beside
# another run on 2 CPUs: 49 s with 26 s of it in the kernel, against 31 s with
# 2 s). Set TF_CPU_ALLOCATOR_USE_BFC=false to go back to malloc.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")
