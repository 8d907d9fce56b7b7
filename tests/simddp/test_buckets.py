"""The bucket rule, by hand and against torch's own implementation.

torch DDP rebuilds its buckets after the first iteration with
``torch.distributed._compute_bucket_assignment_by_size(tensors, [first_bytes, cap_bytes],
expect_sparse_gradient, tensor_indices)``: tensors in gradient-ready order, their ids as
``tensor_indices``, and then it keeps the buckets in that order (no sort). simddp must group
exactly the same ids in exactly the same order.
"""
from __future__ import annotations

import numpy as np
import pytest

from simddp.planning.buckets import assign_buckets
from simddp.planning.plans import group_tensors
from simddp.inputs.profile import Layer, ModelProfile
from simddp.planning.strategy import MB, make_strategy

FP32 = 4  # bytes per element of the torch.empty tensors below


# --- by hand -------------------------------------------------------------------------------

def test_docstring_example_add_then_close():
    # 600 < 1000: keep; 1200 >= 1000: close [0, 1]. Then the cap: 600 < 1500; 1200 < 1500;
    # the input ends: [2, 3] is the last, partly filled bucket.
    assert assign_buckets([600, 600, 600, 600], limits_bytes=(1000, 1500)) == [[0, 1], [2, 3]]


def test_a_bucket_closes_exactly_at_its_limit():
    assert assign_buckets([500, 500, 500, 1000, 1], (1000, 1500)) == [[0, 1], [2, 3], [4]]


def test_a_tensor_is_never_split():
    # Bigger than the cap: it fills a bucket on its own (added first, then the bucket closes).
    assert assign_buckets([10, 5000, 10, 10], (100, 100)) == [[0, 1], [2, 3]]
    assert assign_buckets([5000, 10], (100, 100)) == [[0], [1]]


def test_first_bucket_bigger_than_the_cap():
    assert assign_buckets([40, 40, 40, 40, 40], (100, 50)) == [[0, 1, 2], [3, 4]]


def test_the_last_limit_repeats_and_edge_inputs():
    assert assign_buckets([7, 7, 7], (7,)) == [[0], [1], [2]]
    assert assign_buckets([3], (100, 100)) == [[0]]
    assert assign_buckets([], (100, 100)) == []
    for bad in [(), (0, 100), (100, -1)]:
        with pytest.raises(ValueError, match="bucket limits must be > 0 bytes"):
            assign_buckets([1, 2], bad)


def test_toy_model_groups():
    toy = ModelProfile("toy", tuple(Layer(f"l{i}", (4 * MB,)) for i in range(3)))
    assert group_tensors(toy, make_strategy("bucketed", 8)) == [(2, 1), (0,)]
    # torch DDP's 1 MiB first bucket: the 4 MiB last layer fills it alone.
    assert group_tensors(toy, make_strategy("ddp", 8)) == [(2,), (1, 0)]


# --- against torch -------------------------------------------------------------------------

def torch_buckets(profile: ModelProfile, limits_bytes: list[int]) -> list[tuple[int, ...]]:
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    order = list(profile.ready_order_ids())
    tensors = [torch.empty(profile.tensor_bytes[t] // FP32, dtype=torch.float32) for t in order]
    buckets, _limits = dist._compute_bucket_assignment_by_size(
        tensors, limits_bytes, [False] * len(order), order)
    return [tuple(b) for b in buckets]


def test_torch_first_bucket_is_ours():
    dist = pytest.importorskip("torch.distributed")
    assert make_strategy("ddp").first_bucket_bytes == dist._DEFAULT_FIRST_BUCKET_BYTES


def random_bucket_case(rng: np.random.RandomState):
    """Element counts around the limits: tiny, medium, exactly at, just off, and over the cap."""
    cap_bytes = int(rng.choice([FP32 * int(rng.randint(1, 300_000)), int(rng.randint(1, 10**6)),
                                MB]))
    first_bytes = int(rng.choice([MB, cap_bytes, 2 * cap_bytes + 1, int(rng.randint(1, 10**6))]))
    limit_elems = max(1, max(cap_bytes, first_bytes) // FP32)

    def count() -> int:
        kind = rng.randint(6)
        if kind == 0:
            return int(rng.randint(1, 100))
        if kind == 1:
            return int(rng.randint(1, 300_000))
        if kind == 2:                                      # exactly a limit, or half of one
            return max(1, int(rng.choice([cap_bytes, first_bytes, cap_bytes // 2])) // FP32)
        if kind == 3:                                      # one element off a limit
            return max(1, cap_bytes // FP32 + int(rng.choice([-1, 1])))
        if kind == 4:                                      # bigger than the cap
            return limit_elems * int(rng.randint(2, 4))
        return max(1, limit_elems // int(rng.randint(2, 9)))

    n_layers = rng.randint(1, 61) if rng.rand() < 0.9 else 1
    layers = []
    for i in range(n_layers):
        k = rng.randint(0, 5)
        layers.append(Layer(f"l{i}", tuple(FP32 * count() for _ in range(k))))
    if not any(layer.grad_bytes for layer in layers):
        layers[0] = Layer("l0", (FP32 * count(),))                # at least one tensor
    profile = ModelProfile("random", tuple(layers))
    if rng.rand() < 0.4:
        profile = ModelProfile("random", profile.layers,
                               ready_order=tuple(rng.permutation(profile.n_tensors).tolist()))
    return profile, first_bytes, cap_bytes


@pytest.mark.parametrize("seed", range(6))
def test_bucket_rule_matches_torch_on_random_models(seed):
    pytest.importorskip("torch")
    rng = np.random.RandomState(seed)
    for case in range(35):
        profile, first_bytes, cap_bytes = random_bucket_case(rng)
        where = f"seed {seed} case {case}: first {first_bytes} cap {cap_bytes}"
        ddp = make_strategy("ddp", cap_bytes / MB, first_bucket_mb=first_bytes / MB)
        assert (ddp.first_bucket_bytes, ddp.bucket_bytes) == (first_bytes, cap_bytes), where
        expected = torch_buckets(profile, [first_bytes, cap_bytes])
        assert group_tensors(profile, ddp) == expected, where
        bucketed = make_strategy("bucketed", cap_bytes / MB)
        assert group_tensors(profile, bucketed) == torch_buckets(profile, [cap_bytes, cap_bytes])


@pytest.mark.parametrize("counts, first_bytes, cap_bytes", [
    ([250, 250, 250, 250], 2000, 2000),          # every bucket exactly at its limit
    ([250, 249, 1, 500], 2000, 2000),            # 1 element short, then exactly
    ([250, 251, 500], 2000, 2000),               # 1 element over
    ([10**6], 4, 4),                             # one tensor, far over the cap
    ([1], MB, 25 * MB),                          # one tensor, far under
    ([100, 100, 100, 100, 100, 100], 2401, 800),  # first bucket bigger than the cap
    ([2**18, 2**18, 2**18], MB, MB),             # torch DDP's 1 MiB: 1 MiB exactly per bucket
])
def test_bucket_rule_matches_torch_at_the_edges(counts, first_bytes, cap_bytes):
    pytest.importorskip("torch")
    # One layer per tensor, ready in reverse; then the same tensors in a measured order.
    layers = tuple(Layer(f"l{i}", (FP32 * c,)) for i, c in enumerate(counts))
    for order in (None, tuple(range(len(counts)))):
        profile = ModelProfile("edge", layers, ready_order=order)
        ddp = make_strategy("ddp", cap_bytes / MB, first_bucket_mb=first_bytes / MB)
        assert group_tensors(profile, ddp) == torch_buckets(profile, [first_bytes, cap_bytes])
