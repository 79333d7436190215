"""glibc's mmap threshold: big blocks freed between long-lived small ones go back at once.

Each case runs in a process of its own (the threshold is process-wide, and the test
process's heap has a history of its own).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

#: 4,000 blocks of 20 KiB, each followed by a small long-lived one (as OpenSSL's record
#: buffers come and go between the connections' state); prints the MiB still resident
#: after the big ones are freed.
PROBE = """
import re, sys
from exporter.mallocpolicy import install
print(install())
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
before = rss()
big, pins = [], []
for _ in range(4000):
    big.append(bytearray(20 * 1024))
    pins.append(bytearray(600))
del big
print((rss() - before) // 1024)
"""


def _run(env: dict[str, str]) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    installed, resident = out.stdout.split()
    return installed, int(resident)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_big_blocks_go_back_once_installed_and_the_environment_wins() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    installed, resident = _run(env)
    assert installed == "True"
    assert resident < 40, f"{resident} MiB still resident of 80 freed"
    # The operator's own setting (glibc's default here) is left as it is: nothing returns.
    installed, resident = _run({**env, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)})
    assert installed == "False"
    assert resident > 60
