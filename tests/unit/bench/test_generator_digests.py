"""The cluster generator's output, pinned byte for byte for every (shape, seed) the repo uses.

The benchmark figures (docs/performance.md), the differential allowances
(tests/differential/allowances.json names generated pods), the golden decisions
(tests/unit/scheduling/test_placement_identical.py, tests/unit/plugins/test_affinity_golden.py)
and the e2e comparison of simulate with run (tests/e2e/test_simulate_predicts_run.py) all stand on
these bytes: a refactoring of the generator must leave every digest here as it is. A change that
is meant to move the output must bump ``GENERATOR_VERSION`` and record the new digests
(``DESCHED_RECORD_DIGESTS=1`` prints them).

The digests were recorded on the two generators before they became one package
(benchmarks/generator.py and tests/e2e/clustergen.py, commit fce1f79).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.generator import ClusterSpec, GenerationStats, live, manifests, write_snapshot  # noqa: E402

RECORD = os.environ.get("DESCHED_RECORD_DIGESTS") == "1"

#: (nodes, pods per node, seed) -> SHA-256 of the compact snapshot. Where each is used:
SNAPSHOTS: dict[tuple[int, int, int], str] = {
    # tests/unit/bench/test_generator.py, tests/unit/framework/test_cycle_semantics.py
    (20, 30, 7): "beb4b71f39c4ba400da6e9e3dbaf90cdf4563b8e534878919ae74b268503352a",
    (20, 30, 8): "6e5a25fc668ff05880d2a1ae7c773cb8389b58384510953754f40dce3218c850",
    (40, 30, 1): "e319fdca73874e78e3680c4951b7415f8bb1b9b598e4bc2a688bfdfa0858ccfa",
    # tests/unit/bench/test_benchmark_modules_run.py (``python -m benchmarks.generator --nodes 20``)
    (20, 30, 1): "8233d69014459dbecd3195b92c8941e91966be56190202702fd1e4961c548c90",
    # tests/differential/matrix.py SHAPES x SEEDS
    (20, 10, 1): "5436af8fb78858ee004a9fd3128b9754251b974c937a46634599bcb9cd82f584",
    (20, 40, 1): "57999557f25cc5b45ac20af6e6084d3952148aee96b9af431f320434b894e3aa",
    (40, 15, 1): "255dfda074ca4be6a185945251cc5b94ee506690f6f8cb648045f80c7ee5bcd8",
    (80, 8, 1): "eb56350fc94fd4ef735753d9a6fcf99b6239181fd4b9e7831e4c93fdf599577f",
    # tests/unit/scheduling/test_placement_identical.py
    (150, 10, 1): "622932e44bf5ed41b6b82e09cab7a7fc1afb6a3f399bb68ccea44b93f1938f14",
    (300, 8, 2): "45fc3e4dcd8410c6651b3e5269001a410511901f9e459a6abfed865854eec982",
    (120, 20, 3): "7eca6863521e4a094784b86d1b7712581e485b9728295044769145d1733dbde2",
    (150, 10, 4): "b1c2f7299ee4dcc1b60299a46d651c01819a37eaf77d74dda9dee65a1ff250d2",
    # tests/unit/scheduling/test_placement_structure.py, tests/unit/cluster/test_compact.py,
    # tests/unit/plugins/test_affinity_golden.py
    (120, 8, 5): "46196daef14c9a9097e88a6b62a8fa11ce310794907fac34d2a9fc046bb25976",
    (20, 15, 3): "cf5a53432f1ed0844c82deb1eb214d24ad971f07937cd6f420f32a1c81154e6f",
    (60, 30, 3): "261c2024d3fe5aafbffb932cd10c368e4cdb353c9c6e325d4574879e3d8606d8",
    # benchmarks (``python -m benchmarks --nodes 100``), tests/unit/report/test_output_scale.py,
    # tests/unit/plugins/test_eviction_reasons.py
    (100, 30, 1): "8832058dedf2b3f4d534c09b96f5a464bf90ac0e98dc7e5f0a2bd99426d9ad66",
    (300, 30, 1): "140e2cb2baca56647b65cd06aaa05366482cdb18a7d399a8e4c185649aeff253",
}
#: the benchmarks' and the extender benchmark's 1,000 nodes and the 5,000-node report test take
#: 6 and 30 s each to generate, run in the suite all the same: the benchmarks' own clusters
LARGE: dict[tuple[int, int, int], str] = {
    (1000, 30, 1): "8e12d8a4648f4246a052fc0b4588cf8828ce2ace671b335d7ad6d044fd3b528f",
    (5000, 30, 1): "da9e12034cc309f737f775ed955bad8d3db07ec3d034adf604407b58e65c665c",
}
#: ``--pretty`` output (kubectl's indentation) of one spec
PRETTY: dict[tuple[int, int, int], str] = {
    (20, 30, 7): "96f925d4081b0f38fb8759f27f26d0dbc8153c2de00c7ea6d5059e913256b4ef"
}

#: tests/e2e/test_simulate_predicts_run.py: seeds 11, 12, 13 by default (DESCHED_E2E_SEEDS), and
#: a few more, of the small live clusters (24 kwok nodes, ~150 pods)
LIVE_SEEDS: dict[int, str] = {
    1: "6017af723d5c2bb5d62a1c6f20b1b82d131fe15bff0ca64f33c3d18d2fe4e9b1",
    2: "ce35975a21fa987eea10d2d2f095f4aa2adc4f030b6b406e45bf8c752eb6362b",
    7: "24b95d3ead774e40a9a36962d86a3260e2a3551dc777a7b132803b2fca5fbe9f",
    11: "a61935e3476f6806095f1c5684bc2043fbbf3e3ab22f319ec981f387d196f8c2",
    12: "8225214bfae8a1a481710fa51a8565669c246d778779431f2c4ec2be01174ba2",
    13: "5bf4dbe1d54dfeda52f8b53ee0901b08299870f08d80cf98d2883b387e3fca68",
    14: "fa3dc7cc53c816e418d8535ebe41ee0f31d8521d8708535674001c817704f5e4",
    21: "95bfeca32df74494719db629c26352f3755b6a3ac1f2543477477b67b5f2fabc",
}


class _Sha:
    """A binary file that keeps only the SHA-256 of what is written to it."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.h.update(data)
        return len(data)


def _snapshot_digest(key: tuple[int, int, int], *, pretty: bool = False) -> tuple[str, GenerationStats]:
    sink = _Sha()
    stats = write_snapshot(ClusterSpec(*key), sink, pretty=pretty)  # type: ignore[arg-type]
    return sink.h.hexdigest(), stats


def _check(kind: str, key: object, got: str, want: str) -> None:
    if RECORD:
        print(f"{kind} {key!r}: {got!r},")
        return
    assert got == want, f"{kind} {key}: the generator's output changed"


@pytest.mark.parametrize("key", list(SNAPSHOTS), ids=lambda k: "n{}-ppn{}-s{}".format(*k))
def test_snapshot_bytes_unchanged(key: tuple[int, int, int]) -> None:
    digest, stats = _snapshot_digest(key)
    _check("snapshot", key, digest, SNAPSHOTS[key])
    assert stats.counts["Node"] == key[0]


@pytest.mark.parametrize("key", list(LARGE), ids=lambda k: "n{}-ppn{}-s{}".format(*k))
def test_large_snapshot_bytes_unchanged(key: tuple[int, int, int]) -> None:
    digest, _ = _snapshot_digest(key)
    _check("large", key, digest, LARGE[key])


@pytest.mark.parametrize("key", list(PRETTY))
def test_pretty_bytes_unchanged(key: tuple[int, int, int]) -> None:
    digest, _ = _snapshot_digest(key, pretty=True)
    _check("pretty", key, digest, PRETTY[key])


def _live_manifests(seed: int) -> list[Any]:
    """Everything the e2e test creates from a live cluster, in the order it creates it."""
    c = live.generate(seed)
    out: list[Any] = [manifests.PRIORITY_CLASS, live.POLICY, c.namespace]
    out += [[n.name, n.zone, n.cordoned, manifests.node_manifest_args(n)] for n in c.nodes]
    out += [manifests.deployment_manifest(c, d) for d in c.deployments]
    out += [manifests.pdb_manifest(c, d) for d in c.deployments]
    out += [c.tainted, c.unlabelled, c.pods, live.ZONES, live.TAINT_KEY, live.SSD]
    return out


@pytest.mark.parametrize("seed", list(LIVE_SEEDS))
def test_live_cluster_manifests_unchanged(seed: int) -> None:
    # keys sorted: a manifest is sent to the API server, which decodes it and stores the object in
    # its own field order, so what must not change is the object, not the order a builder writes
    # its keys in (the snapshots above keep their byte order: desched reads those files as written)
    text = json.dumps(_live_manifests(seed), separators=(",", ":"), sort_keys=True)
    _check("live", seed, hashlib.sha256(text.encode()).hexdigest(), LIVE_SEEDS[seed])
