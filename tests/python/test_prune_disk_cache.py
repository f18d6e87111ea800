"""tools/prune_disk_cache.sh (run by tools/setup.sh on Bazel's disk cache) removes the least recently read files
first, down to three quarters of its bound, and leaves a folder under the bound untouched."""
import os
import random
import subprocess

import pytest

from conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "tools" / "prune_disk_cache.sh"
FILE_KIB = 64  # one cache entry; du counts whole blocks, so sizes are multiples of 4 KiB


def make_cache(root, count):
    """`count` files in two subfolders (as Bazel's ac/ and cas/), each with its own random access time."""
    atimes = random.sample(range(1_000_000, 2_000_000), count)
    files = {}
    for i, atime in enumerate(atimes):
        path = root / ("ac" if i % 3 == 0 else "cas") / f"{i:02x}" / f"entry{i}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(FILE_KIB * 1024))
        os.utime(path, (atime, atime))
        files[path] = atime
    return files


def folder_kib(root):
    return int(subprocess.run(["du", "-sk", str(root)], capture_output=True, text=True, check=True).stdout.split()[0])


def prune(root, limit_mib):
    return subprocess.run(["bash", str(SCRIPT), str(root), str(limit_mib)], capture_output=True, text=True, timeout=60)


def test_over_the_bound_removes_the_least_recently_read_down_to_three_quarters(tmp_path):
    cache = tmp_path / "cache"
    files = make_cache(cache, 48)  # 3 MiB of entries plus folders
    limit_mib = 2
    result = prune(cache, limit_mib)
    assert result.returncode == 0, result.stderr
    assert "over its bound of 2 MiB" in result.stdout
    kept = {p for p in files if p.exists()}
    removed = set(files) - kept
    assert removed and kept
    assert max(files[p] for p in removed) < min(files[p] for p in kept), "a newer entry went before an older one"
    assert folder_kib(cache) <= limit_mib * 1024 * 3 // 4
    # No more than needed: putting back the newest removed entry would bring it over three quarters again.
    assert folder_kib(cache) + FILE_KIB > limit_mib * 1024 * 3 // 4


def test_under_the_bound_removes_nothing(tmp_path):
    cache = tmp_path / "cache"
    files = make_cache(cache, 16)  # 1 MiB
    result = prune(cache, 4)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert all(p.exists() for p in files)


def test_a_missing_folder_is_not_an_error(tmp_path):
    result = prune(tmp_path / "absent", 1)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("args", [[], ["dir"], ["dir", "ten"]])
def test_bad_arguments_print_the_usage(args):
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "usage:" in result.stderr
