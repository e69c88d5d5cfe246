"""examples/dist_mlp/dist_mlp.py, the seeds' training in numpy over the
package, on 2 and 3 spawned ranks: its --check fails the run unless the
replicas are bit-identical after every step, match one process training on
the global batch within tolerance, and the loss falls."""

import pathlib
import subprocess
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "dist_mlp" / "dist_mlp.py"


@pytest.mark.parametrize("nranks,dtype", [(2, "float32"), (3, "bfloat16")])
def test_training_keeps_replicas_identical_and_learns(nranks, dtype):
    run = subprocess.run([sys.executable, str(EXAMPLE), "--np", str(nranks), "--steps", "60", "--dtype", dtype,
                          "--check"], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "replicas bit-identical after every step: yes" in run.stdout, run.stdout
    assert f"{nranks} ranks" in run.stdout


def test_bad_arguments_are_named():
    run = subprocess.run([sys.executable, str(EXAMPLE), "--dtype", "float16"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2
    assert "--dtype" in run.stderr and "float16" in run.stderr
