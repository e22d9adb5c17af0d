"""numpy references of the analyses, written from the rules in the README and the proto (not from
the server's code): exact integers for 8/16-bit images, the documented float arithmetic else."""
import numpy as np

F32 = np.float32


def luma_u(a):
    a = a.astype(np.int64)
    return (9798 * a[..., 0] + 19235 * a[..., 1] + 3735 * a[..., 2] + 16384) >> 15


def flush(v):
    """Float values below the smallest normal float taken as 0 (docs/analyses.md)."""
    v = np.asarray(v, dtype=F32)
    return np.where(np.abs(v) < np.finfo(F32).tiny, F32(0), v).astype(F32)


def luma_f(a):
    # 0.299 R + 0.587 G + 0.114 B in float, left to right, no fused multiply-add, every input
    # and result below the smallest normal float taken as 0.
    r, g, b = (flush(F32(w) * flush(a[..., c])) for c, w in enumerate((0.299, 0.587, 0.114)))
    return flush(flush(r + g) + b)


def mean_f(a):
    # (R + G + B) * (1/3) in float, left to right, flushed as luma_f.
    s = flush(flush(flush(a[..., 0]) + flush(a[..., 1])) + flush(a[..., 2]))
    return flush(s * F32(1.0 / 3.0))


def histogram(a, bins, lo, hi, source, channel=0):
    """Rows of counts; integer images need integer lo and hi here."""
    if a.ndim == 2:
        a = a[..., None]
    if source == "all":
        planes = [a[..., c] for c in range(a.shape[2])]
    elif source == "channel":
        planes = [a[..., channel]]
    elif source == "luma":
        planes = [luma_f(a) if a.dtype == np.float32 else luma_u(a)]
    else:  # rgb_mean
        if a.dtype == np.float32:
            planes = [mean_f(a)]
        else:
            planes = [a[..., :3].astype(np.int64).sum(axis=2)]
    rows = []
    for p in planes:
        if a.dtype == np.float32:
            v = p.astype(np.float64).ravel()
            v = v[(v >= lo) & (v < hi)]
            b = np.minimum(np.floor((v - lo) * (bins / (hi - lo))), bins - 1).astype(np.int64)
        else:
            # value = key / scale (scale 3 for the mean of R+G+B), all in integers.
            scale = 3 if source == "rgb_mean" else 1
            k = p.astype(np.int64).ravel()
            lo_k, hi_k = int(lo) * scale, int(hi) * scale
            k = k[(k >= lo_k) & (k < hi_k)]
            b = (k - lo_k) * bins // (hi_k - lo_k)
        rows.append(np.bincount(b, minlength=bins).astype(np.uint64))
    return np.stack(rows)


def integral(a, squared=False):
    if a.ndim == 2:
        a = a[..., None]
    t = a.astype(np.float64 if a.dtype == np.float32 else np.uint64)
    if squared:
        t = t * t
    return t.cumsum(axis=0).cumsum(axis=1)


def compact(a, lo, hi, outside=False, source="channel", channel=0):
    """(xy, values, total): the passing pixels in row-major order."""
    if a.ndim == 2:
        a = a[..., None]
    if source == "luma":
        v = luma_f(a) if a.dtype == np.float32 else luma_u(a)
    else:
        v = a[..., channel]
    v = v.astype(np.float64)
    inside = (v >= lo) & (v <= hi)
    mask = (~inside & ~np.isnan(v)) if outside else inside
    yx = np.argwhere(mask)
    return yx[:, ::-1].astype(np.uint32), a[mask], int(mask.sum())


_PAD = {"replicate": "edge", "reflect101": "reflect", "constant": "constant"}


def box_filter(a, rx, ry, border="reflect101", border_value=0.0):
    if a.ndim == 2:
        a = a[..., None]
    h, w = a.shape[:2]
    integer = a.dtype != np.float32
    acc = np.int64 if integer else np.float64
    kwargs = {}
    if border == "constant":
        kwargs["constant_values"] = int(border_value) if integer else float(F32(border_value))
    p = a.astype(acc)
    for axis, r in ((0, ry), (1, rx)):
        # One sample reflected (reflect101) is itself: numpy's "reflect" needs two.
        mode = "edge" if border == "reflect101" and a.shape[axis] == 1 else _PAD[border]
        pad = [(0, 0)] * 3
        pad[axis] = (r, r)
        p = np.pad(p, pad, mode=mode, **kwargs)
    c = np.zeros((p.shape[0] + 1, p.shape[1] + 1, p.shape[2]), acc)
    c[1:, 1:] = p.cumsum(axis=0).cumsum(axis=1)
    s = (c[2 * ry + 1:, 2 * rx + 1:] - c[:h, 2 * rx + 1:] - c[2 * ry + 1:, :w] + c[:h, :w])
    area = (2 * rx + 1) * (2 * ry + 1)
    if integer:
        return ((2 * s + area) // (2 * area)).astype(a.dtype)
    return (s / area).astype(np.float32)
