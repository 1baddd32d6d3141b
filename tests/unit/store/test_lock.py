import os
import subprocess
import sys

import pytest
from sounding.store.lock import DataDirectoryInUse, DataDirectoryLock

pytestmark = pytest.mark.unit

HOLD = """
import sys, time
from sounding.store.lock import DataDirectoryLock
DataDirectoryLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(60)
"""


def test_a_second_holder_is_refused_naming_the_first_and_the_lock_goes_with_its_process(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DataDirectoryInUse, match=f"pid {holder.pid}"):
            DataDirectoryLock(tmp_path).acquire()
    finally:
        holder.kill()  # as SIGKILL: no clean-up of its own
        holder.wait()
    lock = DataDirectoryLock(tmp_path).acquire()
    assert (tmp_path / "orchestrator.lock").read_text().strip() == str(os.getpid())
    lock.release()
