"""GenNi: sequential recommendation trained with model-generated negatives."""

from pathlib import Path

from setuptools import find_packages, setup

# The design card keeps `pipeline/`, `models/` and `components/` at the root of
# the repository; they install under one import name, `genni`, so that nothing
# generic lands in site-packages and pip, Docker and Beam's `--setup_file` ship
# one package.
FOLDERS = ("pipeline", "models", "components")
PACKAGES = [
    package
    for folder in FOLDERS
    for package in find_packages(include=[folder, folder + ".*"])
]

# The stack is pinned by the design card; Beam workers (Dataflow, Flink) install
# the same set through `--setup_file ./setup.py`.
INSTALL_REQUIRES = [
    "tensorflow==2.21.0",
    "tf-keras==2.21.0",
    "tensorflow-recommenders==0.7.7",
    "keras-tuner==1.4.8",
    "apache-beam[tfrecord]==2.77.0",
    "google-crc32c>=1.5",
    "tensorflow-serving-api==2.21.0",
    "tensorboard==2.21.0",
    "numpy>=1.26",
    "tqdm>=4.66",
    "matplotlib>=3.9,<4",  # `genni replay`'s plot (and the research report's).
    "pydantic>=2.7,<3",  # Settings are converted by their declared type.
]

EXTRAS_REQUIRE = {
    # pytest-xdist: `make test` runs the suite's files on every core.
    # hypothesis: property tests of the log readers and the settings.
    "dev": ["pytest>=8", "pytest-xdist>=3.5", "ruff>=0.6", "hypothesis>=6.100"],
    # Approximate top-K for large catalogs (`genni ann-index`, `serve --ann`).
    "ann": ["faiss-cpu==1.15.1"],
    # Runners beyond the DirectRunner.
    "gcp": ["apache-beam[gcp]==2.77.0"],
    # The same TensorFlow with CUDA 12 and cuDNN 9 as wheels (NVIDIA GPUs).
    "gpu": ["tensorflow[and-cuda]==2.21.0"],
}

setup(
    name="genni",
    version="0.1.0",
    description=__doc__,
    long_description=Path("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.11,<3.12",
    packages=["genni"] + ["genni." + p for p in PACKAGES],
    package_dir={
        "genni": "genni",
        **{"genni." + p: p.replace(".", "/") for p in PACKAGES},
    },
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    entry_points={"console_scripts": ["genni=genni.pipeline.cli.main:main"]},
)
