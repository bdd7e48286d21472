"""History, the persistent vector of messages: a version reads only its own messages."""

from ctxsim.harness.model.conversation import History, Message
from hypothesis import given
from hypothesis import strategies as st

_IDX = st.one_of(st.none(), st.integers(-14, 14))


@given(st.integers(0, 12), st.integers(0, 12), _IDX, _IDX, st.one_of(st.none(), st.integers(-3, 3).filter(bool)))
def test_a_slice_of_a_version_is_the_slice_of_its_messages(total, n, start, stop, step):
    """A slice of a truncated version (one sharing a longer store) is exactly the list's slice of
    its own messages, every start, stop and step; it is taken from the store without copying it."""
    msgs = [Message.user(str(i)) for i in range(total)]
    h = History(msgs).truncate(n)
    assert h[start:stop:step] == tuple(msgs[:n][start:stop:step])
