#!/usr/bin/env python3
"""ddptop-train's model in PyTorch, for tests/bench/gpu.sh's side-by-side tokens/s.

The same model as runtime/model.c: the previous C bytes (--context, 16), each looked up in its
own 256 x E table (E = 32) and concatenated, L hidden layers (--layers, 3) of width H (--hidden,
512) each a Linear then GELU in its tanh form, a Linear to 256 logits, and the mean
cross-entropy against the next byte. The same initialisation (torch's Linear default, the
output layer 10x smaller with zero bias, the tables N(0, 1)), so the first loss is about
ln(256). AdamW as runtime/optim.c: lr 2e-3, betas 0.9/0.999, eps 1e-8, weight decay 0.01 on
the matrices and tables, none on the biases; fused on a GPU. The data as runtime/data.c forms
it: sample i is bytes [i, i+C) and its target byte i+C, of 1 MiB of bytes (random here, kept on
the device, the indices drawn on the device). Precision as --precision: fp32, tf32
(allow_tf32), bf16 (autocast; fp32 master weights). The loss is read every step (.item(), as
ddptop-train copies its loss to the host every step). tokens/s = batch / step time, one token
a predicted byte; the figures are the means after --warmup steps (20, as gpu.sh's for
ddptop-train; 50 with --compile).

Prints one JSON line: {"label", "device", "precision", "compile", "torch", "tokens_per_s",
"step_ms", "first_loss", "last_loss", "steps"}. --device cpu with tiny sizes is the smoke test
(tests/it_device_kit.sh); torch without CUDA for --device cuda exits 2 saying so.
"""
import argparse
import json
import math
import sys
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--precision", default="tf32", choices=["fp32", "tf32", "bf16"])
    ap.add_argument("--context", type=int, default=16)
    ap.add_argument("--embed", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=None, help="steps left out of the means (20; 50 compiled)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model, default mode")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    if a.warmup is None:
        a.warmup = 50 if a.compile else 20
    for k in ("context", "embed", "hidden", "layers", "batch_size", "steps"):
        if getattr(a, k) < 1:
            ap.error("--%s must be at least 1" % k.replace("_", "-"))
    if a.warmup >= a.steps:
        ap.error("--warmup (%d) must be below --steps (%d)" % (a.warmup, a.steps))
    return a


def main():
    a = parse()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print("torch_twin: no PyTorch: %s" % e, file=sys.stderr)
        return 2
    if a.device == "cuda" and not torch.cuda.is_available():
        print("torch_twin: torch %s sees no CUDA device" % torch.__version__, file=sys.stderr)
        return 2
    if a.compile and not hasattr(torch, "compile"):
        print("torch_twin: --compile needs PyTorch 2.0 or later (this is %s)" % torch.__version__, file=sys.stderr)
        return 2
    dev = torch.device(a.device)
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    torch.manual_seed(1337)
    C, E, H, L, B = a.context, a.embed, a.hidden, a.layers, a.batch_size

    class Twin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = torch.nn.Parameter(torch.randn(C * 256, E))      # C tables of 256 x E
            self.hidden = torch.nn.ModuleList(torch.nn.Linear(C * E if l == 0 else H, H) for l in range(L))
            self.out = torch.nn.Linear(H, 256)
            with torch.no_grad():
                self.out.weight.mul_(0.1)
                self.out.bias.zero_()
            self.register_buffer("base", torch.arange(C) * 256)       # table c starts at row c*256

        def forward(self, tokens, targets):
            x = self.wte[tokens + self.base].reshape(tokens.shape[0], C * E)
            for lin in self.hidden:
                x = F.gelu(lin(x), approximate="tanh")
            return F.cross_entropy(self.out(x).float(), targets)

    model = Twin().to(dev)
    decay = [p for n, p in model.named_parameters() if not n.endswith(".bias")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith(".bias")]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    kw = {"fused": True} if a.device == "cuda" else {}
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8, **kw)
    corpus = torch.randint(0, 256, (1 << 20,), dtype=torch.uint8, device=dev)
    offsets = torch.arange(C, device=dev)

    # torch.compile on the model (forward and loss; its backward follows): the step around it,
    # the optimizer's included, stays eager as in most training scripts
    fwd = torch.compile(model) if a.compile else model

    def step(tokens, targets):
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = fwd(tokens, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    times, losses = [], []
    for s in range(a.steps):
        sync()
        t0 = time.perf_counter()
        idx = torch.randint(0, corpus.numel() - C, (B,), device=dev)
        tokens = corpus[idx[:, None] + offsets].long()
        targets = corpus[idx + C].long()
        losses.append(step(tokens, targets).item())       # the host reads the loss every step
        times.append(time.perf_counter() - t0)
        if not math.isfinite(losses[-1]):
            print("torch_twin: loss %s at step %d" % (losses[-1], s + 1), file=sys.stderr)
            return 1
    kept = times[a.warmup:]
    ms = 1000.0 * sum(kept) / len(kept)
    tps = sum(B / t for t in kept) / len(kept)
    print(json.dumps({"label": a.label, "device": a.device, "precision": a.precision, "compile": a.compile,
                      "torch": torch.__version__, "tokens_per_s": round(tps, 1), "step_ms": round(ms, 4),
                      "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4), "steps": a.steps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
