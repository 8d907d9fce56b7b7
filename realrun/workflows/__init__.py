"""realrun's top layer: the workflows that orchestrate calibrate, realrun and simddp together.

    from realrun.workflows.validate import ValidateSettings, validate
    report = validate(ValidateSettings(model="mlp-8x1024", bucket_mbs=(1, 10, 100)))

:mod:`~realrun.workflows.validate` (calibrate the link, profile the model, predict with simddp,
run every configuration for real, compare), :mod:`~realrun.workflows.selfcheck_steps` (the
five steps of ``python -m realrun selfcheck``: init, calibrate, profile, bench, validate) and
:mod:`~realrun.workflows.selfcheck` (their rank-side pieces and the environment).

The layers, imports pointing one way (tests/test_layers.py keeps it so)::

    simddp  <  realrun.launch  <  calibrate, realrun's core  <  realrun.workflows
                                                             <  realrun.commands, realrun.cli

Only this package imports calibrate from realrun; calibrate takes only realrun.launch.
"""
