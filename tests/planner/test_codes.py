"""planner.codes.code_type: the one compact type of label codes, read by the shared matrix of a
document's children, the plan draft's matrix, the report's pairs and the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from planner.codes import code_type


@pytest.mark.parametrize(
    ("n_labels", "expected"),
    [(2, np.int8), (100, np.int8), (126, np.int8), (127, np.int16), (32_766, np.int16), (32_767, np.int32)],
)
def test_the_code_type_is_the_smallest_holding_missing_the_labels_and_both_special_values(n_labels, expected):
    # By hand: codes run from -1 (missing) to n_labels + 1 (INVALID); int8 holds up to 127.
    assert code_type(n_labels) == np.dtype(expected)
    info = np.iinfo(code_type(n_labels))
    assert info.min <= -1 and n_labels + 1 <= info.max
