"""Launch configurations (grid, block) from the shapes and the device's limits.

Pure functions of numbers, so every rule is tested without a device. A CUDA launch runs a
*grid* of *blocks*; every block has the same number of *threads*, at most
``max_threads_per_block`` (1024 on every GPU since compute capability 2.0), and the grid
has at most ``max_grid_x`` blocks along x and ``max_grid_y`` along y.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfaccel.core.errors import UsageError

__all__ = [
    "SIMULATOR_LIMITS",
    "DeviceLimits",
    "Launch",
    "bias_relu_launch",
    "finish_reduce_launch",
    "matmul_launch",
    "reduce_launch",
    "vector_launch",
]

WARP = 32
VECTOR_THREADS = 256  # a common choice: 8 warps per block, enough blocks per SM
REDUCE_THREADS = 256
ELEMENTWISE_BLOCK = (32, 8)  # 32 columns (one warp reads one row segment) x 8 rows


@dataclass(frozen=True)
class DeviceLimits:
    """What a launch may ask of the device.

    Attributes:
        max_threads_per_block: ``CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK``.
        max_grid_x: ``CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X``.
        max_grid_y: ``CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y``.
        max_shared_bytes_per_block: ``CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK``.
        resident_threads: the threads the whole device holds at once, one *wave*
            (``CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`` x
            ``CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR``); None where unknown
            (the simulator), and then no launch is capped by it.
    """

    max_threads_per_block: int
    max_grid_x: int
    max_grid_y: int
    max_shared_bytes_per_block: int
    resident_threads: int | None = None


# The simulator reports no attributes; these are the limits of every GPU since CC 3.0.
SIMULATOR_LIMITS = DeviceLimits(
    max_threads_per_block=1024,
    max_grid_x=2**31 - 1,
    max_grid_y=65535,
    max_shared_bytes_per_block=48 * 1024,
)


@dataclass(frozen=True)
class Launch:
    """A launch configuration: ``kernel[grid, block](...)``."""

    grid: tuple[int, ...]
    block: tuple[int, ...]

    @property
    def threads(self) -> int:
        total = 1
        for n in (*self.grid, *self.block):
            total *= n
        return total


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def vector_launch(n: int, limits: DeviceLimits) -> Launch:
    """Blocks of up to 256 threads, no more of them than the device holds at once (one wave);
    each thread loops over the elements a grid's width apart (the grid-stride loop).

    A short vector gets one thread per element, in a block rounded up to a whole warp. A long
    one gets one wave of threads rather than one thread per element: on an H200 that moved
    3650 GB/s where a thread per element (a million blocks for 2^28 elements) moved 2134, a
    device-to-device copy 4029 (docs/kernels.md).
    """
    threads = min(VECTOR_THREADS, limits.max_threads_per_block, _ceil_div(n, WARP) * WARP)
    blocks = min(_ceil_div(n, threads), limits.max_grid_x)
    if limits.resident_threads is not None:
        blocks = min(blocks, max(1, limits.resident_threads // threads))
    return Launch(grid=(blocks,), block=(threads,))


def reduce_launch(n: int, limits: DeviceLimits) -> Launch:
    """A tree reduction: a power-of-two block, and no more blocks than one block can sum.

    Each block writes one partial sum; keeping ``blocks <= max_threads_per_block`` lets a
    second launch of a single block sum the partials. Threads loop over the input
    (grid-stride), so any length fits.
    """
    threads = min(REDUCE_THREADS, limits.max_threads_per_block, _next_power_of_two(n))
    threads = max(threads, min(WARP, limits.max_threads_per_block))
    cap = 1 << (limits.max_threads_per_block.bit_length() - 1)  # largest power of two
    blocks = min(_ceil_div(n, threads), cap, limits.max_grid_x)
    return Launch(grid=(blocks,), block=(threads,))


def finish_reduce_launch(partials: int, limits: DeviceLimits) -> Launch:
    """The second pass of ``reduce_sum``: one block that sums ``partials`` values."""
    threads = max(min(WARP, limits.max_threads_per_block), _next_power_of_two(partials))
    return Launch(grid=(1,), block=(threads,))


def matmul_launch(
    m: int, n: int, tile: int, itemsize: int, limits: DeviceLimits, per_thread: int = 1
) -> Launch:
    """A (tile, tile) block per (tile * per_thread)-square tile of the (m, n) result: one
    output per thread, or per_thread x per_thread of them.

    x indexes columns and y rows, so neighbouring threads read neighbouring addresses.

    Raises:
        UsageError: tile*tile threads exceed the block limit, two tiles exceed shared
            memory, or the result needs more blocks than the grid allows.
    """
    if tile * tile > limits.max_threads_per_block:
        largest = int(limits.max_threads_per_block**0.5)
        raise UsageError(
            f"matmul: tile={tile} needs tile*tile = {tile * tile} threads per block, "
            f"more than this device allows",
            expected=f"tile*tile <= {limits.max_threads_per_block} (tile <= {largest})",
            received=f"tile={tile}",
            fix=f"pass tile={min(largest, 16)}",
        )
    side = tile * per_thread
    shared = 2 * side * tile * itemsize
    if shared > limits.max_shared_bytes_per_block:
        raise UsageError(
            f"matmul: two {side}x{tile} tiles need {shared} bytes of shared memory per block",
            expected=f"at most {limits.max_shared_bytes_per_block} bytes",
            received=f"tile={tile}, per_thread={per_thread}, itemsize={itemsize}",
            fix="pass a smaller tile or per_thread, e.g. tile=16",
        )
    grid = (_ceil_div(n, side), _ceil_div(m, side))
    if grid[0] > limits.max_grid_x or grid[1] > limits.max_grid_y:
        raise UsageError(
            "matmul: the result needs more blocks than one launch allows",
            expected=f"at most {limits.max_grid_x} x {limits.max_grid_y} blocks of {side}x{side}",
            received=f"a result of shape ({m}, {n}): {grid[0]} x {grid[1]} blocks",
            fix="use a larger tile, or split a into row blocks and call matmul on each",
        )
    return Launch(grid=grid, block=(tile, tile))


def bias_relu_launch(m: int, n: int, limits: DeviceLimits) -> Launch:
    """A 2-D grid over (columns, rows), capped at the grid limits (the kernel loops).

    Blocks are (32, 8) threads, narrowed to the shape when it is smaller.
    """
    bx = max(1, min(ELEMENTWISE_BLOCK[0], n, limits.max_threads_per_block))
    by = max(1, min(ELEMENTWISE_BLOCK[1], m, limits.max_threads_per_block // bx))
    grid = (min(_ceil_div(n, bx), limits.max_grid_x), min(_ceil_div(m, by), limits.max_grid_y))
    return Launch(grid=grid, block=(bx, by))
