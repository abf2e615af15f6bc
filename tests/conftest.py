import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The measuring harnesses (tools/benchmarking) are tested too.
sys.path.insert(0, os.path.join(REPO, "tools"))
SYNTHETIC_CONFIG = os.path.join(REPO, "configs", "2dtan_synthetic.yaml")


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory):
    """DATASETS.ROOT with the built-in synthetic dataset, generated once per test session."""
    from tan.data.synthetic import ensure_synthetic

    root = str(tmp_path_factory.mktemp("datasets"))
    ensure_synthetic(root)
    return root


def run_tool(tool, *args, cwd=None, timeout=600):
    """Run tools/<tool>.py in a fresh interpreter; returns the CompletedProcess."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", f"{tool}.py"), *args], cwd=cwd, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
