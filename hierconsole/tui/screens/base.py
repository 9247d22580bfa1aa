"""What every view shares: the tab and study lines, the footer, and reloading when the data changes.

A view reloads (in its own thread worker) when it is shown after a change it cares about, or at once if
it is showing. Views never query the store on the UI thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, ClassVar, TypeVar, cast

from textual import on
from textual.app import ComposeResult
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.worker import Worker

from hierconsole.tui.actions import PALETTE_HINT_WIDTH, footer_width
from hierconsole.tui.messages import JobEvents
from hierconsole.tui.widgets.chrome import ContextBar, NavBar, NoticeLine

if TYPE_CHECKING:
    from hierconsole.tui.app import HierConsole


_Screen = TypeVar("_Screen", bound="ConsoleScreen")
_Message = TypeVar("_Message", bound=Message)


def while_open(
    handler: Callable[[_Screen, _Message], None],
) -> Callable[[_Screen, _Message], None]:
    """A view's handler of its worker's result, dropped once the console is closing: a worker that
    finished just as the console quit would otherwise meet widgets already removed (a NoMatches traceback
    printed as the console ends)."""

    @functools.wraps(handler)
    def guarded(screen: _Screen, message: _Message) -> None:
        if not screen.closing:
            handler(screen, message)

    return guarded


class ConsoleScreen(Screen):
    SCOPE: ClassVar[str] = ""
    RELOAD_ON: ClassVar[frozenset[str]] = frozenset()
    """State changes ("queue", "study") that make this view reload."""
    RELOAD_ON_EVENTS: ClassVar[frozenset[str]] = frozenset()
    """Worker event kinds of the current study that make this view reload."""

    def __init__(self) -> None:
        super().__init__()
        self._stale = True

    @property
    def console_app(self) -> HierConsole:
        return cast("HierConsole", self.app)

    @property
    def closing(self) -> bool:
        """The console is closing (quit, or its browser session ended): a message or a mount that comes
        now finds this screen's widgets already removed, so it is dropped. (Textual's own flags: it has
        no public one, and a NoMatches traceback at shutdown is what a user would otherwise see.)"""
        # Textual's shutdown clears the app's `is_running` first, then prunes each screen's widgets
        # before the screen itself: a message dispatched in between sees none of them.
        app = self.app
        return self._closing or self._closed or app._closing or app._closed or not app.is_running

    def compose(self) -> ComposeResult:
        yield NavBar(self.SCOPE, id="nav")
        yield ContextBar(id="context")
        yield from self.compose_body()
        yield NoticeLine(id="notice")
        yield Footer(compact=True)

    def compose_body(self) -> Iterable[Widget]:
        return ()

    def on_mount(self) -> None:
        self.console_app.state_signal.subscribe(self, self._state_changed)
        self.console_app.events_signal.subscribe(self, self._events)

    def on_resize(self) -> None:
        # The palette hint goes before it would overlap the keys (ctrl+p still opens the palette).
        fits = footer_width(self.SCOPE) + PALETTE_HINT_WIDTH <= self.size.width
        footer = self.query_one(Footer)
        if footer.show_command_palette != fits:
            footer.show_command_palette = fits

    def on_screen_resume(self) -> None:
        if self._stale:
            self._stale = False
            self.reload()

    def _state_changed(self, what: str) -> None:
        if what in self.RELOAD_ON:
            self.mark_stale()

    def _events(self, message: JobEvents) -> None:
        if message.study_id == self.console_app.study_id and message.kinds & self.RELOAD_ON_EVENTS:
            self.mark_stale()

    def mark_stale(self) -> None:
        """Reload now if showing, else when next shown."""
        if self.is_current:
            self._stale = False
            self.reload()
        else:
            self._stale = True

    def reload(self) -> None:
        """Start the view's loading worker (override)."""

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        self.console_app.report_worker_error(event)


def view_width(scroll: Widget, fallback: int) -> int:
    """The cells a scrolling view lays its tables out for: its width less the vertical scrollbar's,
    reserved whether or not the bar shows (a table one cell too wide would clip its last number)."""
    width = scroll.size.width or fallback
    return max(width - scroll.styles.scrollbar_size_vertical, 20)
