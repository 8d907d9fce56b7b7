#!/usr/bin/env bash
# The validation grid of docs/VALIDATION.md: 2 models x 2 links, all strategies, >= 4 buckets.
#
#   bash bench/validate_grid.sh                 # all four cells, ~15 min on 2 cores
#   bash bench/validate_grid.sh mlp-loopback    # one cell (mlp|tfm)-(loopback|2gbit)
#
# Each cell is one `python -m realrun validate` (calibrate on the same world, profile on every
# rank, simulate, measure, compare) writing out/grid/<cell>/; the load average before and
# after is appended to out/grid/<cell>/load.txt, since figures on a busy box are not figures.
# Emulated cells need root (network namespaces + tbf).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/grid}
STEPS=${STEPS:-60}

MLP=(--model mlp-8x1024 --batch 4 --seq 16 --bucket-mb 1,4,10,40)
TFM=(--model transformer-small --layers 8 --d-model 128 --d-ff 512 --heads 4 --vocab 1024
     --batch 2 --seq 32 --bucket-mb 0.25,1,2,4,16)
EMU=(--emulate-hosts 2 --link-gbit 2)

run_cell() {
  local cell=$1; shift
  mkdir -p "$OUT/$cell"
  echo "== $cell: python -m realrun validate $* --steps $STEPS --out $OUT/$cell"
  echo "before: $(uptime)" > "$OUT/$cell/load.txt"
  python -m realrun validate "$@" --steps "$STEPS" --out "$OUT/$cell" | tee "$OUT/$cell/report.txt"
  echo "after:  $(uptime)" >> "$OUT/$cell/load.txt"
  cat "$OUT/$cell/load.txt"
}

want=${1:-all}
[[ $want == all || $want == mlp-loopback ]] && run_cell mlp-loopback "${MLP[@]}"
[[ $want == all || $want == tfm-loopback ]] && run_cell tfm-loopback "${TFM[@]}"
[[ $want == all || $want == mlp-2gbit ]] && run_cell mlp-2gbit "${MLP[@]}" "${EMU[@]}"
[[ $want == all || $want == tfm-2gbit ]] && run_cell tfm-2gbit "${TFM[@]}" "${EMU[@]}"
# Small commit-able copies of the plots for docs/VALIDATION.md (64-colour PNGs).
python - "$OUT" <<'PY'
import os, sys
from PIL import Image
out = sys.argv[1]
os.makedirs("docs/img", exist_ok=True)
for cell in sorted(os.listdir(out)):
    for name in ("compare_buckets", "compare_scatter", "compare_timeline"):
        src = os.path.join(out, cell, name + ".png")
        if os.path.exists(src):
            dst = f"docs/img/validate-{cell}-{name.split('_')[1]}.png"
            Image.open(src).convert("RGB").quantize(64).save(dst, optimize=True)
            print(f"{dst}: {os.path.getsize(dst) // 1024} KiB")
PY
python bench/validate_ab.py $(ls -d "$OUT"/*/)
exit 0
