"""Scale presets (seed 002) and the free-disk cap."""

import pytest

from pgdyno.errors import DatasetError, UsageError
from pgdyno.pgbench.scale import GIB, MIB, choose_scale, estimated_bytes, parse_scale_spec


def test_presets_follow_seed_002_on_this_machine_size():
    ram, sb, free = 24 * GIB, 128 * MIB, 500 * GIB
    small = choose_scale("small", ram, sb, free)
    medium = choose_scale("medium", ram, sb, free)
    large = choose_scale("large", ram, sb, free)
    assert estimated_bytes(small.scale) <= sb  # fits in shared_buffers
    assert 0.45 * ram <= estimated_bytes(medium.scale) <= 0.5 * ram
    assert 1.95 * ram <= estimated_bytes(large.scale) <= 2 * ram
    assert small.note is medium.note is large.note is None


def test_preset_capped_by_free_disk_says_so():
    choice = choose_scale("large", 24 * GIB, 128 * MIB, 30 * GIB)
    assert choice.note is not None and "using scale" in choice.note
    assert estimated_bytes(choice.scale) * 2.2 + GIB <= 30 * GIB


def test_absolute_scale_too_big_for_disk_is_an_error():
    with pytest.raises(DatasetError, match="choose --scale"):
        choose_scale(10_000, 24 * GIB, 128 * MIB, 20 * GIB)


def test_no_room_at_all():
    with pytest.raises(DatasetError, match="too little"):
        choose_scale("small", 24 * GIB, 128 * MIB, GIB)


@pytest.mark.parametrize("bad", ["huge", "0", "-3", "1.5"])
def test_bad_scale_specs(bad: str):
    with pytest.raises(UsageError, match="--scale"):
        parse_scale_spec(bad)


def test_bad_scale_spec_names_the_presets_of_the_data_file():
    with pytest.raises(UsageError, match=r"use small, medium, large or a whole number >= 1\.$"):
        parse_scale_spec("huge")


def test_preset_edges_round_down_like_integer_division():
    # 15 MiB per scale unit: half of 30 MiB + 1 byte of shared_buffers is still scale 1, and
    # 2 x RAM of 15 MiB - 1 byte is one unit, not two.
    assert choose_scale("small", 24 * GIB, 30 * MIB + 1, None).scale == 1
    assert choose_scale("small", 24 * GIB, 60 * MIB - 1, None).scale == 1
    assert choose_scale("large", 15 * MIB - 1, 128 * MIB, None).scale == 1
    assert choose_scale("medium", 60 * MIB, 128 * MIB, None).scale == 2
