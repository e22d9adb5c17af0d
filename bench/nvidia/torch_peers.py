#!/usr/bin/env python3
"""PyTorch peers of Glimpse's analyses on the same NVIDIA GPU, timed with CUDA events.

For each case of bench/peers.py (the OpenCV peer table on CPU renderers) this runs PyTorch's CUDA
equivalent on an image already on the device, from the 8-bit pixels to the same result (counts,
8-byte sums, 8-bit filtered pixels, coordinates): `bincount` for histograms, two `cumsum`s for
integral images, `avg_pool2d` after a replicate pad for box filters, `nonzero` / `sum` of a mask for
compaction. Medians of --runs calls after --warmup, each timed between two CUDA events. The
device's copy bandwidth (a large device-to-device copy, read + write) is measured in the same run.

With --glimpse-json DIR (the *_bench.json files the kernel benchmarks wrote in the same run, see
bench/nvidia/run.sh) each row also shows Glimpse's `auto` variant and its fastest variant on the
same size, their GL timer-query times, and the ratio to PyTorch.

Each case's first result is compared with a numpy reference of the same rule (the "same result"
column), so a peer that computes something else cannot pass for a faster one. --device cpu runs
the same cases on PyTorch's CPU backend, timed with the wall clock: a way to check this script
where there is no GPU (Debian's python3-torch is CPU-only), not a peer table.

  python3 bench/nvidia/torch_peers.py --sizes 3200x2400,7680x4320 --runs 21 \
      --glimpse-json out/nvidia --markdown out/nvidia/torch_peers.md
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the GPU machines have it; the CPU machines need not
    sys.exit("torch_peers: PyTorch is not installed (import torch failed)")


def parse_sizes(text):
    sizes = []
    for one in text.split(","):
        w, _, h = one.partition("x")
        if not (w.isdigit() and h.isdigit()) or int(w) < 1 or int(h) < 1:
            sys.exit(f"torch_peers: --sizes wants WxH[,WxH...], got {one!r}")
        sizes.append((int(w), int(h)))
    return sizes


def timed_ms(fn, runs, warmup, device):
    """Median and minimum of `runs` calls of fn in ms: on CUDA each between two CUDA events, on
    the CPU by the wall clock."""
    for _ in range(warmup):
        fn()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        if not cuda:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
            continue
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), min(times)


def copy_gbs(device, runs):
    """A copy of 1 GiB (256 MiB on the CPU) on the device: bytes read + written per second."""
    n = 1 << (30 if device.type == "cuda" else 28)
    src = torch.ones(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms, _ = timed_ms(lambda: dst.copy_(src), runs, 2, device)
    return 2 * n / (ms * 1e6)


# Luma as Glimpse and OpenCV 4's 8-bit RGBA2GRAY compute it (fixed point, 15 bits).
def luma(x):
    r, g, b = (x[..., k].to(torch.int32) for k in range(3))
    return (r * 9798 + g * 19235 + b * 3735 + 16384) >> 15


def hist_all(x):
    keys = x.to(torch.int32) + torch.arange(4, device=x.device, dtype=torch.int32) * 256
    return torch.bincount(keys.flatten(), minlength=1024).view(4, 256)


def hist_luma(x):
    return torch.bincount(luma(x).flatten(), minlength=256)


def hist_rgb_mean(x):
    s = x[..., 0].to(torch.int32) + x[..., 1] + x[..., 2]
    return torch.bincount((s // 48).flatten(), minlength=16)  # 16 bins of (R+G+B)/3 over [0, 256)


def integral(x, squared):
    v = x.to(torch.int64)
    s = v.cumsum(0).cumsum(1)
    return (s, (v * v).cumsum(0).cumsum(1)) if squared else s


def box(x, r):
    """Replicate border, the mean rounded half up as Glimpse rounds it, floor(sum / area + 1/2):
    window sums by a sum pool in float32 (exact: 255 x 65 x 65 is far below 2^24), the rounding
    in integers."""
    f = x.permute(2, 0, 1).unsqueeze(0).to(torch.float32)
    k = 2 * r + 1
    s = F.avg_pool2d(F.pad(f, (r, r, r, r), mode="replicate"), k, stride=1,
                     divisor_override=1).to(torch.int32)
    area = k * k
    return ((2 * s + area) // (2 * area)).to(torch.uint8).squeeze(0).permute(1, 2, 0)


# numpy references of the same rules, for the "same result" column.
def np_luma(a):
    r, g, b = (a[..., k].astype(np.int32) for k in range(3))
    return (r * 9798 + g * 19235 + b * 3735 + 16384) >> 15


def np_integral(a, squared):
    v = a.astype(np.int64)
    s = v.cumsum(0).cumsum(1)
    return (s, (v * v).cumsum(0).cumsum(1)) if squared else s


def np_box(a, r):
    """Window sums from a summed-area table of the edge-padded image, in int64."""
    k = 2 * r + 1
    p = np.pad(a.astype(np.int64), ((r + 1, r), (r + 1, r), (0, 0)), mode="edge")
    p[0] = 0
    p[:, 0] = 0
    t = p.cumsum(0).cumsum(1)
    h, w = a.shape[:2]
    s = t[k:k + h, k:k + w] - t[:h, k:k + w] - t[k:k + h, :w] + t[:h, :w]
    area = k * k
    return ((2 * s + area) // (2 * area)).astype(np.uint8)


def same(result, reference):
    got = result if isinstance(result, tuple) else (result,)
    want = reference if isinstance(reference, tuple) else (reference,)
    ok = len(got) == len(want) and all(
        np.array_equal(g.cpu().numpy(), np.asarray(w)) for g, w in zip(got, want))
    return "equal" if ok else "DIFFERENT"


def make_images(width, height, seed, device):
    """RGBA8 noise, its luma, and a channel uniform in [0, 100) for the compaction's selectivity
    (as compaction_bench: [0, p - 1] passes p% of the pixels)."""
    rng = np.random.default_rng(seed)
    rgba = torch.from_numpy(rng.integers(0, 256, (height, width, 4), dtype=np.uint8)).to(device)
    percent = torch.from_numpy(rng.integers(0, 100, (height, width, 1), dtype=np.uint8)).to(device)
    return {"rgba": rgba, "grey": luma(rgba).to(torch.uint8).unsqueeze(-1), "percent": percent}


# (name, image, torch call, numpy reference, bytes read + written, Glimpse benchmark kernel and
# params)
def make_cases():
    cases = [
        ("histogram 256 bins x 4 channels", "rgba", hist_all,
         lambda a: np.stack([np.bincount(a[..., c].ravel(), minlength=256) for c in range(4)]),
         lambda a, r: a.numel(), ("histogram", "all 256 bins")),
        ("histogram 256 bins of luma", "rgba", hist_luma,
         lambda a: np.bincount(np_luma(a).ravel(), minlength=256),
         lambda a, r: a.numel(), ("histogram", "luma 256 bins")),
        ("histogram 16 bins of RGB mean", "rgba", hist_rgb_mean,
         lambda a: np.bincount(((a[..., 0].astype(np.int32) + a[..., 1] + a[..., 2]) // 48)
                               .ravel(), minlength=16),
         lambda a, r: a.numel(), ("histogram", "rgb_mean 16 bins")),
    ]
    for image, ch in (("grey", 1), ("rgba", 4)):
        for sq in (False, True):
            cases.append((f"integral image {ch} channel{'s' if ch > 1 else ''}"
                          f"{', squared' if sq else ''} (8-byte sums)", image,
                          lambda a, sq=sq: integral(a, sq), lambda a, sq=sq: np_integral(a, sq),
                          lambda a, r, sq=sq: a.numel() * (1 + 8 * (2 if sq else 1)),
                          ("integral", f"{ch}ch uint8{' squared' if sq else ''}")))
    for image, r in (("rgba", 1), ("rgba", 7), ("rgba", 32), ("grey", 7)):
        cases.append((f"box filter {'RGBA8' if image == 'rgba' else '1 channel'} r={r}", image,
                      lambda a, r=r: box(a, r), lambda a, r=r: np_box(a, r),
                      lambda a, res: 2 * a.numel(),
                      ("box_filter", f"{4 if image == 'rgba' else 1}ch uint8 r={r}")))
    for pct in (10, 50):
        cases.append((f"compaction {pct}% listed", "percent",
                      lambda a, p=pct: torch.nonzero(a[..., 0] < p),
                      lambda a, p=pct: np.argwhere(a[..., 0] < p),
                      lambda a, res: a.numel() + res.shape[0] * 9,
                      ("compaction", f"1ch {pct}% list gpu")))
        cases.append((f"compaction {pct}% counted", "percent",
                      lambda a, p=pct: (a[..., 0] < p).sum(),
                      lambda a, p=pct: np.count_nonzero(a[..., 0] < p),
                      lambda a, res: a.numel(),
                      ("compaction", f"1ch {pct}% count api")))  # counts: the call is the GPU work
    return cases


def load_glimpse(directory):
    """{(kernel, size, params): [(variant, median_ms)]} from the kernel benchmarks' JSON."""
    rows = {}
    if not directory:
        return rows
    for name in sorted(os.listdir(directory)):
        if not name.endswith("_bench.json"):
            continue
        with open(os.path.join(directory, name)) as f:
            data = json.load(f)
        for r in data["rows"]:
            if r["variant"].startswith(("cpu", "first:")) or r["variant"].endswith("+read"):
                continue
            # "WxH" here; the histogram benchmark writes "WxHxC" (its images are RGBA).
            size = "x".join(r["size"].split("x")[:2])
            rows.setdefault((r["kernel"], size, r["params"]), []).append(
                (r["variant"], r["median_ms"]))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="3200x2400,7680x4320")
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None, help="image seed (default: random, printed)")
    ap.add_argument("--glimpse-json", default="", help="folder of the kernel benchmarks' JSON")
    ap.add_argument("--markdown", default="", help="also write the table here")
    ap.add_argument("--json", default="", help="also write the rows here")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                    help="cpu: check the script where there is no GPU (wall-clock times)")
    args = ap.parse_args()
    if args.runs < 1 or args.warmup < 0:
        sys.exit("torch_peers: --runs must be at least 1 and --warmup at least 0")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_peers: no CUDA device (torch.cuda.is_available() is false); "
                 "--device cpu runs the cases on the CPU")
    device = torch.device(args.device)
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    glimpse = load_glimpse(args.glimpse_json)

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name = f"{props.name}, {props.total_memory >> 20} MiB; PyTorch {torch.__version__}, " \
               f"CUDA {torch.version.cuda}"
    else:
        name = f"CPU, {torch.get_num_threads()} threads; PyTorch {torch.__version__}"
    copy = copy_gbs(device, 9)
    lines = [f"device: {name}; image seed {seed}",
             f"copy bandwidth (on the device, read + write): {copy:.0f} GB/s",
             f"command: {' '.join(sys.argv)}", ""]
    header = "| case | size | PyTorch ms | GB/s | of copy | same result |"
    rule = "|---|---|---:|---:|---:|---|"
    if glimpse:
        header += " Glimpse auto | ms | ratio | fastest variant | ms | ratio |"
        rule += "---|---:|---:|---|---:|---:|"
    lines += [header, rule]
    rows = []
    for w, h in parse_sizes(args.sizes):
        images = make_images(w, h, seed, device)
        host = {k: v.cpu().numpy() for k, v in images.items()}
        for case, image, fn, reference, nbytes, key in make_cases():
            a = images[image]
            result = fn(a)
            equal = same(result, reference(host[image]))
            ms, best = timed_ms(lambda: fn(a), args.runs, args.warmup, device)
            gbs = nbytes(a, result) / (ms * 1e6)
            size = f"{w}x{h}"
            row = {"case": case, "size": size, "torch_ms": ms, "torch_min_ms": best, "gbs": gbs,
                   "of_copy": gbs / copy, "same_result": equal}
            line = (f"| {case} | {size} | {ms:.3f} | {gbs:.0f} | {100 * gbs / copy:.0f}% | "
                    f"{equal} |")
            if glimpse:
                found = glimpse.get((key[0], size, key[1]), [])
                auto = [(v, t) for v, t in found if v.startswith("auto")]
                fastest = min(found, key=lambda vt: vt[1]) if found else None
                for label, pick in (("auto", auto[0] if auto else None), ("fastest", fastest)):
                    if pick is None:
                        line += " - | - | - |"
                        continue
                    row[f"glimpse_{label}"] = {"variant": pick[0], "ms": pick[1]}
                    line += f" {pick[0]} | {pick[1]:.3f} | {pick[1] / ms:.2f}x |"
            rows.append(row)
            lines.append(line)
            print(line, flush=True)
            del result
        del images, host
        if device.type == "cuda":
            torch.cuda.empty_cache()
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "seed": seed,
                       "copy_gbs": copy, "command": sys.argv, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
