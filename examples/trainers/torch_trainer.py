#!/usr/bin/env python3
"""A PyTorch trainer that follows gpuherd's job protocol, for machines with GPUs.

A small CNN on a seeded synthetic image set (or CIFAR-10 from --cifar10 DIR when
torchvision and the files are already there; nothing is downloaded), trained with AdamW
under torch.autocast: bf16 on GPUs that run it natively (compute capability 8.0 and up),
else fp16 with a GradScaler. Gradients are unscaled before they are clipped, so the clip
norm means the same at every loss scale. Checkpoints (through gpuherd_job) hold the
model, the optimizer, the LR schedule, the scaler, the data cursor and every RNG state
(torch, CUDA, Python, NumPy when loaded), so a restarted job goes on from the step it
saved; SIGUSR1 asks for a checkpoint, SIGTERM for a checkpoint and an exit.

    torch_trainer.py --steps 2000 [--lr 3e-3] [--seed 0] [--batch 256] [--precision auto]
                     [--clip 1.0] [--checkpoint-every 200] [--cifar10 DIR] [--out DIR]

Exit status: 0 done, 2 bad arguments, 3 PyTorch missing, 143 checkpointed and stopped
on SIGTERM.
"""
import argparse
import contextlib
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "helpers", "python"))
import gpuherd_job as job  # noqa: E402  (found beside the repository, or via PYTHONPATH)

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:
    print("torch_trainer: PyTorch is not installed for " + sys.executable + "; install it "
          "(https://pytorch.org) or run examples/trainers/toy_trainer.py, which needs only "
          "the standard library", file=sys.stderr)
    sys.exit(3)

SYNTHETIC_TRAIN = 8192
SYNTHETIC_TEST = 1024
CLASSES = 10


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, required=True, help="optimizer steps in all")
    p.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate (default 3e-3)")
    p.add_argument("--seed", type=int, default=0, help="seeds data order, weights and dropout (default 0)")
    p.add_argument("--batch", type=int, default=256, help="minibatch size (default 256)")
    p.add_argument("--precision", choices=["auto", "bf16", "fp16", "fp32"], default="auto",
                   help="autocast dtype; auto: bf16 on compute capability >= 8.0, else fp16 "
                        "(on consumer Pascal cards, sm_61, fp32 is faster than fp16)")
    p.add_argument("--clip", type=float, default=1.0, help="max gradient norm (default 1.0)")
    p.add_argument("--warmup", type=int, default=100, help="linear warm-up steps (default 100)")
    p.add_argument("--checkpoint-every", type=int, default=200, metavar="K",
                   help="checkpoint every K steps (default 200)")
    p.add_argument("--log-every", type=int, default=10, metavar="N",
                   help="log metrics every N steps (default 10)")
    p.add_argument("--device", help="torch device (default cuda when available, else cpu)")
    p.add_argument("--deterministic", action="store_true",
                   help="deterministic kernels, so a resumed run repeats an uninterrupted one exactly")
    p.add_argument("--cifar10", metavar="DIR", help="train on CIFAR-10 found in DIR (torchvision layout)")
    p.add_argument("--out", help="where result.json goes (default GPUHERD_CHECKPOINT_DIR)")
    a = p.parse_args(argv)
    for name in ("steps", "batch", "checkpoint_every", "log_every"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be a positive integer")
    if not (a.lr > 0 and a.clip > 0):
        p.error("--lr and --clip must be positive")
    if a.out is None and job.checkpoint_dir() is None:
        p.error("give --out DIR (or run under gpuherd, which sets GPUHERD_CHECKPOINT_DIR)")
    return a


class SmallCnn(nn.Module):
    def __init__(self, channels=3, classes=CLASSES):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU())
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(128, classes))

    def forward(self, x):
        # A mean rather than AdaptiveAvgPool2d, whose CUDA backward is nondeterministic.
        return self.head(self.features(x).mean(dim=(2, 3)))


def synthetic_images(seed, n, offset):
    """Class templates plus noise: learnable, but not in one step. Same seed, same set."""
    g = torch.Generator().manual_seed(seed)
    templates = torch.randn(CLASSES, 3, 32, 32, generator=g)
    g.manual_seed(seed * 1_000_003 + offset)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    images = templates[labels] * 0.5 + torch.randn(n, 3, 32, 32, generator=g)
    return images, labels


def load_data(args, device):
    if args.cifar10:
        try:
            import torchvision
        except ImportError:
            fail("--cifar10 needs torchvision, which is not installed")
        sets = []
        for train in (True, False):
            try:
                ds = torchvision.datasets.CIFAR10(args.cifar10, train=train, download=False)
            except RuntimeError as e:
                fail(f"no CIFAR-10 in {args.cifar10} ({e}); nothing is downloaded")
            x = torch.from_numpy(ds.data).permute(0, 3, 1, 2).float().div_(255.0)
            x = (x - x.mean(dim=(0, 2, 3), keepdim=True)) / x.std(dim=(0, 2, 3), keepdim=True)
            sets.append((x, torch.tensor(ds.targets)))
        (xtr, ytr), (xte, yte) = sets
    else:
        xtr, ytr = synthetic_images(args.seed, SYNTHETIC_TRAIN, 1)
        xte, yte = synthetic_images(args.seed, SYNTHETIC_TEST, 2)
    return xtr.to(device), ytr.to(device), xte.to(device), yte.to(device)


def epoch_order(seed, epoch, n):
    """The shuffled order of one epoch, a function of (seed, epoch) alone, so the data
    cursor is just (epoch, position) and a resumed run reads the same batches."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 7919 + epoch))


def fail(message):
    print("torch_trainer: " + message, file=sys.stderr)
    sys.exit(2)


def pick_precision(choice, device):
    if choice == "auto":
        if device.type == "cuda":
            major, _ = torch.cuda.get_device_capability(device)
            return "bf16" if major >= 8 else "fp16"
        return "bf16"  # CPU autocast runs bf16
    if choice == "fp16" and device.type != "cuda":
        fail("--precision fp16 needs a CUDA device; use bf16 or fp32 on the CPU")
    return choice


def make_scaler(enabled):
    # torch.amp.GradScaler("cuda") is the spelling from PyTorch 2.3 on; older versions
    # have only torch.cuda.amp.GradScaler.
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def autocast(device, amp_dtype):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


def to_cpu(obj):
    """A copy of a state dict with every tensor on the CPU, so that a checkpoint loads on
    whichever GPU the restarted job gets."""
    if torch.is_tensor(obj):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def rng_states(device):
    states = {"torch": torch.get_rng_state()}
    if device.type == "cuda":
        states["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        states["numpy"] = numpy.random.get_state()
    return states


def set_rng_states(states, device):
    torch.set_rng_state(states["torch"])
    if device.type == "cuda" and "cuda" in states:
        # The restarted job may see fewer GPUs; each one it has gets its old stream.
        for i, s in enumerate(states["cuda"][:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(s, i)
    numpy = sys.modules.get("numpy")
    if numpy is not None and "numpy" in states:
        numpy.random.set_state(states["numpy"])


def limit_memory(device):
    """Keeps PyTorch's allocator inside a fractional job's share (GPUHERD_GPU_MEM_LIMIT_MB),
    so that gpuherd's memory watchdog never has to stop it."""
    limit_mb = os.environ.get("GPUHERD_GPU_MEM_LIMIT_MB", "")
    if device.type != "cuda" or not limit_mb.isdigit():
        return
    total = torch.cuda.get_device_properties(device).total_memory
    # Leave room for the CUDA context, which the allocator does not count.
    fraction = max(0.05, min(1.0, (int(limit_mb) - 512) * 2**20 / total))
    torch.cuda.set_per_process_memory_fraction(fraction, device)
    print(f"memory share: {limit_mb} MiB, allocator capped at {fraction:.1%} of the GPU", flush=True)


@torch.no_grad()
def evaluate(model, x, y, amp_dtype, device, batch=1024):
    model.eval()
    loss, correct = 0.0, 0
    for i in range(0, len(x), batch):
        with autocast(device, amp_dtype):
            logits = model(x[i:i + batch])
        loss += F.cross_entropy(logits.float(), y[i:i + batch], reduction="sum").item()
        correct += (logits.argmax(dim=1) == y[i:i + batch]).sum().item()
    model.train()
    return loss / len(x), correct / len(x)


def main(argv):
    args = parse_args(argv)
    job.install_signal_handlers()  # before any work, so an early SIGTERM is not fatal
    if args.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before CUDA starts
        # warn_only: PyTorch names any kernel that cannot be made deterministic.
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    precision = pick_precision(args.precision, device)
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[precision]
    limit_memory(device)
    ckpt_dir = job.checkpoint_dir() or args.out
    out_dir = args.out or ckpt_dir
    os.makedirs(out_dir, exist_ok=True)

    torch.manual_seed(args.seed)
    xtr, ytr, xte, yte = load_data(args, device)
    model = SmallCnn().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)

    def lr_factor(step):  # linear warm-up, then cosine decay to 0
        if step < args.warmup:
            return (step + 1) / args.warmup
        return 0.5 * (1 + math.cos(math.pi * (step - args.warmup) / max(1, args.steps - args.warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    scaler = make_scaler(enabled=precision == "fp16")
    # What a checkpoint must match. Not the precision: a job restarted on another GPU
    # model may go from bf16 to fp16 and still continue.
    config = {k: getattr(args, k) for k in ("steps", "lr", "seed", "batch", "clip", "warmup", "cifar10")}
    step, cursor, skipped = 0, {"epoch": 0, "pos": 0}, 0

    state = job.load_checkpoint(ckpt_dir)  # also restores Python's random state
    if state is not None:
        if state["config"] != config:
            fail(f"the checkpoint in {ckpt_dir} was written with {state['config']}, not {config}; "
                 f"use another --out or delete {job.CHECKPOINT_FILE} there")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])  # moves its tensors to the model's device
        scheduler.load_state_dict(state["scheduler"])
        if scaler.is_enabled() and state["scaler"]:  # empty when saved without fp16
            scaler.load_state_dict(state["scaler"])
        set_rng_states(state["rng"], device)
        step, cursor, skipped = state["step"], state["cursor"], state["skipped"]
        print(f"resuming at step {step} of {args.steps} (restart {job.restart_count()}, "
              f"saved with {state['precision']})", flush=True)
    print(f"device {device}, precision {precision}, {len(xtr)} training images", flush=True)

    def save():
        job.save_checkpoint({
            "config": config, "precision": precision, "step": step, "cursor": dict(cursor),
            "skipped": int(skipped_t),
            "model": to_cpu(model.state_dict()), "optimizer": to_cpu(optimizer.state_dict()),
            "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(),
            "rng": rng_states(device)}, ckpt_dir)

    if args.batch > len(xtr):
        fail(f"--batch {args.batch} is larger than the training set ({len(xtr)} images)")
    skipped_t = torch.tensor(skipped, dtype=torch.int64, device=device)
    order = epoch_order(args.seed, cursor["epoch"], len(xtr)).to(device)
    model.train()
    window_start, window_step = time.monotonic(), step
    while step < args.steps:
        if cursor["pos"] + args.batch > len(xtr):  # drop the ragged tail of an epoch
            cursor = {"epoch": cursor["epoch"] + 1, "pos": 0}
            order = epoch_order(args.seed, cursor["epoch"], len(xtr)).to(device)
        idx = order[cursor["pos"]:cursor["pos"] + args.batch]
        cursor["pos"] += args.batch
        x, y = xtr[idx], ytr[idx]

        with autocast(device, amp_dtype):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        scaler.step(optimizer)  # skipped when fp16 gradients overflowed
        scaler.update()
        scheduler.step()
        step += 1
        if scaler.is_enabled():  # counted on the device: no wait for the GPU each step
            skipped_t += (~torch.isfinite(grad_norm)).long()

        if step % args.log_every == 0 or step == args.steps:
            acc = (logits.argmax(dim=1) == y).float().mean()
            loss_value = float(loss)  # waits for the GPU, so the rate below is true
            now = time.monotonic()
            values = {"loss": loss_value, "acc": float(acc), "lr": scheduler.get_last_lr()[0],
                      "images_per_s": (step - window_step) * args.batch / max(1e-9, now - window_start)}
            window_start, window_step = now, step
            # An overflowed fp16 step is expected now and then and the scaler skips it, so
            # its norm is left out: gpuherd's NaN check then sees real divergence alone.
            norm = float(grad_norm)
            if math.isfinite(norm) or not scaler.is_enabled():
                values["grad_norm"] = norm
            if scaler.is_enabled():
                values["loss_scale"] = scaler.get_scale()
                values["skipped_steps"] = int(skipped_t)
            job.log_metrics(step=step, **values)
        if step % args.checkpoint_every == 0 or job.should_checkpoint():
            save()
        if job.should_exit():
            print(f"stopped at step {step} on SIGTERM, checkpointed", flush=True)
            return job.EXIT_STOPPED

    save()
    test_loss, test_acc = evaluate(model, xte, yte, amp_dtype, device)
    job.log_metrics(step=step, test_loss=test_loss, test_acc=test_acc)
    result = dict(config, test_loss=test_loss, test_acc=test_acc, precision=precision,
                  skipped_steps=int(skipped_t), device=str(device))
    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    print(f"done: step {step}, test loss {test_loss:.4f}, test acc {test_acc:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
