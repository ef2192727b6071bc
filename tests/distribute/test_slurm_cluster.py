"""tfaccel's own cluster of a Slurm job step (``tfaccel.distribute.slurm``), from the variables
srun sets: what TensorFlow's SlurmClusterResolver gets wrong, put right. No Slurm needed: the
name look-ups and the port check are replaced; tests/distribute/test_slurm.py runs the real one.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from tfaccel.core.cluster import slurm_allocation
from tfaccel.distribute import ClusterConfig, ClusterConfigError
from tfaccel.distribute.slurm import (
    PORT_BASE_ENV,
    PORT_RANGE,
    expand_hostlist,
    port_is_free,
    slurm_cluster,
    slurm_port_base,
)


def step(rank: int, nodes: str, per_node: str, tasks: int, **more: str) -> dict[str, str]:
    return {
        "SLURM_JOB_ID": "4242",
        "SLURM_STEP_ID": "0",
        "SLURM_STEP_NUM_TASKS": str(tasks),
        "SLURM_PROCID": str(rank),
        "SLURM_STEP_NODELIST": nodes,
        "SLURM_STEP_TASKS_PER_NODE": per_node,
        **more,
    }


def build(
    env: dict[str, str],
    *,
    resolves: Callable[[str], bool] = lambda host: True,
    lookup: Callable[[str], str | None] = lambda host: None,
    port_free: Callable[[int], bool] = lambda port: True,
) -> ClusterConfig:
    allocation = slurm_allocation(env)
    assert allocation is not None
    return slurm_cluster(allocation, env, resolves=resolves, lookup=lookup, port_free=port_free)


def test_slurm_node_lists_expand_in_slurms_order() -> None:
    assert expand_hostlist("n[1-2],m5,o[08-10]") == ["n1", "n2", "m5", "o08", "o09", "o10"]
    assert expand_hostlist("gpu[9-10]") == ["gpu9", "gpu10"]
    assert expand_hostlist("a[1-2,7]-ib") == ["a1-ib", "a2-ib", "a7-ib"]
    for bad in ("", "n[1-", "n[a-b]"):
        with pytest.raises(ClusterConfigError, match="SLURM_STEP_NODELIST"):
            expand_hostlist(bad)


def test_ranks_follow_slurms_node_order_not_the_names_sorted_as_text() -> None:
    # SlurmClusterResolver sorts "node10" before "node9" and gives rank 0 node10's address
    env = step(0, "node[9-10]", "2(x2)", 4, SLURMD_NODENAME="node9", SLURM_LOCALID="0")
    config = build(env)
    base = slurm_port_base(env, 2)
    assert config.cluster["worker"] == (
        f"node9:{base}", f"node9:{base + 1}", f"node10:{base}", f"node10:{base + 1}",
    )  # fmt: skip
    assert (config.task, config.is_chief, config.source) == ("worker:0", True, "Slurm")
    assert build({**env, "SLURM_PROCID": "3", "SLURMD_NODENAME": "node10",
                  "SLURM_LOCALID": "1"}).task == "worker:3"  # fmt: skip


def test_a_task_placed_other_than_by_block_distribution_is_refused() -> None:
    env = step(1, "node[1-2]", "1(x2)", 2, SLURMD_NODENAME="node1", SLURM_LOCALID="0")
    with pytest.raises(ClusterConfigError) as caught:
        build(env)
    assert "--distribution=block" in (caught.value.fix or "")


def test_ports_move_with_the_job_and_the_step_and_stay_below_the_ephemeral_range() -> None:
    bases = {
        slurm_port_base({"SLURM_JOB_ID": str(job), "SLURM_STEP_ID": str(s)}, 2)
        for job in range(1000, 1400)
        for s in (0,)
    }
    assert len(bases) == 400  # 400 consecutive jobs: 400 different windows
    assert all(PORT_RANGE[0] <= b and b + 16 <= PORT_RANGE[1] for b in bases)
    one = {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0"}
    assert slurm_port_base(one, 2) != slurm_port_base({**one, "SLURM_STEP_ID": "1"}, 2)
    assert slurm_port_base({**one, PORT_BASE_ENV: "29500"}, 2) == 29500
    with pytest.raises(ClusterConfigError, match=PORT_BASE_ENV):
        slurm_port_base({**one, PORT_BASE_ENV: "80"}, 2)
    wide = slurm_port_base({"SLURM_JOB_ID": "5"}, 40)  # 40 tasks a node: a 48-port window
    assert (wide - PORT_RANGE[0]) % 48 == 0


def test_a_taken_port_is_named_with_the_fix_before_tensorflow_tries_it() -> None:
    env = step(1, "vm", "2", 2)
    base = slurm_port_base(env, 2)
    with pytest.raises(ClusterConfigError) as caught:
        build(env, port_free=lambda port: port != base + 1)
    assert f"Port {base + 1}" in caught.value.what and PORT_BASE_ENV in (caught.value.fix or "")


def test_port_is_free_sees_a_listening_socket() -> None:
    with socket.socket() as held:
        held.bind(("", 0))
        held.listen()
        assert not port_is_free(held.getsockname()[1])


def test_a_node_name_that_does_not_resolve_takes_slurms_node_address() -> None:
    env = step(0, "n[1-2]", "1(x2)", 2)
    known = {"n1", "10.0.0.2"}
    config = build(env, resolves=known.__contains__, lookup={"n2": "10.0.0.2"}.get)
    base = slurm_port_base(env, 1)
    assert config.cluster["worker"] == (f"n1:{base}", f"10.0.0.2:{base}")
    with pytest.raises(ClusterConfigError) as caught:
        build(env, resolves=lambda host: host == "n1", lookup=lambda host: None)
    assert "'n2'" in caught.value.what and "/etc/hosts" in (caught.value.fix or "")


def test_node_list_and_tasks_per_node_must_agree() -> None:
    with pytest.raises(ClusterConfigError, match="do not describe its tasks"):
        build(step(0, "n[1-3]", "1(x2)", 2))
