"""The house rules: one import name, floors that run one way, no import circle,
no file over 700 lines, and quiet start-up."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("components", "models", "pipeline")
MAX_LINES = 700
# Each floor may import only the floors after it (and itself).
FLOORS = [
    ("genni.pipeline.cli",),  # Parsing, printing and exit codes only.
    ("genni.pipeline.loop",),  # The pipeline's steps and the replay.
    (
        "genni.pipeline.serving",
        "genni.pipeline.training",
        "genni.pipeline.preprocess",
    ),
    # Shared by the jobs: atomic outputs (standard library only), and the
    # quiet start of a process (the command's, a benchmark's).
    ("genni.pipeline.atomic", "genni.pipeline.quiet"),
    ("genni.models",),
    ("genni.components",),
]
# Sideways imports between jobs of the same floor that are part of the design:
# the serving export reads training runs; training reads the
# dataset contract written by preprocessing; batch recommendations read logs
# the way preprocessing does.
SIDEWAYS = {
    ("genni.pipeline.serving", "genni.pipeline.training"),
    ("genni.pipeline.serving", "genni.pipeline.preprocess"),
    ("genni.pipeline.training", "genni.pipeline.preprocess"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["genni", *parts])


def sources() -> dict[str, Path]:
    return {
        module_name(p): p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
    }


def runtime_nodes(tree: ast.AST):
    """Every node, except those under `if TYPE_CHECKING:` (never imported)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def imports(path: Path, modules: set[str]) -> set[str]:
    """The project modules `path` imports, at any depth of its code."""
    found = set()
    for node in runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith("genni.") and m in modules}


def graph() -> dict[str, set[str]]:
    files = sources()
    modules = set(files)
    return {m: imports(p, modules) for m, p in files.items()}


def floor_of(module: str) -> tuple[int, str] | None:
    for level, packages in enumerate(FLOORS):
        for package in packages:
            if module == package or module.startswith(package + "."):
                return level, package
    return None


def test_floors_run_one_way():
    climbs = []
    for module, targets in graph().items():
        here = floor_of(module)
        for target in targets:
            there = floor_of(target)
            if here is None or there is None or here[1] == there[1]:
                continue
            if there[0] < here[0] or (
                there[0] == here[0] and (here[1], there[1]) not in SIDEWAYS
            ):
                climbs.append(f"{module} -> {target}")
    assert not climbs, "imports against the floors:\n" + "\n".join(sorted(climbs))


# Code outside the package that imports it: the benchmarks and the research
# tooling of the clone.
CLIENTS = ("benchmarks", "research")
CLI = "genni.pipeline.cli"


def test_nothing_outside_the_cli_imports_it():
    """The command only parses, prints and chooses exit codes: what it runs
    lives below it (a scheduler imports `genni.pipeline.loop`, never a CLI
    module). The tests drive the command, so they may."""
    modules = set(sources())
    importers = {m: t for m, t in graph().items() if not m.startswith(CLI)}
    for folder in CLIENTS:
        for path in (ROOT / folder).rglob("*.py"):
            importers[str(path.relative_to(ROOT))] = imports(path, modules)
    found = sorted(
        f"{module} -> {target}"
        for module, targets in importers.items()
        for target in targets
        if target == CLI or target.startswith(CLI + ".")
    )
    assert not found, "imports of the CLI outside it:\n" + "\n".join(found)


def test_models_and_components_import_nothing_from_pipeline():
    for module, targets in graph().items():
        if module.startswith(("genni.models", "genni.components")):
            assert not [t for t in targets if t.startswith("genni.pipeline")], module


def test_no_import_circle():
    edges = graph()
    # Tarjan would do; the graph is small, so a DFS for back edges is enough.
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt.startswith(node + "."):  # A package importing its own module.
                continue
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_sampler_names_are_branched_on_in_the_registry_only():
    """What a sampler name means lives in `components/samplers/registry.py`;
    the jobs ask it (`registry.get(name).model_generated`, ...) instead of
    comparing names (the research tooling, outside the package, names the
    paper's rows)."""
    allowed = {"genni.components.samplers.registry"}
    compared = []
    for module, path in sources().items():
        if module in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            literals = [
                c.value
                for c in (node.left, *node.comparators)
                if isinstance(c, ast.Constant)
            ]
            lists = [
                e.value
                for c in (node.left, *node.comparators)
                if isinstance(c, (ast.Tuple, ast.List, ast.Set))
                for e in c.elts
                if isinstance(e, ast.Constant)
            ]
            if {"genni", "uniform", "popularity"} & set(literals + lists):
                compared.append(f"{module}:{node.lineno}")
    assert not compared, f"sampler names compared outside the registry: {compared}"


def test_no_file_over_the_limit():
    long = {
        str(p.relative_to(ROOT)): n
        for p in sources().values()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"files over {MAX_LINES} lines: {long}"


def run_python(cwd, code, *args, drop=(), check=True):
    """`python -c code args` in `cwd`, without PYTHONPATH and the `drop` vars."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", *drop)}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=check,
    )


def test_one_import_name_outside_the_repository(tmp_path):
    """Installed, the folders are `genni.*`; nothing generic is importable."""
    code = (
        "import importlib.util, genni.models, genni.components, genni.pipeline\n"
        "print([importlib.util.find_spec(n) is None for n in "
        "('models', 'pipeline', 'components')])\n"
        "print(genni.models.__name__)\n"
    )
    out = run_python(tmp_path, code).stdout.split("\n")
    assert out[0] == "[True, True, True]"
    assert out[1] == "genni.models"


def test_importing_the_package_leaves_the_allocator_alone(tmp_path):
    code = (
        "import os, genni.pipeline.training.train, genni.models.encoders.sasrec\n"
        "print(os.environ.get('TF_CPU_ALLOCATOR_USE_BFC'))\n"
    )
    out = run_python(tmp_path, code, drop=("TF_CPU_ALLOCATOR_USE_BFC",)).stdout
    assert out.strip() == "None"


@pytest.mark.parametrize("verbose", [False, True])
def test_start_up_noise_only_with_verbose(tmp_path, verbose):
    """`genni` with TensorFlow: no runtime start-up lines unless -v."""
    code = (
        "import sys; from genni.pipeline.cli import main\n"
        "sys.exit(main.main(sys.argv[1:]))\n"
    )
    args = ["-v"] if verbose else []
    done = run_python(
        tmp_path,
        code,
        *args,
        "evaluate",
        "--run",
        "missing",
        drop=("TF_CPP_MIN_LOG_LEVEL",),
        check=False,
    )
    assert done.returncode != 0
    noisy = "absl::InitializeLog" in done.stderr or "oneDNN" in done.stderr
    assert noisy == verbose, done.stderr
    if not verbose:  # Errors always show.
        assert done.stderr.strip().startswith("genni evaluate: error:")


@pytest.mark.parametrize("verbose", [False, True])
def test_the_runtimes_own_log_lines_are_filtered_for_the_whole_command(
    tmp_path, verbose
):
    """TensorFlow's C++ runtime logs at run time too (oneDNN's int64 note at
    a first training step, INFO lines where TF_CPP_MIN_LOG_LEVEL lets them
    through): a command without -v shows none of it, but real errors and its
    own stderr lines, in order."""
    code = (
        "import os, sys; from genni.pipeline.cli import main, training\n"
        "def fake_evaluate(args, extra):\n"
        "    print('own line', file=sys.stderr)\n"
        "    for line in (\n"
        "        'E0000 00:00:1796286511.249161   30159 util.cc:131] oneDNN '\n"
        "        'supports DT_INT64 only on platforms with AVX-512. Falling back',\n"
        "        'I0000 00:00:1796286461.112340   29966 tf_record_dataset_op.cc:'\n"
        "        '390] TFRecordDataset `buffer_size` is unspecified',\n"
        "        'W0000 00:00:1.5 7 some_op.cc:12] a warning',\n"
        "        'E0000 00:00:1.5 7 real.cc:1] a real failure',\n"
        "    ):\n"
        "        os.write(2, (line + '\\n').encode())\n"
        "    return 0\n"
        "training._evaluate = fake_evaluate\n"
        "sys.exit(main.main(sys.argv[1:]))\n"
    )
    args = ["-v"] if verbose else []
    env = {"TF_CPP_MIN_LOG_LEVEL": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args, "evaluate", "--run", "r"],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    if verbose:
        assert any("util.cc:131" in line for line in lines)
        return
    assert lines == ["own line", "E0000 00:00:1.5 7 real.cc:1] a real failure"]


def test_the_wheel_is_the_product(tmp_path):
    """The installed package holds the product only: the paper-reproduction
    tooling (`research/`: the report, the exact-law check) stays in the clone."""
    import shutil
    import zipfile

    # Built from a copy of the clone's files, so that no build/ lands in it.
    source = tmp_path / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            "__pycache__", "*.egg-info", ".*", "demo_out", "runs", "docs", "benchmarks"
        ),
    )
    wheel = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    subprocess.run(
        [*wheel, "--no-build-isolation", "--wheel-dir", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("genni-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    modules = [n for n in names if n.endswith(".py")]
    assert "genni/pipeline/training/train.py" in modules  # It is the package.
    shipped = [n for n in modules if "reproduce" in n or n.endswith("/law.py")]
    assert not shipped, shipped
    assert not [n for n in names if n.startswith("research")]


def test_the_ranking_rule_is_written_once():
    """Which items a ranking leaves out (`--candidates`) is decided in
    `genni.components.metrics.left_out` alone: evaluation, the export, the ANN
    path and the reference ranking ask it. Elsewhere `candidates` is compared
    with a rule's name only to word a message."""
    wording = {
        ("genni.pipeline.training.train", "check_dataset"),  # The repeat warning.
        ("genni.pipeline.training.evaluate", "repeat_line"),
    }
    deciding = []
    for module, path in sources().items():
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Compare):
                    continue
                sides = [node.left, *node.comparators]
                names = {ast.unparse(side).split(".")[-1] for side in sides}
                rules = {
                    side.value
                    for side in sides
                    if isinstance(side, ast.Constant) and side.value in ("new", "all")
                }
                if "candidates" in names and rules:
                    deciding.append((module, function.name))
    assert sorted(set(deciding) - wording) == [
        ("genni.components.metrics", "left_out")
    ], deciding


def named_outside(package: str, names: set[str], strings: bool = False) -> list[str]:
    """`module:line` of each place outside `package` that names one of
    `names`: a name, an attribute, an import (and a string, if `strings`)."""
    named = []
    for module, path in sources().items():
        if module.startswith(package):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = getattr(node, "id", None) or getattr(node, "attr", None)
            if isinstance(node, ast.alias):
                name = node.name.split(".")[-1]
            if strings and isinstance(node, ast.Constant):
                name = node.value if isinstance(node.value, str) else None
            if name in names:
                named.append(f"{module}:{node.lineno}")
    return named


def test_no_concrete_sampler_is_named_outside_the_samplers_package():
    """The models and the jobs ask a sampler through its protocol
    (`components/samplers/base.py`); which sampler it is, only the samplers'
    own package knows."""
    classes = {"GenNiSampler", "UniformSampler", "PopularitySampler"}
    named = named_outside("genni.components.samplers", classes)
    assert not named, f"concrete samplers named outside their package: {named}"


def test_no_concrete_encoder_is_named_outside_the_models():
    """Training, pre-training, export and the loop build an encoder from its
    settings (`genni.models.config.build_encoder`) and use it through its
    protocol (`genni.models.encoders.SequenceEncoder`); which encoder it is,
    only `genni.models` knows."""
    from genni.models.encoders import registry

    classes = {"SASRecEncoder", "FilterMixEncoder", "CausalSelfAttentionBlock"}
    classes |= {"FilterMixBlock", *registry.names()}
    named = named_outside("genni.models", classes, strings=True)
    assert not named, f"concrete encoders named outside genni.models: {named}"
