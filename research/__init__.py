"""The paper-reproduction tooling: the report (`python -m research.report`,
`make report`), the compact record of finished runs, the paper's numbers, the
exact-law check of GenNi's draws (`law`) and the side-by-side step timings it
cites. It lives in the clone, not in the installed `genni` package.
"""

import os

# TensorFlow Recommenders needs Keras 2, before TensorFlow is first imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")  # As the `genni` command.
