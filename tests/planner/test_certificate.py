"""Tests for planner.certificate: canonical JSON, the snapshot digest, the certified result, verification."""

from __future__ import annotations

import copy
import hashlib
import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.certificate import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    canonical_json,
    certificate_statement,
    certified_result,
    label_snapshot,
    sha256_hex,
    verify_certificate,
)
from planner.decision import validate_judge

FAST = settings(max_examples=60, deadline=None)
LABELS = ["a", "b", "c"]


def test_spec_snapshot_hash() -> None:
    """The check value of the method's §10 (the two-row snapshot)."""
    rows = [
        {"item": "i1", "rater": "ann-1", "criterion": "default", "value": "pass", "seq": 1},
        {"item": "i1", "rater": "judge", "criterion": "default", "value": "fail", "seq": 2},
    ]
    assert sha256_hex(rows) == "a625c24e14380d93c3941a28556ac41d32cf22d725fefed9ef8e0375f9cc6745"
    assert sha256_hex(label_snapshot(reversed(rows), label_seq=2)) == sha256_hex(rows)


def test_rfc8785_sample() -> None:
    """RFC 8785 §3.2.2: the sample input and its canonical output, byte for byte."""
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical_json(json.loads(source)) == expected.encode()


rows_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "item": st.text(min_size=1, max_size=8),
            "rater": st.text(min_size=1, max_size=8),
            "criterion": st.sampled_from(["default", "tone"]),
            "value": st.text(max_size=8),
            "seq": st.integers(1, 10**12),
        }
    ),
    max_size=20,
)


@FAST
@given(rows_strategy)
def test_canonical_json_of_label_rows_matches_sorted_compact_json(rows: list[dict]) -> None:
    """Strings and integers only: RFC 8785 is sorted keys, no whitespace, UTF-8 (an independent encoder)."""
    reference = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    # json escapes DEL and lone surrogates differently only outside the label texts drawn here
    if all(ch.isprintable() for r in rows for k in ("item", "rater", "value") for ch in r[k]):
        assert canonical_json(rows) == reference
        assert sha256_hex(rows) == hashlib.sha256(reference).hexdigest()


def history() -> list[dict]:
    return [
        {"item": "i2", "rater": "h1", "criterion": "default", "value": "a", "seq": 1},
        {"item": "i1", "rater": "h1", "criterion": "default", "value": "b", "seq": 2},
        {"item": "i1", "rater": "h1", "criterion": "default", "value": "c", "seq": 3},  # correction
        {"item": "i1", "rater": "h2", "criterion": "default", "value": "a", "seq": 4},
        {"item": "i1", "rater": "h2", "criterion": "default", "value": None, "seq": 5},  # retraction
        {"item": "i3", "rater": "h1", "criterion": "default", "value": "a", "seq": 6},  # after the cut
    ]


def test_label_snapshot_keeps_the_latest_event_up_to_label_seq() -> None:
    assert label_snapshot(history(), label_seq=5) == [
        {"item": "i1", "rater": "h1", "criterion": "default", "value": "c", "seq": 3},
        {"item": "i2", "rater": "h1", "criterion": "default", "value": "a", "seq": 1},
    ]
    at_4 = label_snapshot(history(), label_seq=4)
    assert [(r["item"], r["rater"], r["value"]) for r in at_4] == [
        ("i1", "h1", "c"),
        ("i1", "h2", "a"),
        ("i2", "h1", "a"),
    ]


@FAST
@given(st.randoms(use_true_random=False), st.integers(0, 7))
def test_label_snapshot_ignores_row_order(rnd: random.Random, cut: int) -> None:
    rows = history()
    rnd.shuffle(rows)
    assert label_snapshot(rows, label_seq=cut) == label_snapshot(history(), label_seq=cut)


def test_label_snapshot_names_a_bad_row() -> None:
    with pytest.raises(ValueError, match="label row 1 has no field 'seq'"):
        label_snapshot([{"item": "i", "rater": "r", "criterion": "c", "value": "a"}], label_seq=1)
    with pytest.raises(ValueError, match="label row 1: seq must be an integer"):
        label_snapshot([{"item": "i", "rater": "r", "criterion": "c", "value": "a", "seq": "x"}], label_seq=1)


def spec_rows() -> list[dict]:
    """The method's §3 worked example (3 humans x 40 items, labels 0..2) as label rows."""
    i = np.arange(40)
    columns = {
        "h1": i % 3,
        "h2": np.where(i % 5 == 0, (i + 1) % 3, i % 3),
        "h3": np.where(i % 4 == 0, (i + 2) % 3, i % 3),
        "judge": np.where(i % 7 == 0, (i + 1) % 3, i % 3),
    }
    rows, seq = [], 0
    for item in range(40):
        for rater, codes in columns.items():
            seq += 1
            rows.append(
                {
                    "item": f"x{item:02d}",
                    "rater": rater,
                    "criterion": "default",
                    "value": LABELS[codes[item]],
                    "seq": seq,
                }
            )
    return rows


def spec_settings(**decision: object) -> dict:
    return {
        "project": {"id": "p_test", "name": "spec"},
        "label_seq": 160,
        "criterion": "default",
        "protocol": {"scale": "nominal", "labels": LABELS, "handling": "exclude"},
        "raters": {"h1": "human", "h2": "human", "h3": "primary", "judge": "judge"},
        "decision": {
            "coefficient": "po",
            "rule": "alt-test",
            "epsilon": 0.1,
            "omega_threshold": 0.5,
            "q": 0.05,
            "inconclusive_level": 0.2,
            "alpha_sig": 0.05,
            **decision,
        },
        "plan": None,
        "seeds": {"seed": 7, "bit_generator": "PCG64", "n_resamples": 200},
    }


def test_certified_result_reproduces_the_worked_example() -> None:
    """Alt-test p-values .32693, .03359, .00258; only h3 won; omega = 1/3 (method §3)."""
    result = certified_result(label_snapshot(spec_rows(), label_seq=160), spec_settings())
    (judge,) = result["judges"]
    assert [r["rater"] for r in judge["raters"]] == ["h1", "h2", "h3"]
    assert [round(r["p_value"], 5) for r in judge["raters"]] == [0.32693, 0.03359, 0.00258]
    assert [r["won"] for r in judge["raters"]] == [False, False, True]
    assert result["omega"] == pytest.approx(1 / 3)
    i = np.arange(40)
    codes = np.column_stack(
        [
            i % 3,
            np.where(i % 5 == 0, (i + 1) % 3, i % 3),
            np.where(i % 4 == 0, (i + 2) % 3, i % 3),
            np.where(i % 7 == 0, (i + 1) % 3, i % 3),
        ]
    )
    direct = validate_judge(
        codes, judge=3, humans=[0, 1, 2], n_labels=3, rule="alt-test", epsilon=0.1, n_resamples=200, rng=7
    )
    assert result["decision"] == direct.decision and judge["p_opposite"] == pytest.approx(direct.p_opposite)
    assert result["n_items"] == 40 and result["n_labels"] == 160
    assert result["computed_with"]["decision.epsilon"] == 0.1


def statement() -> dict:
    snapshot = label_snapshot(spec_rows(), label_seq=160)
    return certificate_statement(snapshot, spec_settings(), certificate={"id": "c_1", "issued_at": "2026-11-30"})


def test_statement_shape() -> None:
    s = statement()
    assert s["_type"] == STATEMENT_TYPE and s["predicateType"] == PREDICATE_TYPE
    assert [x["name"] for x in s["subject"]] == ["labels-snapshot", "report"]
    assert s["subject"][0]["digest"]["sha256"] == sha256_hex(label_snapshot(spec_rows(), label_seq=160))
    assert s["predicate"]["snapshot"]["n_rows"] == 160
    assert set(s["predicate"]["software"]) == {"annoplan", "numpy", "scipy", "python"}
    json.dumps(s, allow_nan=False)  # plain JSON: no NaN anywhere


def test_verify_matches_the_export_it_was_made_from() -> None:
    s = statement()
    check = verify_certificate(s, spec_rows())
    assert check.match and check.mismatches == ()
    # a history export with later events beyond label_seq, as CSV strings, still matches
    later = [{**r, "seq": str(r["seq"])} for r in spec_rows()]
    later.append({"item": "x00", "rater": "h1", "criterion": "default", "value": "c", "seq": "161"})
    assert verify_certificate(s, later).match


def fields(check) -> list[str]:
    return [m.field for m in check.mismatches]


def test_verify_names_a_changed_label() -> None:
    rows = spec_rows()
    rows[5]["value"] = "c" if rows[5]["value"] != "c" else "a"
    check = verify_certificate(statement(), rows)
    assert not check.match
    assert check.mismatches[0].field == "labels-snapshot"
    assert check.mismatches[0].reason.startswith("label changed")


def test_verify_names_a_removed_and_an_added_label() -> None:
    removed = verify_certificate(statement(), spec_rows()[1:])
    assert not removed.match and removed.mismatches[0].reason.startswith("label removed")
    extra = {"item": "x99", "rater": "h1", "criterion": "default", "value": "a", "seq": 100}
    added = verify_certificate(statement(), [*spec_rows(), extra])
    assert not added.match and added.mismatches[0].reason.startswith("label added")


def test_verify_names_an_edited_epsilon_and_seed() -> None:
    s = statement()
    s["predicate"]["decision"]["epsilon"] = 0.3
    check = verify_certificate(s, spec_rows())
    assert not check.match and "decision.epsilon" in fields(check) and "report" in fields(check)
    s = statement()
    s["predicate"]["seeds"]["seed"] = 8
    check = verify_certificate(s, spec_rows())
    assert not check.match and "seeds.seed" in fields(check)


def test_verify_recomputes_the_result() -> None:
    """An edited result is caught by the recomputation, naming the field (not only by the digest)."""
    s = statement()
    s["predicate"]["result"]["judges"][0]["raters"][0]["won"] = True
    check = verify_certificate(s, spec_rows())
    assert "result.judges[0].raters[0].won" in fields(check)
    # and an untouched certificate recomputes to exactly its result
    s = statement()
    recomputed = certified_result(label_snapshot(spec_rows(), label_seq=160), s["predicate"])
    assert recomputed == s["predicate"]["result"]


@pytest.mark.parametrize(
    "broken, message",
    [
        ({"_type": "x"}, "in-toto Statement v1"),
        ({"predicateType": "x"}, "predicateType"),
        ({"predicate": {}}, "fields label_seq"),
        ({"subject": [{"name": "report", "digest": {"sha256": "0"}}]}, "labels-snapshot"),
    ],
)
def test_verify_refuses_what_is_not_a_certificate(broken: dict, message: str) -> None:
    s = copy.deepcopy(statement())
    s.update(broken)
    with pytest.raises(ValueError, match=message):
        verify_certificate(s, spec_rows())


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_verify_matches_its_own_labels_and_catches_any_single_edit(data: st.DataObject) -> None:
    """Invariant: a certificate re-derives from its labels; changing, dropping or adding any one label breaks it."""
    n_items = data.draw(st.integers(3, 12))
    values = data.draw(
        st.lists(st.lists(st.sampled_from(LABELS), min_size=4, max_size=4), min_size=n_items, max_size=n_items)
    )
    rows = [
        {"item": f"x{i}", "rater": r, "criterion": "default", "value": values[i][k], "seq": 4 * i + k + 1}
        for i in range(n_items)
        for k, r in enumerate(("h1", "h2", "h3", "judge"))
    ]
    settings_ = {
        **spec_settings(),
        "label_seq": len(rows),
        "seeds": {"seed": 1, "bit_generator": "PCG64", "n_resamples": 20},
    }
    s = certificate_statement(label_snapshot(rows, label_seq=len(rows)), settings_, certificate={"id": "c"})
    assert verify_certificate(s, rows).match
    k = data.draw(st.integers(0, len(rows) - 1))
    changed = [dict(r) for r in rows]
    changed[k]["value"] = next(v for v in LABELS if v != rows[k]["value"])
    dropped = rows[:k] + rows[k + 1 :]
    added = [*rows, {"item": "x99", "rater": "h1", "criterion": "default", "value": "a", "seq": 3}]
    for edited, kind in ((changed, "label changed"), (dropped, "label removed"), (added, "label added")):
        check = verify_certificate(s, edited)
        assert not check.match and check.mismatches[0].reason.startswith(kind)
