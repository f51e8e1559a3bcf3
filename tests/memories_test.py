"""Memory kinds and host offloading (minijax/named_sharding.py memory_kind, minijax/dispatch.py
device_put_p, minijax/ad_checkpoint.py offloading policies), each checked against real JAX:
values, memory kinds of arrays and buffers, the lowered program's memory-kind attributes and
placement custom calls, and the compiled program's memory statistics. Named like JAX's
tests/memories_test.py."""

import contextlib
import io

import jax
import jax.ad_checkpoint
import numpy as np
import pytest

import minijax
import minijax.ad_checkpoint

MODULES = [("jax", jax), ("minijax", minijax)]
KINDS = ["device", "pinned_host", "unpinned_host"]


def _x():
    return np.arange(16, dtype=np.float32).reshape(8, 2) / 7.0


def _host(J, kind="pinned_host"):
    return J.sharding.SingleDeviceSharding(J.devices()[0], memory_kind=kind)


def test_memory_kind_on_shardings_matches_jax():
    for _, J in MODULES:
        d = J.devices()[0]
        S = J.sharding.SingleDeviceSharding
        assert S(d).memory_kind == "device"
        assert S(d, memory_kind="device") == S(d) and S(d, memory_kind="pinned_host") != S(d)
        assert S(d).with_memory_kind("pinned_host") == S(d, memory_kind="pinned_host")
        mesh = J.make_mesh((1,), ("i",))
        ns = J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("i"),
                                      memory_kind="unpinned_host")
        assert ns.memory_kind == "unpinned_host"
        assert ns.with_memory_kind("device").memory_kind == "device"
    msgs = []
    for _, J in MODULES:
        with pytest.raises(ValueError) as e:
            J.sharding.SingleDeviceSharding(J.devices()[0], memory_kind="hbm")
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("kind", KINDS)
def test_device_put_between_memory_kinds(kind):
    got = {}
    for name, J in MODULES:
        on_dev = J.device_put(_x(), J.devices()[0])
        moved = J.device_put(on_dev, _host(J, kind))
        back = J.device_put(moved, J.sharding.SingleDeviceSharding(J.devices()[0]))
        bufs = [s.data.sharding.memory_kind for s in moved.addressable_shards]
        got[name] = (moved.sharding.memory_kind, back.sharding.memory_kind, np.asarray(moved),
                     np.asarray(back))
        assert bufs == [kind] if J is jax else moved.device_buffer().sharding.memory_kind == kind
    assert got["minijax"][:2] == got["jax"][:2] == (kind, "device")
    np.testing.assert_array_equal(got["minijax"][2], got["jax"][2])
    np.testing.assert_array_equal(got["minijax"][3], _x())


def test_jit_out_shardings_in_host_memory_lowered_and_compiled_as_jax():
    out = {}
    for name, J in MODULES:
        mesh = J.make_mesh((2,), ("i",), devices=J.devices()[:2])
        shardings = [_host(J), J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("i"),
                                                        memory_kind="pinned_host")]
        for k, s in enumerate(shardings):
            f = J.jit(J.numpy.tanh, out_shardings=s)
            x = J.numpy.asarray(_x())  # uncommitted: it may go where out_shardings says
            r = f(x)
            text = f.lower(x).as_text()
            stats = f.lower(x).compile().memory_analysis()
            out[name, k] = dict(
                kind=r.sharding.memory_kind, value=np.asarray(r),
                result_kind='mhlo.memory_kind = "pinned_host"' in text.split("{\n", 2)[1],
                placement="@annotate_device_placement" in text
                and '_xla_buffer_placement = "pinned_host"' in text,
                stats={f: getattr(stats, f) for f in ("argument_size_in_bytes",
                                                       "output_size_in_bytes",
                                                       "host_output_size_in_bytes",
                                                       "host_temp_size_in_bytes")})
    for k in range(2):
        mj, jx = out["minijax", k], out["jax", k]
        np.testing.assert_allclose(mj.pop("value"), jx.pop("value"), rtol=1e-6)
        assert mj == jx and jx["kind"] == "pinned_host" and jx["placement"]


def _park_on_host(J):
    jnp = J.numpy
    to_host, to_dev = _host(J), J.sharding.SingleDeviceSharding(J.devices()[0])

    def f(t):  # park t on the host, compute there, bring the result back
        return jnp.sum(J.device_put(J.device_put(t, to_host) ** 2, to_dev))
    return f


def test_device_put_inside_jit():
    vals = {}
    for name, J in MODULES:
        f = _park_on_host(J)
        # (no grad here: JAX's raises, its cotangent types carry the memory space; gradients
        # through offloaded values are checked with the remat policies below)
        vals[name] = (J.jit(f)(_x()), f(J.numpy.asarray(_x())))
        assert str(J.make_jaxpr(f)(_x())).count("device_put[") == 2
    for a, b in zip(vals["minijax"], vals["jax"]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5)


def _policies(J):
    cp = J.checkpoint_policies
    return [cp.offload_dot_with_no_batch_dims("device", "pinned_host"),
            cp.save_and_offload_only_these_names(
                names_which_can_be_saved=[], names_which_can_be_offloaded=["h"],
                offload_src="device", offload_dst="pinned_host")]


def _offloading_loss(J, policy):
    jnp = J.numpy

    def layer(x, w):
        h = J.ad_checkpoint.checkpoint_name(jnp.sin(x @ w), "h")
        return jnp.tanh(h @ w.T)

    def loss(w, x):
        f = J.checkpoint(layer, policy=policy)
        return jnp.sum(f(f(x, w), w) ** 2)
    return loss


@pytest.mark.parametrize("which", [0, 1], ids=["offload_dots", "offload_named"])
def test_remat_offload_policies_match_jax(which):
    rng = np.random.RandomState(0)
    x = rng.randn(4, 4).astype(np.float32)
    w = (rng.randn(4, 4) * 0.3).astype(np.float32)
    got = {}
    for name, J in MODULES:
        loss = _offloading_loss(J, _policies(J)[which])
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            J.ad_checkpoint.print_saved_residuals(loss, w, x)
        lines = buf.getvalue().splitlines()
        stats = J.jit(J.grad(loss)).lower(w, x).compile().memory_analysis()
        got[name] = dict(grad=np.asarray(J.jit(J.grad(loss))(w, x)),
                         eager=np.asarray(J.grad(loss)(w, x)), n=len(lines),
                         offloaded=sum("device_put" in ln for ln in lines),
                         host_temp=stats.host_temp_size_in_bytes)
    mj, jx = got["minijax"], got["jax"]
    for k in ("grad", "eager"):
        np.testing.assert_allclose(mj.pop(k), jx.pop(k), rtol=1e-5, atol=1e-6)
    assert mj == jx and jx["offloaded"] > 0


def test_offload_policy_rejects_a_name_both_saved_and_offloaded():
    for _, J in MODULES:
        with pytest.raises(ValueError, match="should be exclusive"):
            J.checkpoint_policies.save_and_offload_only_these_names(
                names_which_can_be_saved=["h"], names_which_can_be_offloaded=["h"],
                offload_src="device", offload_dst="pinned_host")


def _placed(J):
    """`_x()` placed on the first device and on a mesh of two: what `_moves` moves."""
    mesh = J.make_mesh((2,), ("i",), devices=J.devices()[:2])
    named = J.sharding.NamedSharding(mesh, J.sharding.PartitionSpec("i"))
    return J.block_until_ready((J.device_put(_x(), J.devices()[0]), J.device_put(_x(), named)))


def _moves(J, x, nx):
    """Arrays moved between memory kinds: on one device, on a mesh of two, by memory space."""
    S, d = J.sharding.SingleDeviceSharding, J.devices()[0]
    out = {}
    for kind in KINDS[1:]:
        h = J.device_put(x, S(d, memory_kind=kind))
        out[kind] = [h, J.device_put(h, S(d))]  # (JAX's device_put(h, d) raises)
        nh = J.device_put(nx, nx.sharding.with_memory_kind(kind))
        out[kind] += [nh, J.device_put(nh, nx.sharding)]
    hs = J.device_put(x, J.memory.Space.Host)
    out["space"] = [hs, J.device_put(hs, J.memory.Space.Device)]
    return out


def test_memory_kind_moves_copy_buffer_to_buffer_as_jax(monkeypatch):
    """device <-> host memory copies the device buffer (JAX's
    batched_copy_array_to_devices_with_sharding), never through a host NumPy array: the
    host-fetch and host-upload paths raise here. Values, shardings, memory kinds and the
    committed flag are JAX's."""
    import minijax.compiler as mc
    from minijax.array import Array

    want = _moves(jax, *_placed(jax))
    copies = []
    real_copy = mc.copy_buffer

    def spy(x, s):
        copies.append(s.memory_kind)
        return real_copy(x, s)

    def no_host(*a, **k):
        raise AssertionError("a memory-kind move went through a host NumPy array")
    with monkeypatch.context() as m:
        placed = _placed(minijax)  # placed before the patches
        m.setattr(mc, "copy_buffer", spy)
        m.setattr(Array, "_value", no_host)
        m.setattr(mc, "device_put", no_host)
        m.setattr(mc, "device_put_sharded", no_host)
        got = _moves(minijax, *placed)
    assert len(copies) == 10 and set(copies) == {"device", "pinned_host", "unpinned_host"}
    for key in want:
        for a, b in zip(got[key], want[key], strict=True):
            assert (a.sharding.memory_kind, a.committed) == (b.sharding.memory_kind, b.committed)
            assert a.sharding.device_set == b.sharding.device_set
            assert [s.data.sharding.memory_kind for s in a.addressable_shards] == \
                [s.data.sharding.memory_kind for s in b.addressable_shards]
            assert a.device_buffer().sharding.memory_kind == b.sharding.memory_kind
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            np.testing.assert_array_equal(np.asarray(a), _x())
