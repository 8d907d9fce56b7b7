"""Predict, run for real and compare: is the simulator right on this model and network?

    from realrun.workflows.validate import ValidateSettings, validate
    report = validate(ValidateSettings(model="mlp-8x1024", bucket_mbs=(1, 10, 100)))
    print(report.text()); report.write("out/validate")

:mod:`~realrun.workflows.validate.settings` (what to validate),
:mod:`~realrun.workflows.validate.pipeline` (the steps, in order),
:mod:`~realrun.workflows.validate.inputs` (calibrate and profile on the same ranks),
:mod:`~realrun.ddp_host_costs` (what each DDP implementation costs the host),
:mod:`~realrun.workflows.validate.probes` (link and host measured in the same rounds as the runs),
:mod:`~realrun.workflows.validate.timeline` (one measured step, span by span) and
:mod:`~realrun.workflows.validate.report` (text, JSON, files).
"""
from realrun.workflows.validate.inputs import calibrate_link, measure_profile, scale_to_compute_only
from realrun.workflows.validate.pipeline import MeasureFailed, measure, predict, validate
from realrun.workflows.validate.report import ValidationReport
from realrun.workflows.validate.settings import ValidateSettings
from realrun.workflows.validate.timeline import measure_timeline

__all__ = ["MeasureFailed", "ValidateSettings", "ValidationReport", "calibrate_link",
           "measure", "measure_profile", "measure_timeline", "predict",
           "scale_to_compute_only", "validate"]
