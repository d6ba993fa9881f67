"""How many training steps a data worker stacks into one message, sized for the shared-memory rings the messages
travel through (`ssmbench.data.read.ring`): a message costs the training process some host time whatever its size,
so fewer, larger messages are cheaper, as long as the ring of every worker on the machine holds one slot for each
message in flight.

Example (the paper's cumsum batch, 1 MiB a step; a 64 MiB ring and 4 messages read ahead):
    >>> from ssmbench.task_config import ResolvedTask
    >>> cumsum = ResolvedTask.of("cumsum", {"L": 4096}).spec
    >>> auto_steps_per_message(cumsum, 16, max_bytes=message_bytes(4, ring_bytes=64 << 20))
    10
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.read.ring import MIN_SLOTS

if TYPE_CHECKING:
    from ...api import Spec

MESSAGE_BYTES = 16 << 20
"""Target size of one worker message (several steps stacked)."""
MAX_STEPS_PER_MESSAGE = 16


def auto_steps_per_message(spec: Spec, batch_size: int, max_bytes: int = MESSAGE_BYTES) -> int:
    """How many steps a worker stacks into one message of the task whose Spec is `spec` (the run's, made once): as
    many as fit `max_bytes`, at most 16.

    >>> from ssmbench.task_config import ResolvedTask
    >>> cumsum = ResolvedTask.of("cumsum", {"L": 4096}).spec
    >>> auto_steps_per_message(cumsum, 16)  # 16 x 4096 x (3 + 1) float32 = 1 MiB a step
    16
    >>> auto_steps_per_message(cumsum, 16, max_bytes=message_bytes(4, ring_bytes=64 << 20))
    10
    >>> auto_steps_per_message(ResolvedTask.of("cumsum", {"L": 64}).spec, 16)
    16
    """
    step_bytes = 4 * batch_size * (spec.seq_len * spec.d_input + spec.l_output * spec.d_output)
    return max(1, min(MAX_STEPS_PER_MESSAGE, max_bytes // max(1, step_bytes)))


def message_bytes(prefetch: int, ring_bytes: int | None = None, workers: int = 1) -> int:
    """The largest message a worker should make: MESSAGE_BYTES, or less so that its shared-memory ring holds one slot
    for each message read ahead (`prefetch`), the one being consumed and the one being made (and at least the four
    slots without which no ring is made), with 1/64 of the ring to spare (its header, the slots' alignment, and the
    /dev/shm space the DataLoader's own queues take after this is sized). `ring_bytes` defaults to the smallest ring
    of `workers` workers (`ring.ring_budgets`): a message that finds no free slot takes the slower way (new shared
    memory, a descriptor passed over a socket, an unmap), and a ring that cannot hold four slots is not made at all.
    With 16 MiB messages, 4 slots and 4 read ahead, 28 of 97 messages went that way to a staged feed taking a step
    every 4 ms (16 of 109 to a plain one); with 10-step messages and 6 slots, 1 of 160 (and no sampled batch of the
    plain feed).

    >>> message_bytes(4, ring_bytes=64 << 20) / 2 ** 20, message_bytes(1, ring_bytes=1 << 30) / 2 ** 20
    (10.5, 16.0)
    """
    if ring_bytes is None:
        from ...data.read.ring import ring_budgets, shm_free

        ring_bytes = min(ring_budgets(workers, shm_free()))
    slots = max(MIN_SLOTS, max(1, prefetch) + 2)  # a ring of fewer slots is never made
    return min(MESSAGE_BYTES, (ring_bytes - ring_bytes // 64) // slots)


def node_workers(workers: int, local_processes: int = 1) -> int:
    """The data workers of every training process on this machine: `workers` a process times `local_processes`
    (torchrun's LOCAL_WORLD_SIZE; 1 outside torchrun). All of them make their rings in the one /dev/shm, so each rank
    sizes its messages for the smallest ring of them all. (Sized for its own 4 workers alone, each of 8 ranks on a
    1 GiB /dev/shm would make 10-step messages at the paper's setting, which 20 of the 32 rings, 3.0-37.5 MiB, cannot
    hold four of: those rings are not made, and their workers send each message through new shared memory in a
    /dev/shm the other rings have nearly filled. Sized for all 32, messages hold one step, 29 rings are made, and the
    run names the /dev/shm size that gives ten.)

    >>> node_workers(4, local_processes=8), node_workers(4), node_workers(0, 8)
    (32, 4, 0)
    """
    return max(0, workers) * max(1, local_processes)
