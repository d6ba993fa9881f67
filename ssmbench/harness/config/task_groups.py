"""Task groups and what `--task` names: a task, a group (`atomic`, `table1`, ...) or several of either.

Groups are declared by the tasks (`policy.groups`: {"atomic": 0, "table1": 0}; every task is in "all"), never listed
here.

Example:
    >>> expand_tasks("shift,cumsum")
    ['shift', 'cumsum']
    >>> expand_tasks("table1")[:3]
    ['shift', 'cumsum', 'cummax']
    >>> expand_tasks("higher_order")
    ['listops_subtrees', 'pathfinder']
    >>> "atomic" in group_names(), "shift" in group_names()
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable

from ...errors import ConfigError, UnknownNameError
from ...registry import tasks as task_registry

ALL = "all"


def task_groups() -> dict[str, list[str]]:
    """Group name -> its tasks in order (position, then name), from every registered task's `groups`."""
    members: dict[str, list[tuple[int, str]]] = {ALL: []}
    for name in task_registry.names():
        cls = task_registry.get(name)
        members[ALL].append((len(members[ALL]), name))
        for group, position in cls.policy.groups.items():
            members.setdefault(group, []).append((int(position), name))
    return {group: [name for _, name in sorted(items)] for group, items in members.items()}


def task_order() -> Callable[[str], tuple[int, int, str]]:
    """A sort key for task names: groups in the order they first appear in the registry, tasks by their position
    in their group (the atomic tasks in the paper's Table 1 order, then the higher-order tasks), then the rest."""
    names = task_registry.names()
    first: dict[str, int] = {}
    keys: dict[str, tuple[int, int]] = {}
    for index, name in enumerate(names):
        groups = task_registry.get(name).policy.groups
        for group in groups:
            first.setdefault(group, index)
        keys[name] = min(((first[g], int(p)) for g, p in groups.items()), default=(index, 0))

    def key(name: str) -> tuple[int, int, str]:
        return (*keys.get(name, (len(names), 0)), name)

    return key


def expand_tasks(text: str) -> list[str]:
    """Task names for `--task`: a name, a group, or several of either separated by commas (order kept, no
    repeats); an unknown one is a usage error with a did-you-mean over tasks and groups."""
    groups = task_groups()
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            raise ConfigError("--task", f"empty name in {text!r}", "separate task or group names with commas")
        if part in groups and part not in task_registry:
            found = groups[part]
        elif part in task_registry:
            found = [task_registry.canonical(part)]
        elif ":" in part:  # a plug-in task given as module:Class
            found = [part]
        else:
            raise unknown_task(part)
        out.extend(name for name in found if name not in out)
    return out


def group_names() -> frozenset[str]:
    """The names `--task` takes as a group: every group that is not also a task's name (a task's name is the task).
    Made without looking at any one name, so a caller can tell a group from a task without handing the name on."""
    return frozenset(task_groups()) - frozenset(task_registry.names())


def unknown_task(name: str) -> UnknownNameError:
    """The error for a `--task` that is neither a task nor a group: did-you-mean over both."""
    return UnknownNameError("task", name, [*task_registry.names(), *task_groups()])
