"""The README's Python commands, run as written from the source tree with
nothing in the environment: the build tree's package imports with only
PYTHONPATH=build/python (no LD_LIBRARY_PATH, no NNPCCL_LIBRARY) and loads
the build tree's library, the PyTorch backend imports from the same
directory, and examples/dist_mlp/dist_mlp.py trains with no variable at
all, spawning its ranks itself and under torchrun. (After `meson install`:
tests/install_test.sh.)"""

import os
import pathlib
import socket
import subprocess

import pytest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"


def build_tree():
    """The build tree whose library the tests were given (run-pytest.sh sets NNPCCL_LIBRARY)."""
    library = os.environ.get("NNPCCL_LIBRARY")
    if not library:
        pytest.skip("NNPCCL_LIBRARY is unset: run through meson test, which names the build tree")
    for directory in pathlib.Path(library).resolve().parents:
        if (directory / "meson-info").is_dir():
            return directory
    pytest.fail(f"{library} is in no meson build tree")


def clean_environment(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "NNPCCL_LIBRARY", "LD_LIBRARY_PATH", "MASTER_ADDR", "MASTER_PORT", "RANK",
                        "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NNPCCL_ROOT")}
    env.update(extra)
    return env


def build_python():
    """PYTHONPATH as the README gives it, relative to the source tree."""
    return os.path.relpath(build_tree() / "python", SOURCE)


def run(command, env, timeout=240):
    return subprocess.run(command, cwd=SOURCE, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_build_tree_package_imports_with_pythonpath_alone():
    # PYTHONPATH=build/python /usr/bin/python3 -c 'import nnpccl; print(nnpccl.version())'
    probe = "import nnpccl; print(nnpccl.version()); print(nnpccl.__file__); print(nnpccl._library.lib._name)"
    done = run([PYTHON, "-c", probe], clean_environment(PYTHONPATH=build_python()))
    assert done.returncode == 0, done.stderr
    version, package, library = done.stdout.split("\n")[:3]
    assert int(version) >= 100
    assert pathlib.Path(package).resolve().parent == (build_tree() / "python" / "nnpccl").resolve()
    assert pathlib.Path(library).resolve().parent == build_tree().resolve(), library


def test_the_build_tree_package_is_the_source_package():
    for source in (SOURCE / "python" / "nnpccl").glob("*.py"):
        copy = build_tree() / "python" / "nnpccl" / source.name
        assert copy.read_text() == source.read_text(), f"{copy} is not a copy of {source}"


def test_the_torch_backend_imports_from_the_same_directory():
    module = list((build_tree() / "python").glob("nnpccl_torch*.so"))
    if not module:
        pytest.skip("this build has no PyTorch backend")
    # PYTHONPATH=build/python /usr/bin/python3 -c 'import nnpccl_torch'
    done = run([PYTHON, "-c", "import nnpccl, nnpccl_torch, torch.distributed as d; print(d.Backend('nnpccl'))"],
               clean_environment(PYTHONPATH=build_python()))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "nnpccl"


def example_environment():
    """Nothing, when the build tree is the checkout's build/, which the
    example finds by itself; another build tree is named by PYTHONPATH."""
    if build_tree().resolve() == (SOURCE / "build").resolve():
        return clean_environment()
    return clean_environment(PYTHONPATH=str(build_tree() / "python"))


def check_trained(done, nranks):
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"# dist_mlp.py: {nranks} ranks" in done.stdout, done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line and not line.startswith("#")]
    assert rows and int(rows[-1][1]) > 0, done.stdout


def test_dist_mlp_runs_as_written():
    # /usr/bin/python3 examples/dist_mlp/dist_mlp.py --np 2 --steps 50
    done = run([PYTHON, "examples/dist_mlp/dist_mlp.py", "--np", "2", "--steps", "50"], example_environment())
    check_trained(done, 2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dist_mlp_runs_under_torchrun_as_written():
    pytest.importorskip("torch")
    # /usr/bin/python3 -m torch.distributed.run --nproc_per_node=2 --redirects=1 --tee=1 \
    #     examples/dist_mlp/dist_mlp.py --steps 50
    # with --master_port added, so that jobs on one host do not meet:
    # torchrun's store takes that port, which nnpccl must leave alone.
    env = example_environment()
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    done = run([PYTHON, "-m", "torch.distributed.run", f"--master_port={free_port()}", "--nproc_per_node=2",
                "--redirects=1", "--tee=1", "examples/dist_mlp/dist_mlp.py", "--steps", "50"], env)
    check_trained(done, 2)


def test_a_missing_package_is_named_once_with_the_way_out(tmp_path):
    lone = tmp_path / "dist_mlp.py"
    lone.write_text((SOURCE / "examples" / "dist_mlp" / "dist_mlp.py").read_text())
    done = subprocess.run([PYTHON, str(lone), "--np", "2"], cwd=tmp_path, env=clean_environment(),
                          capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        pytest.skip("nnpccl is installed for /usr/bin/python3")
    assert done.returncode == 1 and done.stderr.count("cannot import nnpccl") == 1, done.stderr
    assert "meson setup build" in done.stderr and "PYTHONPATH" in done.stderr
