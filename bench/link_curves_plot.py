"""Each curve preset against the table it cites, log–log: docs/img/links-<preset>.png.

    python bench/link_curves_plot.py            # writes docs/img/links-*.png (docs/LINKS.md)

Bus bandwidth (GB/s) against message size (bytes): the published table's points, the curve
simddp charges (simddp.cost, 200 sizes between the table's ends) and, over 1–100 MB, the α–β
line the closed form reads. busbw = algbw · f(p), as nccl-tests prints it.
"""
from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simddp.cost import GB, bytes_s, kind_factor  # noqa: E402
from simddp.presets import LINKS  # noqa: E402


def plot(name: str, out: Path) -> None:
    data = json.loads(resources.files("simddp.presets").joinpath(
        "curves", f"{name}.json").read_text())
    t, link = data["tables"][0], LINKS[name]
    kind, p = t["kind"], t["ranks"]
    lo, hi = t["bytes"][0], t["bytes"][-1]
    sizes = [lo * (hi / lo) ** (i / 199) for i in range(200)]

    def busbw(n, s):
        return n / s / GB * kind_factor(kind, p)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    # the table's points drawn over the curve (zorder), which passes through them
    ax.loglog(t["bytes"], t["busbw_gbps"], "o", ms=4, zorder=3, label="published table (cited)")
    ax.loglog(sizes, [busbw(n, link.collective_s(kind, n, p)) for n in sizes], "-",
              label="simddp preset curve (log–log between points)")
    fit = [n for n in sizes if 1e6 <= n <= 1e8]
    ax.loglog(fit, [busbw(n, link.alpha_s + bytes_s(kind, n, p, link.busbw_gbps)) for n in fit],
              "--", label=f"α–β fit 1–100 MB: α {link.alpha_s * 1e6:.1f} µs, "
                          f"busbw {link.busbw_gbps:.1f} GB/s")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    nodes = t["nodes"]
    ax.set_title(f"{name}: {kind}, {p} ranks on {nodes} node{'s' if nodes > 1 else ''}",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    # busbw rises with size, so the lower right is empty; top left hid the curve at 1-10 MB
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def main() -> int:
    names = sorted(p.name[:-5] for p in resources.files("simddp.presets").joinpath(
        "curves").iterdir() if p.name.endswith(".json"))
    for name in names:
        out = ROOT / "docs" / "img" / f"links-{name}.png"
        plot(name, out)
        print(out.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
