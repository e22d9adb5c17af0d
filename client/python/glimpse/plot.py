"""Optional charts (matplotlib: Debian's python3-matplotlib)."""
from glimpse._types import HistogramResult

_RGBA = ["red", "green", "blue", "alpha"]
_COLOURS = ["tab:red", "tab:green", "tab:blue", "tab:gray"]


def plot_histogram(result: HistogramResult, ax=None, *, log: bool = False, title=None):
    """Draws every histogram of `result` as a step line over its value range, one legend entry per
    channel, with axes, labels and a title; returns the matplotlib Axes."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("plot_histogram needs matplotlib (Debian: apt-get install "
                          "python3-matplotlib)") from e
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4))
    rows = result.counts.shape[0]
    for i in range(rows):
        if result.source == "all":
            name = _RGBA[i] if result.image.channels >= 3 else f"channel {i}"
            colour = _COLOURS[i] if result.image.channels >= 3 else None
        else:
            name, colour = result.source.replace("_", " "), "black"
        ax.stairs(result.counts[i], result.edges, label=name, color=colour)
    ax.set_xlim(result.lo, result.hi)
    ax.set_yscale("log" if log else "linear")
    ax.set_xlabel("value")
    ax.set_ylabel("count (log)" if log else "count")
    im = result.image
    ax.set_title(title or f"{im.label or im.image_id or 'image'}: {im.width}x{im.height} "
                 f"{im.format}, {result.source}, {result.bins} bins over "
                 f"[{result.lo:g}, {result.hi:g})")
    ax.legend()
    return ax
