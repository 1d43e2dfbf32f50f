"""A GPT-style language model for the GPU host checks (issue 41): a decoder-only transformer
trained on text that its DataLoader workers read from files and tokenise in Python, as a job
with a Python tokeniser (or heavy text preprocessing) does. Unlike the image jobs, each batch is
small (token ids) and its cost is CPU in the workers, not bytes read.

The corpus is made on first use under DATA_DIR (--make-files: files of generated sentences over a
fixed vocabulary, so every run reads the same text); each sample is one file tokenised by a
greedy longest-match over a subword table in pure Python (--tokenize-passes repeats it: the
knob for how CPU-bound the input is). --step-log writes each step's end time, the time the loop
waited for that step's batch and the time the step took (END WAIT STEP), the account the
limiter's input-wait share is held against (limiter_check.py). --pin-memory as most training
scripts set it; --hook reports through stallwatch.watch() (off by default: the job as users run
it). --hang-at-end stops the workers (SIGSTOP) after the last step and waits for a batch that
never comes: a job that really hangs at its end, to be killed by whoever started it.

Usage: python3 train_lm.py DATA_DIR [--seconds 60] [--workers 2] [--pin-memory]"""

import argparse
import os
import random
import signal
import time

import torch
import torch.nn as nn

SYLLABLES = ["ka", "lo", "mi", "ter", "on", "sa", "ri", "ven", "to", "el", "an", "dor", "pu", "is",
             "ne", "gal", "tho", "rum", "ex", "qui", "ba", "zen", "li", "mor", "cha", "un", "pre"]


def make_corpus(root, files, words_per_file=1200):
    os.makedirs(root, exist_ok=True)
    rng = random.Random(41)
    vocab = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(6000)]
    for n in range(files):
        path = os.path.join(root, f"{n:06d}.txt")
        if os.path.exists(path):
            continue
        words = [rng.choice(vocab) for _ in range(words_per_file)]
        text = " ".join(w.capitalize() + "." if rng.random() < 0.07 else w for w in words)
        with open(path, "w") as f:
            f.write(text)


class Tokenizer:
    """Greedy longest-match over subword pieces: the syllables, their pairs and single letters."""

    def __init__(self):
        pieces = set(SYLLABLES) | {a + b for a in SYLLABLES for b in SYLLABLES}
        pieces |= set("abcdefghijklmnopqrstuvwxyz.,ABCDEFGHIJKLMNOPQRSTUVWXYZ ")
        self.ids = {p: i + 1 for i, p in enumerate(sorted(pieces))}
        self.longest = max(len(p) for p in pieces)
        self.vocab_size = len(self.ids) + 1

    def encode(self, text):
        out, i, n = [], 0, len(text)
        while i < n:
            for size in range(min(self.longest, n - i), 0, -1):
                piece = self.ids.get(text[i:i + size])
                if piece is not None:
                    out.append(piece)
                    i += size
                    break
            else:
                i += 1
        return out


class TextDataset(torch.utils.data.Dataset):
    def __init__(self, root, seq, passes):
        self.paths = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".txt"))
        self.seq, self.passes = seq, passes
        self.tokenizer = Tokenizer()

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        fd = os.open(self.paths[i % len(self.paths)], os.O_RDONLY)
        try:  # read from the device each time, as a corpus far larger than memory is
            text = os.read(fd, 1 << 20).decode()
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        for _ in range(self.passes):  # stands for a heavier tokeniser or text cleaning
            ids = self.tokenizer.encode(text)
        ids = (ids * (1 + (self.seq + 1) // max(1, len(ids))))[:self.seq + 1]
        return torch.tensor(ids, dtype=torch.long)


class Gpt(nn.Module):
    def __init__(self, vocab, d=768, layers=8, heads=12, seq=512):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True, norm_first=True,
                                           activation="gelu", dropout=0.0)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, x):
        n = x.shape[1]
        h = self.tok(x) + self.pos(torch.arange(n, device=x.device))
        h = self.blocks(h, mask=self.mask[:n, :n], is_causal=True)
        return self.head(self.norm(h))


def train_with_lightning(args, dataset, loader):
    """The same model and loader under a PyTorch Lightning Trainer, which builds its own loop
    (and a validation loop every VAL_EVERY steps over its own loader, under no_grad): for the
    zero-code path, which must time the training batches and pass the validation ones."""
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = Gpt(dataset.tokenizer.vocab_size, seq=args.seq)

        def loss(self, x):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = self.model(x[:, :-1])
            return nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))

        def training_step(self, x, i):
            return self.loss(x)

        def validation_step(self, x, i):
            return self.loss(x)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=3e-4)

    class StepLog(L.Callback):
        def __init__(self, path):
            self.f = open(path, "w") if path else None
            self.steps = 0

        def on_train_batch_end(self, trainer, module, outputs, batch, i):
            self.steps += 1
            if self.f:
                self.f.write(f"{time.time():.3f}\n")

    val = torch.utils.data.DataLoader(dataset, batch_size=args.batch, num_workers=1)
    log = StepLog(args.step_log)
    trainer = L.Trainer(accelerator="gpu", devices=1, max_time={"seconds": args.seconds}, max_epochs=-1, callbacks=[log],
                        limit_train_batches=200, limit_val_batches=20, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    start = time.time()
    trainer.fit(Module(), loader, val)
    end = time.time()
    print(f"train_lm: lightning {log.steps} steps in {end - start:.1f} s = {log.steps / (end - start):.2f} steps/s, "
          f"end {end:.3f}", flush=True)


def train_with_hf_trainer(args, dataset):
    """A GPT-2 (built from its config: nothing downloaded) under a Hugging Face Trainer, which
    builds its own DataLoader (through accelerate) from the dataset and its arguments: for the
    zero-code path, as Lightning. Its step log: each step's end, the time from the previous
    step's end to this one's begin (the Trainer fetches the batch in between) and the step."""
    import transformers

    class Samples(torch.utils.data.Dataset):
        def __len__(self):
            return len(dataset)

        def __getitem__(self, i):
            ids = dataset[i][:-1]
            return {"input_ids": ids, "labels": ids}

    class StepLog(transformers.TrainerCallback):
        def __init__(self, path, seconds):
            self.f = open(path, "w") if path else None
            self.seconds, self.start, self.begun, self.ended, self.steps = seconds, time.time(), None, None, 0

        def on_step_begin(self, targs, state, control, **kw):
            self.begun = time.time()

        def on_step_end(self, targs, state, control, **kw):
            now = time.time()
            if self.f and self.ended is not None:
                self.f.write(f"{now:.3f} {self.begun - self.ended:.4f} {now - self.begun:.4f}\n")
            self.ended, self.steps = now, self.steps + 1
            control.should_training_stop = now - self.start >= self.seconds
            return control

    config = transformers.GPT2Config(vocab_size=dataset.tokenizer.vocab_size, n_positions=args.seq, n_embd=768,
                                     n_layer=8, n_head=12)
    model = transformers.GPT2LMHeadModel(config)
    targs = transformers.TrainingArguments(
        output_dir="/var/tmp/stallwatch-hf", max_steps=1 << 20, per_device_train_batch_size=args.batch,
        dataloader_num_workers=args.workers, dataloader_pin_memory=args.pin_memory,
        dataloader_persistent_workers=args.workers > 0, bf16=True, report_to="none", save_strategy="no",
        logging_strategy="no", learning_rate=3e-4, disable_tqdm=True)
    log = StepLog(args.step_log, args.seconds)
    trainer = transformers.Trainer(model=model, args=targs, train_dataset=Samples(), callbacks=[log])
    start = time.time()
    trainer.train()
    end = time.time()
    print(f"train_lm: hf-trainer {log.steps} steps in {end - start:.1f} s = {log.steps / (end - start):.2f} steps/s, "
          f"end {end:.3f}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--tokenize-passes", type=int, default=3)
    ap.add_argument("--make-files", type=int, default=2000)
    ap.add_argument("--pin-memory", action="store_true")
    ap.add_argument("--hook", action="store_true", help="report through stallwatch.watch()")
    ap.add_argument("--step-log")
    ap.add_argument("--hang-at-end", action="store_true")
    ap.add_argument("--lightning", action="store_true", help="train under a Lightning Trainer")
    ap.add_argument("--hf-trainer", action="store_true", help="train a GPT-2 under a Hugging Face Trainer")
    args = ap.parse_args()
    make_corpus(args.data, args.make_files)
    dataset = TextDataset(args.data, args.seq, args.tokenize_passes)
    if args.hf_trainer:
        return train_with_hf_trainer(args, dataset)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, num_workers=args.workers,
                                         pin_memory=args.pin_memory, persistent_workers=args.workers > 0)
    if args.lightning:
        return train_with_lightning(args, dataset, loader)
    model = Gpt(dataset.tokenizer.vocab_size, seq=args.seq).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    if args.hook:
        import stallwatch
        batches = iter(stallwatch.watch(loader))
    else:
        batches = iter(loader)
    step_log = open(args.step_log, "w") if args.step_log else None
    start = time.time()
    print(f"train_lm: pid {os.getpid()} start {start:.3f} pin_memory {args.pin_memory}", flush=True)
    steps = 0
    while time.time() - start < args.seconds:
        asked = time.time()
        x = next(batches)
        got = time.time()
        x = x.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x[:, :-1])
            loss = nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()  # the loop's sync, as a script that logs its loss has
        steps += 1
        if step_log:
            done = time.time()
            step_log.write(f"{done:.3f} {got - asked:.4f} {done - got:.4f}\n")
    end = time.time()
    if step_log:
        step_log.close()
    print(f"train_lm: {steps} steps in {end - start:.1f} s = {steps / (end - start):.2f} steps/s, end {end:.3f}",
          flush=True)
    if args.hang_at_end:
        workers = getattr(batches, "_workers", None) or getattr(getattr(batches, "_it", None), "_workers", [])
        for w in workers:
            os.kill(w.pid, signal.SIGSTOP)
        print(f"train_lm: hang at end from {time.time():.3f} ({len(workers)} workers stopped)", flush=True)
        while True:
            next(batches)  # the prefetched batches, then one that never comes


if __name__ == "__main__":
    main()
