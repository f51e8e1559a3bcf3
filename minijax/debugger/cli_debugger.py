"""The text debugger `debug.breakpoint` opens by default (backend `cli`): a `cmd.Cmd` loop
over the captured frames, reading commands from stdin (or the `stdin=` stream given to
`breakpoint`). Commands: an expression (or `p expr`, `pp expr`) evaluated over the frame's
variables; `u`/`up`, `d`/`down` to move between frames; `l`/`list` for the source around the
line; `w`/`where`/`bt` for the stack; `c`/`continue` to let the program go on; `q`/`quit` (and
end of input) to exit. Mirrors jax/_src/debugger/cli_debugger.py; chapters/15-debugging.md.
"""

from __future__ import annotations

import cmd
import pprint
import sys
import traceback
from typing import IO, Any

from minijax.debugger.core import DebuggerFrame, register_debugger


# JAX: jax/_src/debugger/cli_debugger.py CliDebugger
class CliDebugger(cmd.Cmd):
    """One debugger session over `frames` (innermost first)."""

    prompt = "(jdb) "

    def __init__(self, frames: list[DebuggerFrame], thread_id: int | None,
                 stdin: IO[str] | None = None, stdout: IO[str] | None = None,
                 completekey: str = "tab"):
        super().__init__(completekey=completekey, stdin=stdin, stdout=stdout)
        self.use_rawinput = stdin is None  # a given stream is read line by line
        self.frames, self.frame_index, self.thread_id = frames, 0, thread_id
        self.intro = "Entering jdb:"

    def _say(self, text: str) -> None:
        print(text, file=self.stdout)

    def evaluate(self, expr: str):
        frame = self.frames[self.frame_index]
        return eval(expr, {}, {**frame.globals, **frame.locals})  # the user's input: the point

    def _show(self, expr: str, fmt) -> None:
        try:
            self._say(fmt(self.evaluate(expr)))
        except Exception:  # any error is the user's to read
            kind, err = sys.exc_info()[:2]
            self._say("*** " + traceback.format_exception_only(kind, err)[-1].strip())

    def default(self, line: str) -> None:
        self._show(line, repr)

    def do_p(self, arg: str) -> None:
        """p expression: print the expression's value."""
        self._show(arg, repr)

    def do_pp(self, arg: str) -> None:
        """pp expression: pretty-print the expression's value."""
        self._show(arg, pprint.pformat)

    def print_context(self, num_lines: int = 2) -> None:
        frame = self.frames[self.frame_index]
        out = [f"> {frame.filename}({frame.lineno})"]
        if frame.offset is not None:  # no source (code made by eval): the header only
            lo, hi = frame.offset - 1 - num_lines, frame.offset + num_lines
            out += [("->  " if i == frame.offset else "    ") + line
                    for i, line in enumerate(frame.source) if lo <= i <= hi]
        self._say("\n".join(out))

    def print_backtrace(self) -> None:
        out = ["Traceback:"]
        for f in reversed(self.frames):
            out.append(f'  File "{f.filename}", line {f.lineno}')
            out.append("    <no source>" if f.offset is None else
                       "    " + f.source[f.offset].strip())
        self._say("\n".join(out))

    def do_up(self, arg: str) -> None:
        """u(p): move one frame up (toward the caller)."""
        if self.frame_index == len(self.frames) - 1:
            self._say("At topmost frame.")
        else:
            self.frame_index += 1
        self.print_context()

    def do_down(self, arg: str) -> None:
        """d(own): move one frame down (toward the breakpoint)."""
        if self.frame_index == 0:
            self._say("At bottommost frame.")
        else:
            self.frame_index -= 1
        self.print_context()

    def do_list(self, arg: str) -> None:
        """l(ist): the source around the current line."""
        self.print_context(num_lines=5)

    def do_where(self, arg: str) -> None:
        """w(here), bt: the stack, innermost frame last."""
        self.print_backtrace()

    def do_continue(self, arg: str) -> bool:
        """c(ont(inue)): leave the debugger; the program goes on."""
        return True

    def do_quit(self, arg: str) -> None:
        """q(uit), exit: leave the debugger and the program (SystemExit)."""
        sys.exit(0)

    do_u, do_d, do_l = do_up, do_down, do_list
    do_w = do_bt = do_where
    do_c = do_cont = do_continue
    do_q = do_exit = do_EOF = do_quit

    def run(self) -> None:
        while True:
            try:
                self.cmdloop()
                return
            except KeyboardInterrupt:
                print("--KeyboardInterrupt--", file=sys.stdout)


# JAX: jax/_src/debugger/cli_debugger.py run_debugger
def run_debugger(frames: list[DebuggerFrame], thread_id: int | None, **kwargs: Any) -> None:
    CliDebugger(frames, thread_id, **kwargs).run()


register_debugger("cli", run_debugger, -1)
