"""``python -m jetdqn.bench convs``: the network-size study of the reusing-convolutions paper (arXiv 1909.05632):
2-conv networks with 20/40, 40/80 and 80/160 filters on Atari-sized frames downsampled by 2 and by 4,
N steps of inference (batch 1) and training, on the CPU and (when present) CUDA."""

from __future__ import annotations

import time

from .report import markdown_table, write_markdown_result


def bench_convs(args) -> int:
    """Time for N steps of inference and training of 2-conv nets (20/40, 40/80, 80/160 filters) on Atari
    frames downsampled by 2 and by 4: the study of the reusing-convolutions paper (docs/facts.md)."""
    import torch
    from torch import nn

    def net(c1: int, c2: int, h: int, w: int) -> nn.Module:
        body = nn.Sequential(nn.Conv2d(1, c1, 8, 4), nn.ReLU(), nn.Conv2d(c1, c2, 4, 2), nn.ReLU(), nn.Flatten())
        with torch.no_grad():
            n = body(torch.zeros(1, 1, h, w)).shape[1]
        return nn.Sequential(body, nn.Linear(n, 256), nn.ReLU(), nn.Linear(256, 6))

    from ..runtime import cuda_usable
    devices = ["cpu"] + (["cuda"] if cuda_usable() else [])
    rows = []
    for c1, c2 in [(20, 40), (40, 80), (80, 160)]:
        for down in (2, 4):
            h, w = 210 // down, 160 // down
            row = {"filters": f"{c1}/{c2}", "downsample": down, "input": f"{h}x{w}"}
            for dev in devices:
                model = net(c1, c2, h, w).to(dev)
                opt = torch.optim.Adam(model.parameters(), lr=1e-4)
                x = torch.rand(args.batch, 1, h, w, device=dev)
                target = torch.zeros(args.batch, 6, device=dev)
                for phase in ("inference", "training"):
                    def step():
                        if phase == "inference":
                            with torch.no_grad():
                                model(x[:1])
                        else:
                            loss = ((model(x) - target) ** 2).mean()
                            opt.zero_grad()
                            loss.backward()
                            opt.step()
                    for _ in range(10):
                        step()
                    if dev == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    for _ in range(args.steps):
                        step()
                    if dev == "cuda":
                        torch.cuda.synchronize()
                    row[f"{phase}_{dev}_s"] = time.perf_counter() - t0
            rows.append(row)
            # as the other benchmarks say a row as it is done (it printed the row's Python dict)
            print(f"- filters {row['filters']}, input {row['input']} (1/{down}): " + ", ".join(
                f"{phase} {dev} {row[f'{phase}_{dev}_s']:.3f} s" for phase in ("inference", "training")
                for dev in devices), flush=True)
    cols = ["filters", "downsample", "input"] + [f"{p}_{d}_s" for p in ("inference", "training") for d in devices]
    text = markdown_table(cols, [[str(r[c]) if not isinstance(r[c], float) else f"{r[c]:.3f}" for c in cols]
                                 for r in rows])
    print(f"\n{args.steps} steps; inference at batch 1, training at batch {args.batch} (Adam)\n{text}")
    print("paper (docs/facts.md), 3000 steps, 2 conv + dense, downsampled by 4: inference 20/40 3.33 s CPU / 2.86 s GPU, "
          "80/160 18.08 / 7.30 s; training 20/40 7.11 / 3.86 s, 80/160 39.24 / 8.7 s")
    if args.out:
        print(f"written: {write_markdown_result(args.out, 'convs', text, args.argv)}")
    return 0
