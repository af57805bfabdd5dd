"""Medians over a run's learning records (log.jsonl): the speed, the GPU's load and power, and the loads of the
emulator threads and of the loop's thread. A long run's records sample NVML many times where one bench window
(one 1000-step record on a fast GPU) holds one sample or none.

    python benchmarks/log_summary.py RUN_DIR [--skip N] [--label TEXT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def summary(run_dir: Path, skip: int = 20) -> dict:
    records = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines() if line.strip()]
    learning = [r for r in records if r.get("learning") and "s_per_1000_steps" in r][skip:]
    if not learning:
        raise SystemExit(f"error: {run_dir / 'log.jsonl'} has no learning records after the first {skip}")

    def med(key: str):
        values = [r[key] for r in learning if r.get(key) is not None]
        return round(statistics.median(values), 3) if values else None

    out = {"records": len(learning), "steps": [learning[0]["step"], learning[-1]["step"]],
           "s_per_1000_steps": med("s_per_1000_steps"), "updates_per_s": med("updates_per_s"),
           "replay_ratio": learning[-1].get("replay_ratio"), "gpu_load": med("gpu_load"),
           "emulator_cpu": med("emulator_cpu"), "learner_cpu": med("learner_cpu"), "cpu_max": med("cpu_max"),
           "num_envs": learning[-1].get("num_envs"), "emulator_cores_per_gpu": learning[-1].get("emulator_cores_per_gpu")}
    power = med("power_mw")
    if power is not None:
        out["power_w"] = round(power / 1000, 1)
        out["j_per_1000_steps"] = round(power / 1000 * out["s_per_1000_steps"], 1)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False)
    p.add_argument("run_dir", type=Path)
    p.add_argument("--skip", type=int, default=20, help="learning records left out at the start (graph capture, "
                   "cuDNN autotuning)")
    p.add_argument("--label", default="")
    args = p.parse_args(argv)
    if args.skip < 0:   # a negative count sliced from the end: the last records summarised, without a word
        p.error(f"--skip is a count of learning records, 0 or more; got {args.skip}")
    if not (args.run_dir / "log.jsonl").is_file():
        p.error(f"{args.run_dir} is not a run directory (it has no log.jsonl)")
    print(json.dumps({"label": args.label, **summary(args.run_dir, args.skip)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
