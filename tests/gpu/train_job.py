"""A real training job for the GPU host checks: ResNet-18 (or -50) on images read from files by
a multi-worker DataLoader, reporting through stallwatch.watch(). Each sample is a file of raw
bytes; after reading it the worker drops it from the page cache (posix_fadvise DONTNEED), so
every epoch reads from the device, as a dataset far larger than memory would.

The input side can be varied one knob at a time (issue 31's A/B runs): the workers, the CPU
work per sample (--decode-us), a remote fetch's latency per sample (--fetch-ms, the worker
asleep), data held in memory instead of read (--in-memory), CPU work in the main thread per
step (--main-cpu-ms). --step-log writes each step's end time, the time the loop waited for
that step's batch and the time the step took, as the job itself measured them: the account
stallwatch's input-wait share is held against.

Usage: python3 train_job.py DATA_DIR [--seconds 30] [--workers 4] [--batch 64]"""

import argparse
import os
import threading
import time

import torch
import torchvision

import stallwatch

IMAGE_BYTES = 3 * 112 * 112


class FileDataset(torch.utils.data.Dataset):
    def __init__(self, root, decode_us=0, fetch_ms=0):
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".bin"))
        self.decode_s = decode_us / 1e6
        self.fetch_s = fetch_ms / 1e3

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        fd = os.open(self.paths[i], os.O_RDONLY)
        try:
            data = os.read(fd, IMAGE_BYTES)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        if self.fetch_s:
            time.sleep(self.fetch_s)  # a remote fetch: the worker waits, neither CPU nor disk
        x = torch.frombuffer(bytearray(data), dtype=torch.uint8).float().view(3, 112, 112) / 255.0
        # Stands for image decoding and augmentation: CPU work per sample in the worker.
        end = time.perf_counter() + self.decode_s
        while time.perf_counter() < end:
            pass
        return x, i % 1000


class MemoryDataset(torch.utils.data.Dataset):
    """The same samples, already in memory: nothing to read or decode (a GPU-bound input)."""

    def __init__(self, count=4096):
        self.data = torch.rand(count, 3, 112, 112)

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        return self.data[i % len(self.data)], i % 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--decode-us", type=float, default=0, help="CPU work per sample in the workers")
    ap.add_argument("--fetch-ms", type=float, default=0,
                    help="a remote fetch per sample: the worker sleeps this long")
    ap.add_argument("--in-memory", action="store_true", help="samples held in memory, not read")
    ap.add_argument("--main-cpu-ms", type=float, default=0,
                    help="CPU work in the main thread per step, outside the GPU's work")
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "resnet50"])
    ap.add_argument("--bf16", action="store_true", help="autocast to bfloat16")
    ap.add_argument("--size", type=int, default=112, help="images are resized to this on the GPU")
    ap.add_argument("--step-log", help="append each step's end time (epoch seconds) to this file")
    ap.add_argument("--no-hook", action="store_true", help="do not report through stallwatch.watch()")
    ap.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True), as most scripts set")
    ap.add_argument("--linger", type=float, default=0,
                    help="after training, stay this long with the model on the GPU and the DataLoader's "
                         "workers alive and idle before exiting (a job winding down)")
    ap.add_argument("--checkpoint-at", type=float, default=0,
                    help="this many seconds into training, save a checkpoint (torch.save of "
                         "--checkpoint-gb of tensors, then os.sync) and print its start and end")
    ap.add_argument("--checkpoint-gb", type=float, default=3)
    ap.add_argument("--checkpoint-dir", default="/var/tmp")
    ap.add_argument("--eval-at", type=float, default=0,
                    help="this many seconds into training, evaluate for --eval-seconds (the model in "
                         "eval mode over the same files, no steps reported) and print its start and end")
    ap.add_argument("--eval-seconds", type=float, default=15)
    ap.add_argument("--hang-at", type=float, default=0,
                    help="this many seconds into training, block the training loop on a lock that "
                         "nobody releases for --hang-seconds (a deadlock that times out), every "
                         "thread asleep, and print its start and end")
    ap.add_argument("--hang-seconds", type=float, default=40)
    args = ap.parse_args()
    hang_done = args.hang_at <= 0
    checkpoint_done = args.checkpoint_at <= 0
    eval_done = args.eval_at <= 0
    dataset = MemoryDataset() if args.in_memory else FileDataset(args.data, args.decode_us, args.fetch_ms)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch,
                                         shuffle=not args.in_memory, num_workers=args.workers,
                                         persistent_workers=args.workers > 0, drop_last=True,
                                         pin_memory=args.pin_memory)
    # Its own loader: a second iterator over a persistent-workers loader would reset the first.
    eval_loader = torch.utils.data.DataLoader(FileDataset(args.data, args.decode_us), batch_size=args.batch,
                                              num_workers=max(1, args.workers // 2)) if not eval_done else None
    model = getattr(torchvision.models, args.model)(num_classes=1000).cuda()
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.time()
    print(f"train_job: pid {os.getpid()} start {start:.3f}", flush=True)
    steps = 0
    step_log = open(args.step_log, "w") if args.step_log else None
    while time.time() - start < args.seconds:
        batches = iter(loader if args.no_hook else stallwatch.watch(loader))
        while True:
            asked = time.time()
            try:
                x, y = next(batches)
            except StopIteration:
                break
            got = time.time()
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            if args.size != 112:
                x = torch.nn.functional.interpolate(x, size=(args.size, args.size), mode="bilinear")
            x = x.contiguous(memory_format=torch.channels_last)
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16):
                loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            if args.main_cpu_ms:
                end_cpu = time.perf_counter() + args.main_cpu_ms / 1e3
                while time.perf_counter() < end_cpu:  # the main process's own per-step work
                    pass
            torch.cuda.synchronize()
            steps += 1
            if step_log:
                # END WAIT STEP: the step's end, how long the loop waited for its batch, and
                # how long the step took, as the job measured them.
                done = time.time()
                step_log.write(f"{done:.3f} {got - asked:.4f} {done - got:.4f}\n")
            if not checkpoint_done and time.time() - start >= args.checkpoint_at:
                checkpoint_done = True
                t0 = time.time()
                state = {"model": model.state_dict(),
                         "extra": torch.zeros(int(args.checkpoint_gb * 2**28))}  # 4-byte floats
                torch.save(state, os.path.join(args.checkpoint_dir, "checkpoint.pt"))
                os.sync()
                print(f"train_job: checkpoint {args.checkpoint_gb} GB from {t0:.3f} to {time.time():.3f}",
                      flush=True)
            if not eval_done and time.time() - start >= args.eval_at:
                eval_done = True
                t0 = time.time()
                model.eval()
                with torch.no_grad():
                    while time.time() - t0 < args.eval_seconds:
                        for ex, _ in eval_loader:
                            model(ex.cuda(non_blocking=True)).argmax(1).cpu()
                            if time.time() - t0 >= args.eval_seconds:
                                break
                model.train()
                print(f"train_job: eval from {t0:.3f} to {time.time():.3f}", flush=True)
            if not hang_done and time.time() - start >= args.hang_at:
                hang_done = True
                held = threading.Lock()
                held.acquire()
                t0 = time.time()
                held.acquire(timeout=args.hang_seconds)  # asleep in a futex, as a deadlock is
                print(f"train_job: hang from {t0:.3f} to {time.time():.3f}", flush=True)
            if time.time() - start >= args.seconds:
                break
    end = time.time()
    print(f"train_job: {steps} steps in {end - start:.1f} s = {steps / (end - start):.2f} steps/s, "
          f"end {end:.3f}", flush=True)
    if args.linger > 0:
        time.sleep(args.linger)
        print(f"train_job: exiting {time.time():.3f}", flush=True)


if __name__ == "__main__":
    main()
