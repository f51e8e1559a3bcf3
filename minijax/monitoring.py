"""Events and their listeners: a program records named events, durations, time spans and
scalars, and every registered listener of that kind is called with them (a metrics exporter,
a test). Mirrors jax/_src/monitoring.py (re-exported as jax/monitoring.py); minijax itself
records no events of its own.
"""

from __future__ import annotations

from typing import Callable

_event_listeners: list[Callable] = []
_event_duration_secs_listeners: list[Callable] = []
_event_time_span_listeners: list[Callable] = []
_scalar_listeners: list[Callable] = []


# JAX: jax/_src/monitoring.py record_event
def record_event(event: str, **kwargs: str | int) -> None:
    """Call each event listener as `listener(event, **kwargs)`."""
    for callback in list(_event_listeners):
        callback(event, **kwargs)


# JAX: jax/_src/monitoring.py record_event_duration_secs
def record_event_duration_secs(event: str, duration: float, **kwargs: str | int) -> None:
    """Call each duration listener as `listener(event, duration, **kwargs)` (seconds)."""
    for callback in list(_event_duration_secs_listeners):
        callback(event, duration, **kwargs)


# JAX: jax/_src/monitoring.py record_event_time_span
def record_event_time_span(event: str, start_time: float, end_time: float,
                           **kwargs: str | int) -> None:
    """Call each time-span listener as `listener(event, start_time, end_time, **kwargs)`."""
    for callback in list(_event_time_span_listeners):
        callback(event, start_time, end_time, **kwargs)


# JAX: jax/_src/monitoring.py record_scalar
def record_scalar(event: str, value: float | int, **kwargs: str | int) -> None:
    """Call each scalar listener as `listener(event, value, **kwargs)`."""
    for callback in list(_scalar_listeners):
        callback(event, value, **kwargs)


def register_event_listener(callback: Callable) -> None:
    _event_listeners.append(callback)


def register_event_duration_secs_listener(callback: Callable) -> None:
    _event_duration_secs_listeners.append(callback)


def register_event_time_span_listener(callback: Callable) -> None:
    _event_time_span_listeners.append(callback)


def register_scalar_listener(callback: Callable) -> None:
    _scalar_listeners.append(callback)


def _unregister(listeners: list, callback: Callable, kind: str) -> None:
    if callback not in listeners:  # JAX asserts the same
        raise AssertionError(f"{callback} is not a registered {kind} listener")
    listeners.remove(callback)


def unregister_event_listener(callback: Callable) -> None:
    _unregister(_event_listeners, callback, "event")


def unregister_event_duration_listener(callback: Callable) -> None:
    _unregister(_event_duration_secs_listeners, callback, "event duration")


def unregister_event_time_span_listener(callback: Callable) -> None:
    _unregister(_event_time_span_listeners, callback, "event time span")


def unregister_scalar_listener(callback: Callable) -> None:
    _unregister(_scalar_listeners, callback, "scalar")


# JAX: jax/_src/monitoring.py clear_event_listeners
def clear_event_listeners() -> None:
    """Unregister every listener of every kind."""
    for listeners in (_event_listeners, _event_duration_secs_listeners,
                      _event_time_span_listeners, _scalar_listeners):
        listeners.clear()
