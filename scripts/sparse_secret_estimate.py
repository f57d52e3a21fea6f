"""Print the modelled attacks on bootstrapping's sparse-secret encapsulation key for both
bootstrappable presets, with the model's calibration against the HE standard's table
(fhetorch/_ckks/sparse_security.py has the models and their sources; docs/parameters.md the
table this prints).

    python scripts/sparse_secret_estimate.py
"""
import sys

from fhetorch._ckks import sparse_security as est
from fhetorch.ckks import bootstrap_config, preset


def main() -> int:
    print("calibration: the primal model (core-SVP) at the HE standard's 128-bit bounds, dense ternary secrets")
    cal = est.calibrate()
    for log_n, log_q, bits in cal:
        print(f"  N = 2^{log_n}, log Q = {log_q}: {bits:.1f} bits")
    offset = 128 - max(bits for _, _, bits in cal)
    print(f"  core-SVP reads >= {offset:.1f} bits below the standard's cost model at its own bounds")
    worst = None
    for name in ("n16-bts40", "n16-bts35"):
        n, log_q = est.encapsulation_instance(preset(name))
        h = bootstrap_config(name).ephemeral_weight
        print(f"{name}: encapsulation key, N = {n}, log2(Q_0 P') = {log_q:.1f}, h = {h}, sigma = {est.SIGMA}")
        for label, cost in (("classical", est.CLASSICAL), ("quantum", est.QUANTUM)):
            for a in est.attacks(n, log_q, h, cost):
                if label == "classical" or "meet" not in a.name:
                    print(f"  {label:9s} {a.name:42s} {a.bits:7.1f} bits  ({a.detail})")
        a = est.cheapest(n, log_q, h)
        worst = a if worst is None or a.bits < worst.bits else worst
    print(f"cheapest modelled attack: {worst.bits:.1f} bits core-SVP (~{worst.bits + offset:.0f} in the HE standard's "
          f"model): {worst.name}")
    return 0 if worst.bits >= 128 else 1


if __name__ == "__main__":
    sys.exit(main())
