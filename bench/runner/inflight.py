"""The scheduler's tasks: per-provider queues of items to send, the tasks in flight, and the
queue that finished tasks report to."""

from __future__ import annotations

import asyncio
from typing import Callable, Coroutine, Generic, Iterable, Iterator, Literal, TypeVar

from bench.runner.plan import PendingItems, PlanItem

T = TypeVar("T")


class ItemQueue:
    """One provider's items still to send, read from an iterator one ahead (a queue of a
    100,000-row plan holds one item, not 100,000)."""

    def __init__(self, items: Iterator[PlanItem]) -> None:
        self._items = items
        self._next = next(items, None)

    def __bool__(self) -> bool:
        return self._next is not None

    def popleft(self) -> PlanItem:
        """The next item.

        Raises:
            IndexError: the queue is empty.
        """
        item = self._next
        if item is None:
            raise IndexError("pop from an empty queue")
        self._next = next(self._items, None)
        return item

    def clear(self) -> None:
        """Send nothing more."""
        self._items, self._next = iter(()), None


class InFlight(Generic[T]):
    """Queues and tasks of one run (one event loop).

    Args:
        todo: the items to send, in plan order (read as they are sent).
        providers: the provider ids with a queue (items of others are dropped).
    """

    def __init__(self, todo: PendingItems, providers: Iterable[str]) -> None:
        self.queues: dict[str, ItemQueue] = {
            pid: ItemQueue(todo.of_provider(pid)) for pid in providers}
        self.tasks: dict[asyncio.Task[T], PlanItem] = {}
        self.per_provider = {pid: 0 for pid in self.queues}
        # Finished tasks arrive here through their done-callbacks: O(1) per request, where
        # asyncio.wait() adds and removes a callback on every task in flight at each call.
        self.completed: asyncio.Queue[asyncio.Task[T]] = asyncio.Queue()

    def __len__(self) -> int:
        return len(self.tasks)

    def fill(self, start: Callable[[PlanItem], Coroutine[object, object, T]],
             cap: Callable[[str], int],
             budget: Callable[[int], Literal["send", "wait", "stop"]]
             ) -> Iterable[PlanItem]:
        """Start tasks while each provider is under ``cap(provider)`` and ``budget(tasks in
        flight)`` says ``send``; yield each item started. Stops at ``wait``; at ``stop``
        raises :class:`BudgetStop`."""
        loop = asyncio.get_running_loop()
        for pid, pending in self.queues.items():
            while pending and self.per_provider[pid] < cap(pid):
                decision = budget(len(self.tasks))
                if decision == "wait":
                    return
                if decision == "stop":
                    raise BudgetStop
                item = pending.popleft()
                task = loop.create_task(start(item))
                self.tasks[task] = item
                self.per_provider[pid] += 1
                task.add_done_callback(self.completed.put_nowait)
                yield item

    def finished(self, task: asyncio.Task[T]) -> PlanItem:
        """Forget a finished task; its item."""
        item = self.tasks.pop(task)
        self.per_provider[item.provider_id] -= 1
        return item

    def clear_queues(self, provider_id: str | None = None) -> None:
        """Send nothing more (to ``provider_id`` only, when given)."""
        for pid, pending in self.queues.items():
            if provider_id is None or pid == provider_id:
                pending.clear()

    def cancel(self) -> None:
        """Cancel every task in flight (its row is not written: a resume sends it again)."""
        for task in self.tasks:
            task.cancel()

    async def drain(self) -> None:
        """Wait for cancelled tasks to finish cancelling."""
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)


class BudgetStop(Exception):
    """A budget was reached: nothing more is sent."""
