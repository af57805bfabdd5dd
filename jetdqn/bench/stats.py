"""Statistics over a case's runs (median and spread), and the order the runs go in."""

from __future__ import annotations

import statistics

from .cases import Case

SUMMARISED = ("s_per_1000_steps", "env_steps_per_s", "acting_env_steps_per_s", "updates_per_s", "frames_drawn",
              "cpu_avg", "cpu_max", "gpu_load", "emulator_cpu", "learner_cpu", "power_w", "energy_j_per_1000")


def summarise(case: Case, runs: list[dict]) -> dict:
    """A row: the median of each number over the runs that succeeded, and the spread of the time."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"case": case, "name": case.name, "status": f"failed: {runs[0]['error']}", "runs": runs}
    out: dict = {"case": case, "name": case.name, "status": "ok", "repeats": len(ok), "runs": runs,
                 "tx1_s": case.tx1_s}
    for key in SUMMARISED:
        vals = [r[key] for r in ok if r.get(key) is not None]
        out[key] = statistics.median(vals) if vals else None
        if key == "s_per_1000_steps":
            # None from one run: a spread of 0.00 read as a time measured exactly alike again and again
            out["spread"] = (max(vals) - min(vals)) if len(vals) > 1 else None
    beside = [r["others_cpu"] for r in ok if r.get("others_cpu") is not None]
    out["others_cpu"] = max(beside) if beside else None   # the worst run: its time is in the median's company
    out["cudnn_applied"] = ok[0].get("cudnn_applied")
    out["tf32"] = ok[0].get("tf32")
    out["command"] = ok[0]["command"]
    return out


def rounds(cases: list[Case], repeats: int) -> list[tuple[Case, int]]:
    """The order of the runs: every case once, then every case again (a case with its own ``repeats`` drops
    out after those). A machine whose speed drifts over minutes then shifts every row alike, and the ratios
    against the baseline stay fair; case after case, a slow spell would land on whichever rows ran in it."""
    most = max([c.repeats or repeats for c in cases], default=0)
    return [(c, rep) for rep in range(most) for c in cases if rep < (c.repeats or repeats)]
