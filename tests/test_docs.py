"""The documentation: the site builds with warnings as errors, the README stays one screen's worth,
and every command of the README and docs/ is one the tools accept as written: its options parse with
the tool's own parser, the config files it names exist, and they load with its KEY VALUE overrides.
(Commands that need the real benchmarks' files or hours of training cannot run here; the README's
test command is what CI runs.)"""
import glob
import importlib
import importlib.util
import os
import re
import shlex
import subprocess
import sys

import pytest

from tan.config import load_config
from tan.errors import TanError

from conftest import REPO

PAGES = ["README.md"] + sorted(os.path.relpath(p, REPO) for p in glob.glob(os.path.join(REPO, "docs", "*.md")))
# console scripts and the tools/ wrappers of the same commands -> their module in tan_apps.commands
COMMANDS = {"tan-train": "train", "tan-test": "test", "tan-predict": "predict", "tan-visualize": "visualize",
            "tan-check-data": "check_data", "tan-convert-features": "convert_features",
            "tan-convert-config": "convert_config", "tan-extract-features": "extract_features",
            "tan-synthetic-videos": "synthetic_videos", "tan-demo": "demo"}
WRAPPERS = {"train_net": "train", "test_net": "test", "predict": "predict", "visualize": "visualize",
            "check_data": "check_data", "convert_features": "convert_features", "convert_config": "convert_config",
            "extract_features": "extract_features", "synthetic_videos": "synthetic_videos", "demo": "demo"}
SCRIPTS = ("benchmark", "make_standin", "measure_data", "trivial_baseline", "cuda_smoke", "long_synthetic", "ego4d_nlq_clips",
           "seed_comparison/make_dataset", "seed_comparison/compare")
SHELL = {"pip", "cd", "cp", "cat", "printf", "export", "zip", "mkdocs"}


def shell_commands(page):
    """(page, command) for each command line of the page's bash blocks: continuations joined, comments
    dropped, $NAME replaced by an earlier NAME=value of the block."""
    with open(os.path.join(REPO, page)) as f:
        text = f.read()
    found = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.S):
        variables, heredoc = {}, None
        for line in re.sub(r"\\\n\s*", " ", block).split("\n"):
            line = line.strip()
            if heredoc:  # the lines of a here-document are its text, not commands
                heredoc = None if line == heredoc else heredoc
                continue
            if not line or line.startswith("#"):
                continue
            opened = re.search(r"<<-?\s*'?(\w+)'?", line)
            heredoc = opened.group(1) if opened else None
            assignment = re.fullmatch(r"([A-Z_]+)=(\S+)", line)
            if assignment:
                variables[assignment.group(1)] = assignment.group(2)
                continue
            for name, value in variables.items():
                line = line.replace(f"${name}", value)
            found.extend(part.strip() for part in line.split("&&"))
    return found


ALL = [(page, command) for page in PAGES for command in shell_commands(page)]


def tool_and_arguments(command):
    """(kind, name, argv) of one command: ("cli", module, argv), ("script", tools/ script, argv),
    ("shell", first word, argv) or ("python", "-m ...", argv)."""
    words = shlex.split(command, comments=True)
    if words[0] == "torchrun":  # its own options, then the script
        words = words[next(i for i, w in enumerate(words) if w.endswith(".py")):]
        words = ["python"] + words
    if words[0] in COMMANDS:
        return "cli", COMMANDS[words[0]], words[1:]
    if words[0] == "python" and words[1].startswith("tools/"):
        name = words[1][len("tools/"):-3]  # tools/seed_comparison/compare.py: "seed_comparison/compare"
        if name in WRAPPERS:
            return "cli", WRAPPERS[name], words[2:]
        return "script", name, words[2:]
    if words[0] == "python":
        return "python", " ".join(words[1:3]), words[3:]
    return "shell", words[0], words[1:]


def parse(kind, name, argv):
    """The argparse namespace the tool would get (SystemExit on a refused option)."""
    if kind == "cli":
        return importlib.import_module(f"tan_apps.commands.{name}").build_parser().parse_args(argv)
    spec = importlib.util.spec_from_file_location(f"doc_tool_{name.replace('/', '_')}",
                                                  os.path.join(REPO, "tools", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.join(REPO, "tools"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.join(REPO, "tools"))
    if hasattr(module, "build_parser"):
        return module.build_parser().parse_args(argv)
    if hasattr(module, "parse_args"):
        return module.parse_args(argv)
    pytest.fail(f"tools/{name}.py has no build_parser or parse_args to check its arguments with")


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr
    assert (tmp_path / "site" / "seeds" / "index.html").is_file()


def test_every_page_is_in_the_site():
    with open(os.path.join(REPO, "mkdocs.yml")) as f:
        listed = set(re.findall(r":\s*([\w-]+\.md)\s*$", f.read(), re.M))
    assert listed == {os.path.basename(p) for p in PAGES if p.startswith("docs")}


def test_the_readme_is_one_screens_worth():
    with open(os.path.join(REPO, "README.md")) as f:
        lines = f.read().split("\n")
    assert len(lines) < 250
    # the two commands of its first block, as a newcomer runs them
    assert shell_commands("README.md")[:3] == [
        "pip install torch==2.13.0", "pip install -e .",
        "python tools/train_net.py --config-file configs/2dtan_synthetic.yaml"]


def test_the_readme_test_commands_are_what_ci_runs():
    """Both tiers are in the README's test block, and CI runs that block and the first one as written."""
    commands = shell_commands("README.md")
    assert "pip install -e '.[test]'" in commands
    assert "python -m pytest -q" in commands and "python -m pytest -q --full" in commands
    with open(os.path.join(REPO, ".ci", "run")) as f:
        ci = f.read()
    assert 'first, tests = blocks[0], next(b for b in blocks if "python -m pytest" in b)' in ci
    assert "for block in (first, tests):" in ci


@pytest.mark.parametrize("page,command", ALL, ids=[f"{p}:{c[:60]}" for p, c in ALL])
def test_a_documented_command_is_accepted_as_written(page, command):
    kind, name, argv = tool_and_arguments(command)
    optional = [w for w in argv if w.startswith("[-") or w == "[KEY"]  # "[--flag]": how a synopsis writes an option
    assert not optional, f"{page}: {command!r} is a synopsis ({optional[0]} ...): write it in a text block"
    if kind == "shell":
        assert name in SHELL or name.endswith(":"), f"{page}: unknown command {command!r}"
        if name == "pip":  # the extras it names exist
            for extra in re.findall(r"\.\[([\w,]+)\]", command):
                with open(os.path.join(REPO, "pyproject.toml")) as f:
                    extras = set(re.findall(r"^(\w+) = \[", f.read().split("[project.optional-dependencies]")[1]
                                            .split("\n[")[0], re.M))
                assert set(extra.split(",")) <= extras, command
        return
    if kind == "python":
        assert name in ("-m pytest", "-m zipfile", "-m mkdocs"), command
        return
    if kind == "script":
        assert name in SCRIPTS, command
    try:
        args = parse(kind, name, argv)
    except SystemExit as e:
        pytest.fail(f"{page}: {command!r} is refused by its parser (exit {e.code})")
    config = getattr(args, "config_file", None)
    if config and (config.startswith("configs/") or os.path.exists(os.path.join(REPO, config))):
        assert os.path.isfile(os.path.join(REPO, config)), f"{page}: {command!r}: no file {config}"
        opts = list(getattr(args, "opts", None) or [])
        if getattr(args, "seeds", None):
            opts += ["SEED", "1"]
        try:
            load_config(os.path.join(REPO, config), opts)
        except TanError as e:
            pytest.fail(f"{page}: {command!r}: the config does not load with its overrides: {e}")


def contract_rows():
    """{member: its row or bullet} of docs/models.md §2-§4, where the page describes the contract."""
    with open(os.path.join(REPO, "docs", "models.md")) as f:
        text = f.read()
    part = text[text.index("## 2. "):text.index("## 5. ")]
    rows = {}
    for line in part.splitlines():
        found = re.match(r"(?:\| |- )`(\w+)", line)
        if found:
            rows.setdefault(found.group(1), line)
    return rows


def test_the_models_page_describes_the_contract_s_members_and_marks_the_abstract_ones_required():
    """docs/models.md and tan.modeling.GroundingModel are the contract's page and its one source:
    every member the class defines has a row (NAME is set by register_model), no row names a member
    the class lacks, and the rows marked required are the class's abstract methods."""
    from tan.modeling import GroundingModel

    rows = contract_rows()
    defined = {name for name in vars(GroundingModel) if not name.startswith("_")} - {"NAME"}
    assert set(rows) - {"__init__"} == defined, (sorted(set(rows) - defined), sorted(defined - set(rows)))
    required = {name for name, line in rows.items() if "**required**" in line}
    assert required == set(GroundingModel.__abstractmethods__)
