import pytest
from sounding.settings.limits import MemoryLimits
from sounding.store import connection

pytestmark = pytest.mark.unit


def test_unconfigured_processes_bound_lancedb_s_caches_as_the_servers_do_by_default():
    limits = MemoryLimits()
    defaults = (limits.worker_lancedb_index_cache_mib, limits.lancedb_metadata_cache_mib)
    assert connection.DEFAULT_CACHE_MIB == defaults
