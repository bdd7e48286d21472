"""Strict, located JSON (harness/files/strictjson.py): the offsets worked out by hand."""

import pytest
from ctxsim.harness.files import strictjson as sj

DOC = '{\n  "a": [1,\n    {"b": 2, "c": "x,]}\\""}],\n  "d": 5\n}'


@pytest.mark.parametrize("node,where", [(("a",), (2, 8)), (("a", 1, "c"), (3, 19)), (("d",), (4, 8)),
                                        (("a", 1, "zz"), (3, 5)), (("a", 5), (2, 8)), ((), (1, 1))])
def test_node_line_col(node, where):
    # "a"'s list opens at line 2 column 8; "c"'s string at line 3 column 19 (past a string holding ,]})
    assert sj.node_line_col(DOC, node) == where   # a missing node: its nearest parent


@pytest.mark.parametrize("text,pos,what", [('{"a": NaN}', 6, "NaN is not a JSON number"),
                                           ('[1, -Infinity]', 4, "-Infinity is not a JSON number"),
                                           ('{"t": 1e400}', 6, "1e400 is out of range"),
                                           ('{"a": ' + "9" * 5000 + "}", 6, "thousands of digits"),
                                           ('{"x": ' + "[" * 5000 + "]" * 5000 + "}", 6 + sj.MAX_DEPTH - 1, "nested"),
                                           ('{"a": 1,', 8, "not JSON")])
def test_refusals_carry_their_offset(text, pos, what):
    with pytest.raises(sj.BadJSON) as e:
        sj.loads(text)
    assert what in e.value.what and e.value.pos == pos
