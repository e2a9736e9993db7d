"""PHRED-like calibration of raw VEP scores against a background of sampled SNVs.

* :mod:`~hexamer.calibration.table`: :class:`Calibration` (raw -> PHRED, the sign convention, the
  JSON file, the check against a model and settings);
* :mod:`~hexamer.calibration.background`: :func:`calibrate`, the background from a FASTA.

    from hexamer.calibration import Calibration, calibrate
    from hexamer.ism import ism_settings
    cal = calibrate(carbon, "ref.fa.gz", ism_settings(recipe="next_base"), n_regions=50, seed=1)
    cal.save("calib.json")
    Calibration.load("calib.json").phred(-3.2)
"""

from hexamer.calibration.background import calibrate, sample_regions
from hexamer.calibration.table import (
    ORIENTATION,
    Calibration,
    CalibrationError,
    CalibrationMismatch,
)

__all__ = [
    "ORIENTATION",
    "Calibration",
    "CalibrationError",
    "CalibrationMismatch",
    "calibrate",
    "sample_regions",
]
