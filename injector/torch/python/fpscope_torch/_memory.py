"""Tensor storages as allocations, as the dispatch mode sees them (the C++ observer follows storages
itself): first sight to the death of the last tensor known to use it, with what each holds."""
import ctypes
import weakref

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from . import _api

# A tensor's untyped storage: untyped_storage() from torch 2.0, _storage() in torch 1.13.
untyped_storage = getattr(torch.Tensor, "untyped_storage", None) or torch.Tensor._storage


def _weak_storage(storage):
    """A weak reference to a storage (expired() once PyTorch freed it), or None where one cannot be
    made."""
    try:
        return StorageWeakRef(storage)
    except (RuntimeError, TypeError, AttributeError):
        return None


class Memory:
    """Tensor storages as allocations: first sight to the death of the last tensor known to use it.

    A storage's users are the tensor objects the front end has seen on it (operator outputs, views,
    parameters, what autograd saved); each is counted once, and its death (a weak reference's
    callback) ends its use. The storage is freed when no user is left.
    """

    def __init__(self, lib):
        self._lib = lib
        self._live = {}   # storage address -> Allocation
        self._users = {}  # id(tensor) -> Allocation, for tensors alive
        self._refs = {}   # weak reference -> (id(tensor), the Allocation it uses)
        self._user_refs = {}  # id(tensor) -> its weak reference
        self.report_writes = None  # (address, bytes) -> None, when the injector reuses statistics

    def _release(self, ref):
        user, entry = self._refs.pop(ref, (None, None))
        self._users.pop(user, None)
        if self._user_refs.get(user) is ref:
            del self._user_refs[user]
        if entry is None:
            return
        if self._live.get(entry.address) is not entry:
            return  # freed already: its storage went while this tensor was on another
        entry.users -= 1
        if entry.users <= 0:
            del self._live[entry.address]
            self._lib.free_seen(entry.address)

    def adopt(self, t, category, name=b"", name_of=None, unknown_writes=False):
        """Counts `t` as a user of its storage (once); returns its Allocation, or None. A storage
        seen for the first time is named `name`, or name_of(t) when that is given. With
        `unknown_writes`, a tensor seen for the first time on memory already known (an input no
        watched operator made) has that memory reported written: it may be another storage now at
        the same address, or have been filled where the front end could not see."""
        entry = self._users.get(id(t))
        if entry is not None:
            # The same tensor on the same storage; `p.data = ...`, set_() or a growing resize_()
            # moves a tensor to another storage: it stops using the old one (which may be freed by
            # now, and another storage at the same address).
            try:
                if (t.data_ptr() - t.storage_offset() * t.element_size() == entry.address
                        and self._live.get(entry.address) is entry):
                    return entry
            except (RuntimeError, NotImplementedError):
                return entry
            self._release(self._user_refs.get(id(t)))
        if t.layout != torch.strided or t.is_meta:
            return None
        try:
            storage = untyped_storage(t)  # storage() would wrap it in a TypedStorage
            address, nbytes = storage.data_ptr(), storage.nbytes()
        except (RuntimeError, NotImplementedError):
            return None
        if address == 0:
            return None
        entry = self._live.get(address)
        if entry is not None and entry.storage is not None and entry.storage.expired():
            # Its storage went without a sign (every tensor the front end knew on it had moved to
            # another: `p.data = ...`, set_()): freed then, and this is another one.
            del self._live[address]
            self._lib.free_seen(address)
            entry = None
        if entry is not None and unknown_writes and self.report_writes is not None:
            self.report_writes(address, nbytes)
        if entry is None:
            device = _api.DEVICE_CUDA if t.is_cuda else _api.DEVICE_CPU
            if name_of is not None:
                name = name_of(t)
            ident = self._lib.alloc_seen(address, nbytes, device, category, name)
            if ident == 0:
                return None
            entry = self._live[address] = Allocation(ident, category, name, address, _weak_storage(storage))
        entry.users += 1
        self._users[id(t)] = entry
        ref = weakref.ref(t, self._release)
        self._refs[ref] = (id(t), entry)
        self._user_refs[id(t)] = ref
        return entry

    def reports_writes(self, on):
        """The injector reuses statistics (on): writes to memory first seen as data are reported."""
        self.report_writes = self._lib.memory_written if on else None

    def label(self, t, category, name):
        """Says what a tensor's storage holds (relabels it when it was first seen as something else)."""
        entry = self.adopt(t, category, name)
        if entry is not None and (entry.category != category or entry.name != name):
            entry.category = category
            entry.set_name(name)
            self._lib.relabel(entry.ident, category, name)

    def initialized_all(self):
        for entry in self._live.values():
            entry.uninitialized = False

    def seen(self, t):
        if id(t) in self._users:
            return True
        try:
            return untyped_storage(t).data_ptr() in self._live
        except (RuntimeError, NotImplementedError):
            return False


class Allocation:
    __slots__ = ("ident", "users", "storage", "category", "name", "name_address", "_name_buffer", "uninitialized",
                 "address")

    def __init__(self, ident, category, name, address, storage):
        self.ident = ident
        self.address = address
        self.users = 0
        self.storage = storage  # _weak_storage() of it: expired once PyTorch freed it
        self.category = category
        self.set_name(name)
        # Made by torch.empty and kin and not written by any operator since: what it holds is
        # whatever the memory held before, so it is never measured.
        self.uninitialized = False

    def set_name(self, name):
        self.name = name
        self._name_buffer = ctypes.create_string_buffer(name) if name else None
        self.name_address = ctypes.addressof(self._name_buffer) if name else 0
