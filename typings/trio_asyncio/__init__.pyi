import asyncio
import concurrent.futures
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar, TypeVarTuple, Unpack, overload

import trio

_T = TypeVar("_T")
_P = ParamSpec("_P")
_Ts = TypeVarTuple("_Ts")

__version__: str

class TrioAsyncioDeprecationWarning(FutureWarning): ...

class TrioExecutor(concurrent.futures.ThreadPoolExecutor):
    def __init__(
        self,
        limiter: trio.CapacityLimiter | None = None,
        thread_name_prefix: str | None = None,
        max_workers: int | None = None,
    ) -> None: ...
    async def submit(  # type: ignore[override]
        self, func: Callable[[Unpack[_Ts]], _T], *args: Unpack[_Ts]
    ) -> _T: ...
    def shutdown(self, wait: bool | None = None) -> None: ...  # type: ignore[override]

class BaseTrioEventLoop(asyncio.SelectorEventLoop):
    def __init__(self, queue_len: int | None = None) -> None: ...
    @staticmethod
    async def run_aio_future(future: asyncio.Future[_T]) -> _T: ...
    async def run_aio_coroutine(self, coro: Awaitable[_T]) -> _T: ...
    def trio_as_future(
        self, proc: Callable[[Unpack[_Ts]], Awaitable[_T]], *args: Unpack[_Ts]
    ) -> asyncio.Future[_T]: ...
    def run_trio_task(
        self, proc: Callable[[Unpack[_Ts]], Awaitable[object]], *args: Unpack[_Ts]
    ) -> asyncio.Handle: ...
    async def synchronize(self) -> None: ...
    def autoclose(self, fd: Any) -> None: ...
    def no_autoclose(self, fd: Any) -> None: ...
    async def wait_stopped(self) -> None: ...

class TrioEventLoop(BaseTrioEventLoop):
    def stop(self, waiter: trio.Event | None = None) -> trio.Event: ...  # type: ignore[override]

current_loop: ContextVar[BaseTrioEventLoop | None]

def open_loop(queue_len: int | None = None) -> AbstractAsyncContextManager[TrioEventLoop]: ...
def run(
    proc: Callable[[Unpack[_Ts]], Awaitable[_T]],
    *args: Unpack[_Ts],
    queue_len: int | None = None,
    clock: trio.abc.Clock | None = None,
    instruments: Sequence[trio.abc.Instrument] = (),
    restrict_keyboard_interrupt_to_checkpoints: bool = False,
    strict_exception_groups: bool = True,
) -> _T: ...
def run_trio_task(proc: Callable[[Unpack[_Ts]], Awaitable[object]], *args: Unpack[_Ts]) -> None: ...
def run_trio(proc: Callable[[Unpack[_Ts]], Awaitable[_T]], *args: Unpack[_Ts]) -> asyncio.Future[_T]: ...
async def run_aio_coroutine(coro: Awaitable[_T]) -> _T: ...
async def run_aio_future(future: asyncio.Future[_T]) -> _T: ...
def run_aio_generator(
    loop: BaseTrioEventLoop, async_generator: AsyncIterator[_T]
) -> AsyncGenerator[_T, None]: ...

# asyncio-flavoured -> Trio-flavoured. Call an async function through the wrapper,
# `await aio_as_trio(fn)(*args)`, rather than wrapping an awaitable, `await aio_as_trio(fn(*args))`:
# the first form creates the coroutine inside asyncio's context.
@overload
def aio_as_trio(
    proc: Callable[_P, Awaitable[_T]], *, loop: BaseTrioEventLoop | None = None
) -> Callable[_P, Awaitable[_T]]: ...
@overload
def aio_as_trio(proc: Awaitable[_T], *, loop: BaseTrioEventLoop | None = None) -> Awaitable[_T]: ...
@overload
def aio_as_trio(
    proc: AbstractAsyncContextManager[_T], *, loop: BaseTrioEventLoop | None = None
) -> AbstractAsyncContextManager[_T]: ...
@overload
def aio_as_trio(
    proc: AsyncIterable[_T], *, loop: BaseTrioEventLoop | None = None
) -> AsyncIterator[_T]: ...

asyncio_as_trio = aio_as_trio

# Trio-flavoured -> asyncio-flavoured.
@overload
def trio_as_aio(
    proc: Callable[_P, Awaitable[_T]], *, loop: BaseTrioEventLoop | None = None
) -> Callable[_P, asyncio.Future[_T]]: ...
@overload
def trio_as_aio(
    proc: AbstractAsyncContextManager[_T], *, loop: BaseTrioEventLoop | None = None
) -> AbstractAsyncContextManager[_T]: ...
@overload
def trio_as_aio(
    proc: AsyncIterable[_T], *, loop: BaseTrioEventLoop | None = None
) -> AsyncIterator[_T]: ...

trio_as_asyncio = trio_as_aio

async def allow_asyncio(fn: Callable[[Unpack[_Ts]], Awaitable[_T]], *args: Unpack[_Ts]) -> _T: ...
