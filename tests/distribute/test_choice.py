"""The pure parts of tfaccel.distribute: TF_CONFIG and Slurm checks, the strategy rules, the
layer balancing and the batch arithmetic. No TensorFlow: each case is built by hand."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tfaccel.core.cluster import local_cluster, slurm_allocation
from tfaccel.core.errors import TfaccelError, UsageError
from tfaccel.distribute import ClusterConfigError, Facts, decide_strategy, parse_tf_config
from tfaccel.distribute.batches import check_divisible
from tfaccel.distribute.split import balance

TWO_WORKERS = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}


def tf_config(cluster: object = None, task: object = None, **extra: object) -> str:
    doc: dict[str, object] = dict(extra)
    if cluster is not None:
        doc["cluster"] = cluster
    if task is not None:
        doc["task"] = task
    return json.dumps(doc)


# --- TF_CONFIG -------------------------------------------------------------------------------


def test_a_valid_tf_config_gives_the_task_and_the_chief() -> None:
    config = parse_tf_config(tf_config(TWO_WORKERS, {"type": "worker", "index": 1}))
    assert config is not None
    assert (config.task, config.num_workers, config.is_chief) == ("worker:1", 2, False)
    with_chief = parse_tf_config(
        tf_config({"chief": ["a:1"], "worker": ["b:1"]}, {"type": "chief", "index": 0})
    )
    assert with_chief is not None and with_chief.is_chief and with_chief.num_workers == 2


@pytest.mark.parametrize("text", [None, "", "   "])
def test_an_unset_or_blank_tf_config_means_no_cluster(text: str | None) -> None:
    assert parse_tf_config(text) is None


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('{"cluster": {"worker": ["a:1"]}, "task": ', "is not valid JSON"),
        ("[1, 2]", "is a JSON list, not an object"),
        (tf_config(task={"type": "worker", "index": 0}), "has no cluster"),
        (tf_config({}, {"type": "worker", "index": 0}), "cluster is empty"),
        (tf_config(TWO_WORKERS), "has a cluster but no task"),
        (tf_config(TWO_WORKERS, {"type": "worker", "index": 2}), "index 2 is out of range"),
        (tf_config(TWO_WORKERS, {"type": "worker", "index": -1}), "out of range"),
        (tf_config(TWO_WORKERS, {"type": "worker", "index": "0"}), "is not an integer"),
        (tf_config(TWO_WORKERS, {"type": "chief", "index": 0}), "'chief' is not a job"),
        (tf_config({"worker": "a:1"}, {"type": "worker", "index": 0}), "not a non-empty list"),
        (tf_config({"worker": ["a"]}, {"type": "worker", "index": 0}), "not 'host:port'"),
        (tf_config({"worker": ["a:99999"]}, {"type": "worker", "index": 0}), "not 'host:port'"),
        (tf_config({"trainer": ["a:1"]}, {"type": "trainer", "index": 0}), "does not know"),
        (
            tf_config({"chief": ["a:1", "b:1"]}, {"type": "chief", "index": 0}),
            "more than one chief",
        ),
        (
            tf_config({"worker": ["a:1"], "ps": ["b:1"]}, {"type": "worker", "index": 0}),
            "parameter-server cluster",
        ),
    ],
)
def test_a_malformed_tf_config_says_what_is_wrong_and_how_to_fix_it(text: str, what: str) -> None:
    with pytest.raises(ClusterConfigError) as caught:
        parse_tf_config(text)
    err = caught.value
    assert what in err.what
    assert err.expected and err.received and err.fix
    assert isinstance(err, TfaccelError)


def test_the_received_value_of_a_long_tf_config_is_shortened() -> None:
    text = tf_config(
        {"worker": [f"host{i}:1" for i in range(100)]}, {"type": "worker", "index": 100}
    )
    with pytest.raises(ClusterConfigError) as caught:
        parse_tf_config(text)
    assert caught.value.received is not None and len(caught.value.received) < 220


def test_local_cluster_round_trips_through_tf_config() -> None:
    config = local_cluster("127.0.0.1", [2000, 2001, 2002], 2)
    again = parse_tf_config(config.to_tf_config())
    assert again is not None
    assert (again.cluster, again.task, again.is_chief) == (config.cluster, "worker:2", False)
    assert local_cluster("::1", [2000], 0).cluster["worker"] == ("[::1]:2000",)


@given(
    workers=st.lists(st.integers(1, 65535), min_size=1, max_size=6),
    index=st.integers(-3, 8),
)
def test_any_worker_list_and_index_either_parses_or_raises_a_clear_error(
    workers: list[int], index: int
) -> None:
    text = tf_config({"worker": [f"h:{p}" for p in workers]}, {"type": "worker", "index": index})
    try:
        config = parse_tf_config(text)
    except ClusterConfigError as exc:
        assert not 0 <= index < len(workers)
        assert "out of range" in exc.what
    else:
        assert config is not None and config.task_index == index


# --- Slurm -----------------------------------------------------------------------------------


STEP = {"SLURM_STEP_NODELIST": "node[1-2]", "SLURM_STEP_TASKS_PER_NODE": "2"}


def test_slurm_with_one_task_or_outside_slurm_is_no_cluster() -> None:
    assert slurm_allocation({}) is None
    assert slurm_allocation({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1"}) is None


def test_a_slurm_step_of_several_tasks_is_a_cluster() -> None:
    env = {"SLURM_JOB_ID": "7", "SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "3", **STEP}
    found = slurm_allocation(env)
    assert found is not None and (found.num_tasks, found.proc_id, found.is_chief) == (4, 3, False)


def test_slurm_tasks_per_node_are_read_from_slurms_compressed_list() -> None:
    env = {
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_NUM_TASKS": "7",
        "SLURM_PROCID": "0",
        "SLURM_STEP_NODELIST": "node[1-4]",
        "SLURM_STEP_TASKS_PER_NODE": "2(x3),1",
    }
    found = slurm_allocation(env)
    assert found is not None and found.max_tasks_per_node == 2
    with pytest.raises(ClusterConfigError, match="SLURM_STEP_TASKS_PER_NODE"):
        slurm_allocation({**env, "SLURM_STEP_TASKS_PER_NODE": "two"})


def test_the_batch_script_of_a_multi_task_job_is_told_to_use_srun() -> None:
    with pytest.raises(ClusterConfigError) as caught:
        slurm_allocation({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"})
    assert "srun" in (caught.value.fix or "")


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({"SLURM_PROCID": "1"}, "SLURM_JOB_ID"),
        ({"SLURM_JOB_ID": "7", "SLURM_PROCID": "1"}, "SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST"),
        (
            {"SLURM_JOB_ID": "7", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "0"},
            "SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE",
        ),
        (
            {"SLURM_JOB_ID": "7", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "5", **STEP},
            "none",
        ),
    ],
)
def test_half_set_slurm_variables_are_named_with_srun_as_the_fix(
    env: dict[str, str], missing: str
) -> None:
    with pytest.raises(ClusterConfigError) as caught:
        slurm_allocation(env)
    assert "half set" in caught.value.what
    assert f"missing: {missing}" in (caught.value.received or "")
    assert "srun" in (caught.value.fix or "")


def test_a_non_numeric_slurm_variable_is_an_error() -> None:
    with pytest.raises(ClusterConfigError, match="not a number"):
        slurm_allocation({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "two"})


# --- the strategy rules ----------------------------------------------------------------------


CLUSTER = parse_tf_config(tf_config(TWO_WORKERS, {"type": "worker", "index": 0}))


@pytest.mark.parametrize(
    ("facts", "kind", "communication", "devices"),
    [
        (Facts(), "one_device", "none", ("/cpu:0",)),
        (Facts(gpus=1, logical_gpus=1), "one_device", "none", ("/gpu:0",)),
        (Facts(gpus=4, logical_gpus=4), "mirrored", "NCCL", tuple(f"/gpu:{i}" for i in range(4))),
        (Facts(gpus=1, logical_gpus=2), "mirrored", "ReductionToOneDevice", ("/gpu:0", "/gpu:1")),
        (Facts(logical_cpus=2), "mirrored", "ReductionToOneDevice", ("/cpu:0", "/cpu:1")),
        (Facts(cluster=CLUSTER), "multi_worker", "RING", ()),
        (Facts(cluster=CLUSTER, gpus=2, logical_gpus=2), "multi_worker", "NCCL", ()),
        (Facts(tpu_present=True, cluster=CLUSTER, gpus=8), "tpu", "TPU", ()),
    ],
)
def test_the_strategy_rules(
    facts: Facts, kind: str, communication: str, devices: tuple[str, ...]
) -> None:
    decision = decide_strategy(facts)
    assert (decision.kind, decision.communication, decision.devices) == (
        kind,
        communication,
        devices,
    )
    assert decision.reason


def test_a_slurm_step_gives_multi_worker_and_tf_config_wins_over_slurm() -> None:
    slurm = slurm_allocation(
        {"SLURM_JOB_ID": "9", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "0", **STEP}
    )
    decision = decide_strategy(Facts(slurm=slurm))
    assert decision.kind == "multi_worker" and "Slurm job 9" in decision.reason
    assert "TF_CONFIG" in decide_strategy(Facts(cluster=CLUSTER, slurm=slurm)).reason


def test_the_evaluator_task_does_not_join_training() -> None:
    evaluator = parse_tf_config(
        tf_config({"worker": ["a:1"], "evaluator": ["b:1"]}, {"type": "evaluator", "index": 0})
    )
    assert decide_strategy(Facts(cluster=evaluator)).kind == "one_device"


def test_strategy_rejects_a_malformed_tf_config_before_importing_tensorflow() -> None:
    code = (
        "import sys, tfaccel.distribute as d\n"
        "try:\n"
        "    d.strategy(environ={'TF_CONFIG': '{\"cluster\": '})\n"
        "except d.ClusterConfigError as e:\n"
        "    print('tensorflow' in sys.modules, e.what)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("False TF_CONFIG is not valid JSON"), done.stdout + done.stderr


def test_importing_the_package_does_not_import_tensorflow() -> None:
    code = "import sys, tfaccel.distribute, tfaccel.cli.launch; print('tensorflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


# --- batch arithmetic and balancing ----------------------------------------------------------


def test_a_global_batch_divisible_by_the_replicas_gives_the_per_replica_batch() -> None:
    assert check_divisible(64, 4, "MirroredStrategy") == 16


def test_a_global_batch_not_divisible_by_the_replicas_is_a_clear_error() -> None:
    with pytest.raises(UsageError) as caught:
        check_divisible(30, 4, "MirroredStrategy")
    err = caught.value
    assert "30 examples cannot be split evenly over 4 replicas" in err.what
    assert err.fix is not None and "28" in err.fix and "32" in err.fix


@pytest.mark.parametrize(
    ("params", "parts", "expected"),
    [
        ([10, 10, 10, 30], 2, (3,)),
        ([5, 5, 5, 5], 2, (2,)),
        ([0, 100, 0, 100, 0], 2, (2,)),
        ([1, 2, 3], 3, (1, 2)),
        ([7], 1, ()),
    ],
)
def test_balance_cuts_where_the_largest_group_is_smallest(
    params: list[int], parts: int, expected: tuple[int, ...]
) -> None:
    assert balance(params, parts) == expected


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=9), st.integers(1, 9))
def test_balance_gives_non_empty_groups_no_worse_than_any_even_cut(
    params: list[int], parts: int
) -> None:
    if parts > len(params):
        with pytest.raises(ValueError):
            balance(params, parts)
        return
    bounds = balance(params, parts)
    edges = [0, *bounds, len(params)]
    assert len(bounds) == parts - 1 and all(a < b for a, b in itertools.pairwise(edges))
    largest = max(sum(params[a:b]) for a, b in itertools.pairwise(edges))
    step = len(params) / parts
    even = [0, *[round(step * i) for i in range(1, parts)], len(params)]
    if all(a < b for a, b in itertools.pairwise(even)):
        assert largest <= max(sum(params[a:b]) for a, b in itertools.pairwise(even))
