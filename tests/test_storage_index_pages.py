"""A lookup of a recent offset touches a few pages of an index, whatever its size (AbstractIndex's warm/cold
search). The search itself reads at most 3 pages; what the page cache ends up holding also depends on
how the index is mapped: without MADV_RANDOM the kernel's read-around faults in up to `read_ahead_kb`
of the file around the first page touched.
"""

from __future__ import annotations

import os

import pytest
from index_pages import drop_cache, pages_of_one_lookup, resident_pages, write_offset_index

from kfs.storage.index import OffsetIndex


@pytest.fixture(scope="module")
def big_index(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("pages") / f"{0:020d}.index")
    keys = write_offset_index(path, 4 << 20)
    drop_cache(path)
    if resident_pages(path) > 0:
        pytest.skip("this file system keeps the index's pages cached (tmpfs?): residency cannot be measured")
    yield path, keys
    os.remove(path)


def test_the_warm_cold_search_reads_at_most_three_pages_for_a_recent_offset(big_index) -> None:
    path, keys = big_index
    for target in (keys[-1], keys[-500] + 1, keys[-1000]):
        _, read = pages_of_one_lookup(path, OffsetIndex, target, plain=False, madv_random=True)
        assert read <= 3, target


def test_one_recent_lookup_makes_at_most_three_pages_resident(big_index) -> None:
    path, keys = big_index
    resident, _ = pages_of_one_lookup(path, OffsetIndex, keys[-100] + 1, plain=False, madv_random=False)
    assert resident <= 3
