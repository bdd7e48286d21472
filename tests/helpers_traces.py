"""Small hand-built traces for tests (built from the trace models, validated like a file)."""

from __future__ import annotations

from ctxsim.harness.model import trace as tr


def header(**kw) -> tr.Header:
    kw.setdefault("name", "test")
    kw.setdefault("system", "You are a coding agent.")
    kw.setdefault("tools", [tr.ToolSpec(name="Read", description="read a file"),
                            tr.ToolSpec(name="Bash", description="run a command")])
    return tr.Header(**kw)


class Builder:
    """Appends events with increasing time; ``call`` adds an assistant call with tool uses and
    their results."""

    def __init__(self, **hkw) -> None:
        self.h = header(**hkw)
        self.events: list = []
        self.t = 0.0
        self.n = 0

    def _tick(self, dt: float) -> float:
        self.t += dt
        return self.t

    def user(self, text: str, dt: float = 1.0) -> Builder:
        self.events.append(tr.UserEvent(t=self._tick(dt), text=text))
        return self

    def call(self, text: str = "ok", results: list[str] | None = None, dt: float = 2.0, tool: str = "Bash",
             inputs: list[dict] | None = None) -> Builder:
        uses = []
        for i, _ in enumerate(results or []):
            self.n += 1
            inp = (inputs or [{}] * len(results))[i] or {"command": f"cmd {self.n}"}
            uses.append(tr.ToolUseContent(id=f"tu_{self.n}", name=tool, input=inp))
        self.events.append(tr.AssistantEvent(t=self._tick(dt), content=[tr.TextContent(text=text), *uses]))
        for u, r in zip(uses, results or []):
            self.events.append(tr.ToolResultEvent(t=self._tick(0.5), tool_use_id=u.id, content=r))
        return self

    def event(self, ev) -> Builder:
        self.events.append(ev)
        return self

    def build(self) -> tr.Trace:
        return tr.validate_events(self.h, self.events, self.h.name)


def convo(steps: int) -> list:
    """A tool loop as messages: u0, a1(tool_use), r2(result), a3, r4, ... (2·steps + 1 messages;
    odd indices assistant, even >= 2 results)."""
    from ctxsim.harness.model.conversation import Block, Message

    out = [Message.user("task")]
    for i in range(steps):
        out.append(Message("assistant", (Block.tool_use(f"t{i}", "Bash", {"c": i}),)))
        out.append(Message("user", (Block.tool_result(f"t{i}", f"out {i}"),)))
    return out
