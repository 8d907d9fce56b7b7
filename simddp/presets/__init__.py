"""Built-in models, devices and links: starting points for "what if" questions.

    >>> from simddp.presets import build_profile, get_link, parse_model
    >>> build_profile(parse_model("transformer-small")).n_tensors, get_link("eth-100g").busbw_gbps
    (111, 11.0)

Models (:mod:`~simddp.presets.models`) get per-layer times from a roofline on a device
(:mod:`~simddp.presets.devices`); so does a model read from a Hugging Face config or a short
spec (:mod:`~simddp.presets.hf_config`, :mod:`~simddp.presets.architecture`); links
(:mod:`~simddp.presets.links`) come with the source of their numbers. A profile measured by ``realrun profile`` and a link from ``python -m calibrate``
beat every preset.
"""
from simddp.presets.devices import DEVICES, Device, get_device
from simddp.presets.links import DEFAULT_LINK, LINKS, get_link
from simddp.presets.models import MODEL_HELP, ModelSpec, build_profile, parse_model

__all__ = ["DEFAULT_LINK", "DEVICES", "Device", "LINKS", "MODEL_HELP", "ModelSpec",
           "build_profile", "get_device", "get_link", "parse_model"]
