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
        print(bench.render_text(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
