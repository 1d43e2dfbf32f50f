"""Keeps the GPU busy with bf16 matrix products for --seconds, then exits. Prints the rate."""
import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=20)
ap.add_argument("--size", type=int, default=8192)
args = ap.parse_args()
a = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
b = torch.randn(args.size, args.size, device="cuda", dtype=torch.bfloat16)
c = a @ b  # first product: cuBLAS set-up, outside the timed window
torch.cuda.synchronize()
start = time.monotonic()
print(f"matmul load: start {time.time():.3f} (epoch s)", flush=True)
n = 0
while time.monotonic() - start < args.seconds:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
elapsed = time.monotonic() - start
print(f"matmul load: {n} products of {args.size}^3 in {elapsed:.1f} s, "
      f"{2 * args.size ** 3 * n / elapsed / 1e12:.0f} TFLOP/s")
print(f"matmul load: end {time.time():.3f} (epoch s)", flush=True)
