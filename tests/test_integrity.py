"""The rules ``brutus check`` holds rows to, as pure functions."""

from __future__ import annotations

from brutus.check import LightMessage, expected_boundary, light_history, seq_anomalies


def light(seq: int, role: str, **fields: object) -> LightMessage:
    base = dict(id=f"m{seq}", seq=seq, role=role, parent_id=None, summary=False, finished=role == "assistant",
                errored=False)
    return LightMessage(**{**base, **fields})  # type: ignore[arg-type]


def test_expected_boundary() -> None:
    plain = [light(1, "user"), light(2, "assistant")]
    assert expected_boundary(light_history("s", plain)) == (None, 0)
    compacted = plain + [light(3, "user", has_compaction=True), light(4, "assistant", summary=True, parent_id="m3")]
    assert expected_boundary(light_history("s", compacted)) == ("m3", 3)
    with_tail = plain + [light(3, "user", has_compaction=True, compaction_tail="m2"),
                         light(4, "assistant", summary=True, parent_id="m3")]
    assert expected_boundary(light_history("s", with_tail)) == ("m3", 2)
    pending = plain + [light(3, "user", has_compaction=True), light(4, "assistant", summary=True, parent_id="m3",
                                                                     finished=False)]
    assert expected_boundary(light_history("s", pending)) == (None, 0)
    failed = plain + [light(3, "user", has_compaction=True), light(4, "assistant", summary=True, parent_id="m3",
                                                                    errored=True)]
    assert expected_boundary(light_history("s", failed)) == (None, 0)


def test_seq_anomalies() -> None:
    assert seq_anomalies([1, 2, 3], 3) == ([], [])
    assert seq_anomalies([1, 3, 3, 7], 9) == ([(2, 2), (4, 6), (8, 9)], [3])
    assert seq_anomalies([], 2) == ([(1, 2)], [])
    assert seq_anomalies([], 0) == ([], [])
