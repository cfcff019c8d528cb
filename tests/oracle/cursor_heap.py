"""Reference model of the broker's cursor container (docs §3.9), written from the Java classes.

``ManagedCursorContainer`` (2.10, 3.x, 4.0) and ``ManagedCursorContainerImpl`` (4.1, master) keep the
durable cursors in an ``ArrayList<Item>`` used as a binary min-heap: ``Item`` holds the cursor, its
position and its index in the list; the parent of index ``i`` is ``(i - 1) / 2``, the children ``2i + 1``
and ``2i + 2``. Modelled literally, item by item, with the same swaps:

* ``add``: append, then ``siftUp``: while the item is not at index 0 and its parent's position is greater
  (``compareTo > 0``), swap with the parent;
* ``cursorUpdated``: set the position; if the item is at index 0 or its parent's position is ``<=``, then
  ``siftDown``, else ``siftUp``;
* ``siftDown``: if the right child exists and is smaller than the item, swap with the left child when the
  left child is smaller than the right one, else with the right one; otherwise swap with the left child
  when it exists and is smaller than the item; stop when no swap;
* ``getSlowestConsumer``: the item at index 0.

Positions are ``(ledger_id, entry_id)`` tuples (Pulsar's order). Independent of the library's engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

Position = tuple[int, int]
T = TypeVar("T")


@dataclass
class Item(Generic[T]):
    """``ManagedCursorContainer.Item``: the cursor, the position the heap orders by, its list index."""

    cursor: T
    position: Position
    idx: int


class CursorContainer(Generic[T]):
    """The heap of one managed ledger's durable cursors."""

    def __init__(self) -> None:
        self.heap: list[Item[T]] = []
        self.items: dict[int, Item[T]] = {}  # id(cursor) -> item (the broker maps cursor names)

    def add(self, cursor: T, position: Position) -> None:
        item = Item(cursor, position, len(self.heap))
        self.items[id(cursor)] = item
        self.heap.append(item)
        if len(self.heap) > 1:
            self._sift_up(item)

    def cursor_updated(self, cursor: T, position: Position) -> None:
        item = self.items[id(cursor)]
        item.position = position
        if len(self.heap) == 1:
            return
        if item.idx == 0 or self._parent(item).position <= item.position:
            self._sift_down(item)
        else:
            self._sift_up(item)

    def slowest(self) -> T | None:
        return self.heap[0].cursor if self.heap else None

    def positions(self) -> list[Position]:
        """The heap array's positions, index by index."""
        return [item.position for item in self.heap]

    # -- Java's private helpers ------------------------------------------------------------------------
    def _parent(self, item: Item[T]) -> Item[T]:
        return self.heap[int((item.idx - 1) / 2)]  # Java int division: the root is its own parent

    def _left(self, item: Item[T]) -> Item[T] | None:
        i = item.idx * 2 + 1
        return self.heap[i] if i < len(self.heap) else None

    def _right(self, item: Item[T]) -> Item[T] | None:
        i = item.idx * 2 + 2
        return self.heap[i] if i < len(self.heap) else None

    def _swap(self, a: Item[T], b: Item[T]) -> None:
        ia, ib = a.idx, b.idx
        self.heap[ib], self.heap[ia] = a, b
        a.idx, b.idx = ib, ia

    def _sift_up(self, item: Item[T]) -> None:
        parent = self._parent(item)
        while item.idx > 0 and parent.position > item.position:
            self._swap(item, parent)
            parent = self._parent(item)

    def _sift_down(self, item: Item[T]) -> None:
        while True:
            j: Item[T] | None = None
            right = self._right(item)
            if right is not None and right.position < item.position:
                left = self._left(item)
                j = left if left is not None and left.position < right.position else right
            else:
                left = self._left(item)
                if left is not None and left.position < item.position:
                    j = left
            if j is None:
                return
            self._swap(item, j)
