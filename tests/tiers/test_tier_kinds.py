"""Tier kinds are a registry (kvmath/tiers/kinds/, one module each): every tier names a kind, and
a kind declared in a test (an object store with a per-request GET latency, priced at its own
dollars per GB) is reloaded from by compare, priced by reuse and placed in the node's plan by
tiers, as a module of its own would be."""
import json
import pkgutil

import pytest

from kvmath.cli.main import main
from kvmath.tables.rows import bundled
from kvmath.tiers import kinds
from kvmath.tiers.build import HBM_TIER, pool_tiers
from kvmath.tiers.kind import TierKind
from kvmath.tiers.records import GPU_HOST_LINK, Hop, Tier

#: a GET's fixed cost, s, and the object size and GETs in flight per NIC (the test's own)
GET_S, OBJECT_BYTES, IN_FLIGHT = 0.02, 8 << 20, 16
#: its capacity's price, USD per GB, and what a node is given of it
USD_PER_GB, CAPACITY = 0.02, 1e15

OBJECT_STORE = TierKind(
    name="object-store", about="an object store read over one 400G NIC per GPU (a test's)",
    price=USD_PER_GB, plan=2.5, plan_tier="objstore", holds=lambda node: CAPACITY,
    tiers={"objstore": Tier("objstore", "an object store over one NIC per GPU",
                            (Hop("nic-400g", 1, scope="per-gpu",
                                 requests=(OBJECT_BYTES, GET_S, IN_FLIGHT)),
                             Hop(GPU_HOST_LINK, 1)), kind="object-store")})


def _clear():
    from kvmath.logic.runtime import DATA, portable_data
    bundled.cache_clear()
    portable_data.cache_clear()
    DATA.__dict__.clear()  # the tables the logic read, built again on first use


@pytest.fixture
def object_store(monkeypatch):
    """OBJECT_STORE registered for one test, as its module would register it."""
    monkeypatch.setitem(kinds.KINDS, OBJECT_STORE.name, OBJECT_STORE)
    _clear()
    yield OBJECT_STORE
    monkeypatch.delitem(kinds.KINDS, OBJECT_STORE.name)
    _clear()


def _run(capsys, *argv):
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_every_kind_module_is_registered_and_every_tier_names_one():
    modules = sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(kinds.__path__))
    assert sorted(kinds.KINDS) == modules
    every = {**bundled().tiers, **pool_tiers(), HBM_TIER.name: HBM_TIER}
    assert all(t.kind in kinds.KINDS for t in every.values())
    assert {t.kind for t in every.values()} == set(kinds.KINDS)


def test_an_unknown_kind_in_tiers_csv_is_refused(tmp_path):
    from kvmath.tables.rows import TierRow
    from kvmath.tables.schema import DataError, read
    path = tmp_path / "tiers.csv"
    path.write_text("tier,hop,count,description,source,source_location,retrieved,gpus,kind\n"
                    "floppy,gpu-host-link,1,a floppy,,,,,floppy-disk\n")
    with pytest.raises(DataError, match="kind.*unknown tier kind 'floppy-disk'"):
        read(TierRow, path)


def test_a_kind_of_your_own_is_reloaded_from_priced_and_planned(object_store, capsys):
    base = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tokens", "32768"]
    r = _run(capsys, "compare", *base, "--tier", "objstore")
    assert r["tier"] == "objstore" and r["tier_kind"] == "object-store"
    # one GET's fixed cost is in the path's latency, and a reload is never faster than it
    assert r["reload_latency_s"] >= GET_S and r["reload_s"] > GET_S
    assert [h["link"] for h in r["path"]] == ["nic-400g", "pcie-gen5-x16"]
    host = _run(capsys, "compare", *base, "--tier", "host-dram")
    assert r["reload_s"] > host["reload_s"]  # a NIC of GETs is slower than the GPU's host link

    u = _run(capsys, "reuse", *base, "--tier", "objstore")
    from kvmath.tables.rows import prices
    seconds = prices()["amortisation_months"].value * 365.25 / 12 * 86400
    assert u["capacity_usd_per_byte_s"] == pytest.approx(USD_PER_GB / 1e9 / seconds, rel=1e-6)
    assert u["write_usd_per_byte"] == 0.0  # it declares no wear
    # its price is its own, observed by nobody: no date to warn about
    assert not any("usd_per_GB" in k for k in u["prices_observed"])

    plan = _run(capsys, "tiers", "--model", "llama-3.1-8b", "--node", "dgx-h100", "--tokens",
                "32768", "--resume-rate", "2")
    rows = {t["tier"]: t for t in plan["tiers"]}
    # in its plan order: after the node's drives (2), before a pool (3)
    assert [t["kind"] for t in plan["tiers"]][:2] == ["hbm", "host-memory"]
    if "objstore" in rows:  # the tiers above it may keep every cache (nothing ages into it)
        assert rows["objstore"]["capacity_bytes"] == CAPACITY
        assert rows["objstore"]["kind"] == "object-store"
    # a node whose DRAM is small and has no drives ages caches into it
    small = _run(capsys, "tiers", "--model", "llama-3.1-8b", "--node", "dgx-h100", "--tokens",
                 "32768", "--resume-rate", "2", "--host-cache-bytes", "1e9",
                 "--disk-cache-bytes", "0")
    rows = {t["tier"]: t for t in small["tiers"]}
    assert rows["objstore"]["capacity_bytes"] == CAPACITY
    assert rows["objstore"]["resume_fraction"] > 0
    assert rows["objstore"]["capacity_usd_per_byte_s_purchase"] == pytest.approx(
        USD_PER_GB / 1e9 / seconds, rel=1e-6)


def test_a_kind_of_the_nodes_own_units_is_refused_on_a_node_without_them():
    from kvmath.logic.path import node_tier
    from kvmath.logic.runtime import ScenarioError
    from kvmath.tables.rows import nodes
    node = next(n for n in nodes().values() if n.nvme_drives)
    bare = type(node)(**{**node.__dict__, "nvme_drives": 0})
    with pytest.raises(ScenarioError, match="has no NVMe drives"):
        node_tier(bare, bundled().tiers["nvme"])
    with pytest.raises(ScenarioError, match="names drives of its own"):
        node_tier(node, bundled().tiers["nvme-gen5"])
    assert node_tier(node, bundled().tiers["nvme"]).hops[0].count == node.nvme_drives
