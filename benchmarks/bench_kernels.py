"""The tfaccel kernels against the GPU's limits: vector_add against a device copy, the tiled
matmul against tf.matmul (cuBLAS, float32 with TF32 off), each tile size compared.

Targets (not results): vector_add >= 80% of the copy bandwidth, matmul >= 50% of cuBLAS
float32 for large sizes. Needs an NVIDIA GPU; elsewhere, and on the CUDA simulator, it says
why it skipped and exits 0.

    python benchmarks/bench_kernels.py [--sizes 1024 2048 4096] [--tiles 8 16 32]
                                       [--vector-sizes 16777216] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

from tfaccel.errors import TfaccelError
from tfaccel.kernels import KernelBackendError, bench


def _text(result: bench.KernelBenchResult) -> str:
    lines = [f"{result.device} (compute capability {result.compute_capability})", ""]
    lines.append(
        f"vector_add vs device copy (target >= {bench.TARGET_COPY_SHARE:.0%} of copy bandwidth)"
    )
    for row in result.vector_add:
        lines.append(
            f"  {row.elements:>11,} x {row.dtype}: {row.kernel_gb_per_s:8.1f} GB/s vs copy "
            f"{row.copy_gb_per_s:8.1f} GB/s = {row.share_of_copy:6.1%} "
            f"(noise +-{row.kernel_seconds.relative_iqr:.1%})"
            f"{'' if row.meets_target else '  below target'}"
        )
    lines.append("")
    lines.append(
        f"matmul vs tf.matmul/cuBLAS (target >= {bench.TARGET_CUBLAS_SHARE:.0%} for large sizes)"
    )
    for mm in result.matmul:
        lines.append(f"  {mm.size}^3 {mm.dtype}: cuBLAS {mm.cublas_tflops:7.2f} TFLOP/s")
        for tile in mm.tiles:
            best = "  <- best" if tile.tile == mm.best_tile else ""
            lines.append(
                f"    tile {tile.tile:>2}: {tile.tflops:7.2f} TFLOP/s = "
                f"{tile.share_of_cublas:6.1%} of cuBLAS (max rel. error "
                f"{tile.max_relative_error:.1e}){best}"
            )
    if result.notes:
        lines.append("")
        lines.extend(f"note: {note}" for note in result.notes)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(bench.DEFAULT_SIZES))
    parser.add_argument("--tiles", type=int, nargs="+", default=list(bench.DEFAULT_TILES))
    parser.add_argument(
        "--vector-sizes", type=int, nargs="+", default=list(bench.DEFAULT_VECTOR_SIZES)
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")
    args = parser.parse_args(argv)
    try:
        result = bench.run(
            sizes=args.sizes,
            tiles=args.tiles,
            vector_sizes=args.vector_sizes,
            repeats=args.repeats,
        )
    except KernelBackendError as exc:  # no GPU here: a skip, with the reason
        if args.json:
            print(json.dumps({"skipped": str(exc)}))
        print(f"skipped: {exc}", file=sys.stderr)
        return 0
    except TfaccelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(_text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
