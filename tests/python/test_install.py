"""`cmake --install` puts the package where Debian's /usr/bin/python3 finds
it, beside a libkvtier.so the module finds by its RPATH: imported from an
installed prefix with nothing of the build tree on any path, it works."""

import os
import re
import subprocess
import sys

import pytest


def cache_value(build_dir, name):
    with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(rf"{name}:[A-Z]+=(.*)$", line.strip())
            if m:
                return m.group(1)
    return None


@pytest.fixture
def build(build_dir):
    if not build_dir:
        pytest.skip("needs the build tree (run by CTest: KVTIER_BUILD_DIR)")
    return build_dir


def test_default_install_dir_is_on_the_system_pythons_path(build):
    prefix = cache_value(build, "CMAKE_INSTALL_PREFIX")
    site = cache_value(build, "KVTIER_PYTHON_INSTALL_DIR")
    if prefix not in ("/usr/local", "/usr"):
        pytest.skip(f"configured for prefix {prefix}")
    path = subprocess.run(
        [sys.executable, "-I", "-c", "import sys; print('\\n'.join(sys.path))"],
        check=True, capture_output=True, text=True).stdout.split()
    assert os.path.join(prefix, site) in path


def test_installed_package_works_from_its_prefix(build, tmp_path):
    cmake = os.environ.get("KVTIER_CMAKE", "cmake")
    prefix = tmp_path / "prefix"
    subprocess.run([cmake, "--install", build, "--prefix", str(prefix)],
                   check=True, capture_output=True, timeout=600)
    site = prefix / cache_value(build, "KVTIER_PYTHON_INSTALL_DIR")
    assert (site / "kvtier" / "__init__.py").exists()
    code = """
import kvtier, numpy as np
m = kvtier.Model("installed", [kvtier.Layer.kv((4,), "float32")])
with kvtier.Service(model=m, options={"log.level": "warn"}) as s:
    p = list(range(8))
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    assert s.publish(kvtier.Request(1, p), p, [a]).kept
    got = s.acquire(kvtier.Request(2, p + [1])).layers[0].array()
    assert (got == a).all()
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libkvtier" in l]
print(kvtier.__file__)
print(sorted(set(libs))[0])
"""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                         check=True, capture_output=True, text=True,
                         timeout=120).stdout.split()
    assert out[0].startswith(str(site))
    assert out[1].startswith(str(prefix))  # found by RPATH, not the build
