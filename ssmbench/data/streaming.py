"""Old home of `TaskStream`, kept so that `from ssmbench.data.streaming import TaskStream` (README) keeps working;
the module is `ssmbench.data.read.streaming`."""

from __future__ import annotations

from .read.streaming import TaskStream as TaskStream
