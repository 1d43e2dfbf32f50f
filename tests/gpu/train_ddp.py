"""A real synchronous data-parallel training job for the GPU host checks, started by torchrun
with one process per GPU: ResNet-50 under DistributedDataParallel, each rank reading its own
share of the dataset's files through its own DataLoader workers (each file dropped from the
page cache after it is read, so every epoch reads from the device).

Each rank first moves itself into the cgroup named by SW_RANK_CGROUP (with {rank} replaced),
so that a test can throttle one rank's reads, and writes its pid to SW_PID_DIR/rank{rank}.pid.
Rank 0 logs every step to --step-log: its end time (epoch seconds), how long the loop waited
for its batch and how long the step took (END WAIT STEP, as train_job.py): the job's own
account of its progress and its input wait, to hold stallwatch's figures against.

With more ranks on a node than it has GPUs, ranks share GPUs (rank i on GPU i mod count) and talk
through gloo, which NCCL refuses: a job of many ranks on a host with few GPUs, for what the
agent's cost per rank is.

Usage: torchrun --standalone --nproc-per-node 2 train_ddp.py DATA_DIR [--seconds 60]
           [--workers 4] [--batch 64] [--decode-us 600] [--model resnet152] [--size 224]
           [--hook] [--step-log FILE]"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torchvision

from train_job import FileDataset  # the same files, read the same way, as the one-GPU job


def place_self(rank):
    cgroup = os.environ.get("SW_RANK_CGROUP")
    if cgroup:
        path = cgroup.replace("{rank}", str(rank))
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    pid_dir = os.environ.get("SW_PID_DIR")
    if pid_dir:
        with open(os.path.join(pid_dir, f"rank{rank}.pid"), "w") as f:
            f.write(str(os.getpid()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--decode-us", type=float, default=0)
    ap.add_argument("--hook", action="store_true", help="report through stallwatch.watch()")
    ap.add_argument("--step-log")
    ap.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    ap.add_argument("--model", default="resnet50", choices=["resnet50", "resnet152"],
                    help="resnet152 at --size 224: a step the GPU sets the pace of (a GPU-bound job)")
    ap.add_argument("--size", type=int, default=112, help="images are resized to this on the GPU")
    ap.add_argument("--linger", type=float, default=0,
                    help="after the last step, stay this long (workers alive, GPU idle) before exiting")
    args = ap.parse_args()

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    place_self(rank)
    gpus = torch.cuda.device_count()
    device = local_rank % gpus
    torch.cuda.set_device(device)
    if int(os.environ["LOCAL_WORLD_SIZE"]) <= gpus:
        dist.init_process_group("nccl", device_id=torch.device("cuda", device))
    else:
        dist.init_process_group("gloo")
    dataset = FileDataset(args.data, args.decode_us)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, shuffle=True, drop_last=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, sampler=sampler, num_workers=args.workers,
                                         persistent_workers=True, drop_last=True, prefetch_factor=2,
                                         pin_memory=args.pin_memory)
    model = getattr(torchvision.models, args.model)(num_classes=1000).cuda()
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    if args.hook:
        import stallwatch
        batches = lambda: stallwatch.watch(loader)  # noqa: E731
    else:
        batches = lambda: loader  # noqa: E731
    step_log = open(args.step_log, "w") if args.step_log and rank == 0 else None
    start = time.time()
    print(f"train_ddp: rank {rank} pid {os.getpid()} start {start:.3f}", flush=True)
    steps, epoch, done = 0, 0, False
    while not done:
        sampler.set_epoch(epoch)
        epoch += 1
        it = iter(batches())
        while True:
            asked = time.time()
            try:
                x, y = next(it)
            except StopIteration:
                break
            got = time.time()
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            if args.size != x.shape[-1]:
                x = torch.nn.functional.interpolate(x, size=(args.size, args.size), mode="bilinear")
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            torch.cuda.synchronize()
            steps += 1
            if step_log:  # END WAIT STEP, as train_job.py writes it
                ended = time.time()
                step_log.write(f"{ended:.3f} {got - asked:.4f} {ended - got:.4f}\n")
            # Every rank stops at the same step: decided by rank 0's clock, agreed through the process group.
            stop = torch.tensor([1 if time.time() - start >= args.seconds else 0], device="cuda")
            dist.broadcast(stop, 0)
            if stop.item():
                done = True
                break
    end = time.time()
    if step_log:
        step_log.close()
    print(f"train_ddp: rank {rank} {steps} steps in {end - start:.1f} s = {steps / (end - start):.2f} steps/s, "
          f"end {end:.3f}", flush=True)
    if args.linger > 0:  # a job winding down slowly (issue 48)
        time.sleep(args.linger)
        print(f"train_ddp: rank {rank} exiting {time.time():.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
