"""Which storage fault a corrupt-* step applies on a backend that cannot apply every one mid-run: the docker
backend with kill mode "node" (a stopped container: no deletes) gets only the garbling checkpoint faults,
so no step is refused mid-run."""
from __future__ import annotations

import pytest

from clusters.base import ClusterSpec
from clusters.docker import DockerCluster
from nemesis import ConfigError, FaultPlan, Nemesis
from nemesis.schedule import corrupt_how
from nemesis.step import Step


class NoHistory:
    def invoke(self, *a, **k):
        pass

    complete = invoke


def _docker(tmp_path, kill_mode):
    return DockerCluster(ClusterSpec("corrupt-choice", tmp_path, brokers=3), kill_mode=kill_mode, client=object())


def _hows(nem, n=60):
    return {nem._resolve(Step.timed(0.0, "corrupt-checkpoint", 1.0, seed=s))[1]["how"]
            for s in range(n)}


def test_docker_node_kill_mode_chooses_only_the_garbling_checkpoint_faults(tmp_path):
    node = _docker(tmp_path, "node")
    assert node.midrun_storage_faults() == ("bitflip", "truncate", "hw-checkpoint-corrupt", "epoch-checkpoint-corrupt",
                                            "torn-last")
    assert _hows(Nemesis(node, NoHistory(), FaultPlan(["corrupt-checkpoint"], seed=1))) == {
        "hw-checkpoint-corrupt", "epoch-checkpoint-corrupt"}
    # with kill mode "process" (the container runs on) every checkpoint fault is chosen
    proc = _docker(tmp_path, "process")
    assert _hows(Nemesis(proc, NoHistory(), FaultPlan(["corrupt-checkpoint"], seed=1))) == {
        "hw-checkpoint-delete", "hw-checkpoint-corrupt", "epoch-checkpoint-delete", "epoch-checkpoint-corrupt"}


def test_a_backend_that_can_apply_none_of_a_fault_s_variants_is_refused_before_start(tmp_path):
    node = _docker(tmp_path, "node")
    node.midrun_storage_faults = lambda: ("bitflip",)
    with pytest.raises(ConfigError) as err:
        Nemesis(node, NoHistory(), FaultPlan(["corrupt-truncate"], seed=1))
    assert str(err.value) == "fault 'corrupt-truncate': the backend can apply none of truncate mid-run"
    assert corrupt_how("corrupt-checkpoint", 3, ("hw-checkpoint-corrupt",)) == "hw-checkpoint-corrupt"
