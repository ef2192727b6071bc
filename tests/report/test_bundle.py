"""``tfaccel doctor --bundle FILE``: one redacted file for a bug report.

The redaction first (``tfaccel.diagnosis.redact``, pure: tricky texts, idempotence), then the
bundle built from hand-made values (``tfaccel.report.bundle``), then the real command in a
subprocess whose environment and log hold a planted user, home, host, addresses and secrets that
must not reach the file. One test runs ``--deep`` (TensorFlow's import, about 5 s on a CPU).
"""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tfaccel.diagnosis import diagnose
from tfaccel.diagnosis.redact import COMMON_NAMES, MIN_NAME_CHARS, Redactor, redact
from tfaccel.probe import identity as probe_identity
from tfaccel.probe.identity import Identity
from tfaccel.report.bundle import MAX_LOG_CHARS, build_bundle
from tfaccel.snapshot import DeepProbe, Distribution, GpuInfo, Snapshot

ME = Identity(
    users=("zqxalice",),
    homes=("/home/zqxalice", "/srv/people/zqxalice"),
    hosts=("zqx-host-7.lab.example.org", "zqx-host-7"),
    secrets=(
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "ghp_FAKE0123456789abcdefghijklmnopqrstuv",
        "pin42",
    ),
    macs=("3c:22:fb:12:34:56",),
)


def _redacted(text: str, identity: Identity = ME, keep: tuple[str, ...] = ()) -> str:
    return redact(text, identity, keep=keep)[0]


# --- what stays ------------------------------------------------------------------------------

KEPT = [
    "TensorFlow 2.21.0 built with CUDA 12.5.1 and cuDNN 9",
    "driver 550.54.14 supports CUDA 12.4; toolkit 12.2.140",
    "Windows driver 31.0.15.5222",
    "loaded libcublas.so.12.3.4.1 and libcudnn.so.9.1.0",
    "nvidia-cublas-cu12==12.3.4.1 nvidia-cudnn-cu12>=9.1.0.70 tensorflow-2.15.0.1",
    "cuDNN version 9.1.0.70; Version: 10.3.4.107",
    "v1.2.3.4 and build 1.2.3.4.5",
    "PCI bus 00000000:01:00.0 and 0000:3b:00.0",
    "GPU-8e2c5b1a-1b2c-3d4e-5f60-718293a4b5c6 MIG-GPU-8e2c5b1a/1/0",
    "I0000 00:00:1795400751.258919   26082 port.cc:153] started at 21:30:47.213628",
    "2024-01-08 21:30:47.213628: W tensorflow/core/platform/cpu_feature_guard.cc:182]",
    "absl::InitializeLog() std::vector<int> se::dnn cc::add",
    "listening on 127.0.0.1:6006 and 0.0.0.0:8888, [::1]:6006 and [::]:80",
    "netmask 255.255.255.0 broadcast 255.255.255.255",
    "MAC 00:00:00:00:00:00 and ff:ff:ff:ff:ff:ff",
    "shape [8,1024] in 12:34:56 with a:b:c",
    "/root/.local/lib/python3.11/site-packages and /usr/lib/x86_64-linux-gnu",
    "the word malice, the zqxalicent file, pin420 and spin42",
    "TF_FORCE_GPU_ALLOW_GROWTH=true USE_AUTH=1",
]


@pytest.mark.parametrize("text", KEPT)
def test_what_identifies_no_one_is_kept(text: str) -> None:
    assert redact(text, ME) == (text, {})


def test_a_four_part_version_the_snapshot_holds_is_kept() -> None:
    text = "nvidia-curand-cu12 10.3.4.107 from 10.3.4.108"
    assert _redacted(text, keep=("10.3.4.107",)) == "nvidia-curand-cu12 10.3.4.107 from <ipv4>"


# --- what goes -------------------------------------------------------------------------------

REDACTED = [
    ("ssh from 203.0.113.7 port 22.", "ssh from <ipv4> port 22."),
    ("SSH_CONNECTION=203.0.113.7 50022 198.51.100.23 22", "SSH_CONNECTION=<ipv4> 50022 <ipv4> 22"),
    ("worker 192.168.1.20:2222, chief 10.0.0.1", "worker <ipv4>:2222, chief <ipv4>"),
    ("inet6 2001:db8::7/64 scope global", "inet6 <ipv6>/64 scope global"),
    ("[fe80::1ff:fe23:4567:890a%eth0]:22", "[<ipv6>]:22"),
    ("mapped ::ffff:10.1.2.3", "mapped <ipv6>"),
    ("full 2001:0db8:85a3:0000:0000:8a2e:0370:7334.", "full <ipv6>."),
    ("ether 3c:22:fb:aa:bb:cc brd", "ether <mac> brd"),
    ("Physical Address 3C-22-FB-AA-BB-CC", "Physical Address <mac>"),
    ("interface enx3c22fb123456 up", "interface enx<mac> up"),
    ("ib0 80:00:02:08:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:0b:0c", "ib0 <mac>"),
    ('File "/home/bob/train.py", line 3', 'File "/home/<user>/train.py", line 3'),
    ("/Users/carol/miniconda3/lib", "/Users/<user>/miniconda3/lib"),
    (
        r"C:\Users\dave\AppData\Local\Programs\Python",
        r"C:\Users\<user>\AppData\Local\Programs\Python",
    ),
    (r"C:\Users\Jane Doe\venv\Lib", r"C:\Users\<user>\venv\Lib"),
    (r'"C:\\Users\\erin\\x.py"', r'"C:\\Users\\<user>\\x.py"'),
    ("C:/Users/frank/x /mnt/c/Users/gus/y", "C:/Users/<user>/x /mnt/c/Users/<user>/y"),
    ("/srv/people/zqxalice/data/x.csv", "<home>/data/x.csv"),
    ("zqxalice@zqx-host-7:~$ python", "<user>@<host>:~$ python"),
    ("ZQXALICE on zqx-host-7.lab.example.org", "<user> on <host>"),
    ("from bob.smith@example.org", "from <email>"),
    (
        "git clone https://bob:hunter22@example.com/r.git",
        "git clone https://<user>:<secret>@example.com/r.git",
    ),
    (
        "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "export AWS_SECRET_ACCESS_KEY=<secret>",
    ),
    ("token ghp_FAKE0123456789abcdefghijklmnopqrstuv used", "token <secret> used"),
    ("other ghp_0123456789abcdefghijklmnopqrstuvwxyz", "other <secret>"),
    ('api_key=abcd1234 MY_PASSWORD="x y z w"', 'api_key=<secret> MY_PASSWORD="<secret>"'),
    ("{'HF_TOKEN': 'hf-notashape-123'}", "{'HF_TOKEN': '<secret>'}"),
    ("pin is pin42.", "pin is pin42."),
    ("pin is 'pin42'", "pin is '<secret>'"),
    ("PIN=pin42", "PIN=<secret>"),
]


@pytest.mark.parametrize(("text", "expected"), REDACTED)
def test_what_identifies_someone_goes(text: str, expected: str) -> None:
    assert _redacted(text) == expected


def test_redaction_is_idempotent_and_counts_each_kind() -> None:
    text = "\n".join([*KEPT, *(t for t, _ in REDACTED)])
    once, counts = redact(text, ME)
    twice, again = redact(once, ME)
    assert twice == once and again == {}
    assert set(counts) == {"secret", "home", "email", "user", "host", "mac", "ipv6", "ipv4"}
    for placeholder in ("<user>", "<host>", "<home>", "<ipv4>", "<ipv6>", "<mac>", "<secret>"):
        assert placeholder in once
    gone = _redacted("\n".join(t for t, _ in REDACTED)).lower()
    for value in [*ME.users, *ME.hosts, *ME.secrets[:2], "203.0.113.7", "3c:22:fb", "bob"]:
        assert value.lower() not in gone


def test_short_and_common_names_are_redacted_only_in_paths_and_fields() -> None:
    me = Identity(users=("root", "al"), homes=("/root",), hosts=("vm", "localhost"))
    redactor = Redactor(me)
    text = "root ran al's job on vm: /home/al/x, /root/x, localhost, tools, a vm"
    assert (
        redactor.text(text)
        == "root ran al's job on vm: /home/<user>/x, /root/x, localhost, tools, a vm"
    )
    assert redactor.unredacted_names == 4
    assert redactor.value({"platform": {"hostname": "vm"}}) == {"platform": {"hostname": "<host>"}}


def test_json_values_are_redacted_by_key_and_stay_json() -> None:
    doc = {
        "env": {
            "TFACCEL_API_TOKEN": "x" * 30,
            "TFACCEL_Auth": "short",
            "LD_LIBRARY_PATH": "/home/zqxalice/lib",
        },
        'quote"d /home/zqxalice': ['C:\\Users\\zqxalice\\a "b"', 3, None, 1.5, True],
        "hostname": "anything",
    }
    redactor = Redactor(ME)
    out = redactor.value(doc)
    assert out == {
        "env": {
            "TFACCEL_API_TOKEN": "<secret>",
            "TFACCEL_Auth": "<secret>",
            "LD_LIBRARY_PATH": "/home/<user>/lib",
        },
        'quote"d /home/<user>': ['C:\\Users\\<user>\\a "b"', 3, None, 1.5, True],
        "hostname": "<host>",
    }
    assert json.loads(json.dumps(out)) == out
    assert redactor.counts() == {"secret": 2, "home": 3, "host": 1}


def test_identity_reads_secret_named_variables_and_names() -> None:
    env = {
        "USER": "zqxalice",
        "HOME": "/home/zqxalice/",
        "HOSTNAME": "zqx-host-7.lab",
        "GITHUB_TOKEN": "ghp_x",
        "aws_secret_access_key": "abc",
        "MY_PASSWD": "line1\nline2",
        "PATH": "/usr/bin",
    }
    me = probe_identity.collect(env)
    assert "zqxalice" in me.users and "/home/zqxalice" in me.homes
    assert {"zqx-host-7.lab", "zqx-host-7", socket.gethostname()} <= set(me.hosts)
    assert set(me.secrets) == {"ghp_x", "abc", "line1", "line2"}


# --- the bundle, built from values ------------------------------------------------------------


def _json_block(text: str) -> dict[str, Any]:
    match = re.search(r"^(`{3,})json\n(.*?)\n\1$", text, re.M | re.S)
    assert match, "no ```json block"
    doc = json.loads(match.group(2))
    assert isinstance(doc, dict)
    return doc


def _planted_snapshot() -> Snapshot:
    snap = Snapshot(tfaccel_version="0.1.0", created_at="2026-01-01T00:00:00+00:00")
    snap.platform.hostname = "zqx-host-7"
    snap.platform.python_version = "3.11.7"
    snap.platform.python_executable = "/home/zqxalice/venv/bin/python"
    snap.nvml.available = True
    snap.nvml.driver_version = "550.54.14"
    snap.nvml.cuda_driver_version = "12.4"
    snap.nvml.gpus = [
        GpuInfo(name="NVIDIA A100-SXM4-40GB", uuid="GPU-8e2c5b1a-1b2c", compute_capability="8.0")
    ]
    snap.distributions = [
        Distribution("nvidia-curand-cu12", "10.3.4.107", "/home/zqxalice/venv/lib")
    ]
    snap.env = {
        "TF_CONFIG": '{"cluster": {"worker": ["203.0.113.7:2222"]}}',
        "TFACCEL_TOKEN": "t" * 20,
    }
    snap.deep = DeepProbe(
        ran=True,
        ok=True,
        tf_version="2.21.0",
        log="I0000 loaded from 10.3.4.107 on 203.0.113.8 ```x",
    )
    return snap


def test_the_bundle_holds_versions_findings_logs_and_json() -> None:
    snap = _planted_snapshot()
    log = "OOM when allocating tensor with shape[8,1024] on zqx-host-7 (203.0.113.9)\n"
    bundle = build_bundle(snap, diagnose(snap, log=log), ME, log=log)
    text = bundle.text
    for value in ("zqxalice", "zqx-host-7", "203.0.113", "t" * 20):
        assert value not in text
    assert "10.3.4.107" in text and "550.54.14" in text and "GPU-8e2c5b1a-1b2c" in text
    heads = re.findall(r"^## (.*)$", text, re.M)
    assert heads == [
        "Versions",
        "Findings",
        "The log given with --log",
        "TensorFlow's start-up log",
        "JSON",
        "What was redacted",
    ]
    assert "````text\nI0000 loaded from 10.3.4.107 on <ipv4> ```x\n````" in text
    doc = _json_block(text)
    assert doc["tfaccel_bundle"] == 1 and doc["redacted"] == bundle.redacted
    assert doc["doctor"]["log"]["causes"][0]["id"] == "oom"
    assert Snapshot.from_dict(doc["snapshot"]).platform.hostname == "<host>"
    assert doc["snapshot"]["env"]["TFACCEL_TOKEN"] == "<secret>"
    assert "| IPv4 addresses | `<ipv4>` |" in text


def test_a_long_log_is_cut_in_the_bundle() -> None:
    log = "first line\n" + "x" * (MAX_LOG_CHARS * 2) + "\nlast line 203.0.113.9"
    bundle = build_bundle(None, diagnose(Snapshot()), Identity(), log=log)
    assert "first line" in bundle.text and "last line <ipv4>" in bundle.text
    assert "characters left out of the bundle" in bundle.text
    assert len(bundle.text) < MAX_LOG_CHARS * 1.2


# --- the command, for real --------------------------------------------------------------------

AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB = "ghp_FAKE0123456789abcdefghijklmnopqrstuv"
PLANTED = {
    "user": "zqxalice",
    "home": "/home/zqxalice",
    "host": "zqx-host-7",
    "ipv4": "203.0.113.7",
    "ipv4 (peer)": "198.51.100.23",
    "ipv6": "2001:db8::7",
    "mac": "3c:22:fb:12:34:56",
    "AWS secret": AWS,
    "GitHub token": GITHUB,
    "TFACCEL token": "tfaccel-api-token-value-123",
}


def _planted_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TFACCEL_")}
    env.update(
        USER="zqxalice",
        LOGNAME="zqxalice",
        HOME="/home/zqxalice",
        HOSTNAME="zqx-host-7",
        SSH_CONNECTION="203.0.113.7 50022 198.51.100.23 22",
        AWS_SECRET_ACCESS_KEY=AWS,
        GITHUB_TOKEN=GITHUB,
        TFACCEL_API_TOKEN="tfaccel-api-token-value-123",
        # Recorded in the snapshot (tfaccel.probe.system.ENV_VARS and TFACCEL_*):
        TFACCEL_NOTE=f"zqxalice on zqx-host-7 from 203.0.113.7 [2001:db8::7] mac 3c:22:fb:12:34:56 key {AWS}",
        VIRTUAL_ENV="/home/zqxalice/venv",
        LD_LIBRARY_PATH="/home/zqxalice/cuda/lib64:/usr/lib",
        TF_CONFIG='{"cluster": {"worker": ["203.0.113.7:2222", "[2001:db8::7]:2222"]}}',
        CUDA_VISIBLE_DEVICES="",
    )
    return env


LOG = f"""\
zqxalice@zqx-host-7:~$ python /home/zqxalice/train.py --host 203.0.113.7
export AWS_SECRET_ACCESS_KEY={AWS}
GITHUB_TOKEN is {GITHUB}
worker at [2001:db8::7]:2222, card 3c:22:fb:12:34:56, peer 198.51.100.23
Traceback (most recent call last):
  File "/home/zqxalice/train.py", line 12, in <module>
tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[8,1024]
"""


def _assert_clean(text: str) -> None:
    for what, value in PLANTED.items():
        assert value.lower() not in text.lower(), f"the planted {what} is in the bundle"
    # This machine's own names: gone, unless too short or too common to be redacted as words.
    for name in (getpass.getuser(), socket.gethostname()):
        if len(name) >= MIN_NAME_CHARS and name.lower() not in COMMON_NAMES:
            pattern = rf"(?<![\w<]){re.escape(name)}(?![\w>])"
            assert not re.search(pattern, text, re.I), f"this machine's {name!r} is in the bundle"


def test_doctor_bundle_redacts_what_the_environment_and_the_log_plant(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(LOG)
    out = tmp_path / "bundle.md"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfaccel",
            "doctor",
            "--json",
            "--log",
            str(log),
            "--bundle",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=_planted_env(tmp_path),
        timeout=300,
    )
    assert done.returncode == 1, done.stderr  # the log's OOM is a failure
    report = json.loads(done.stdout)  # stdout stays the doctor's report, not redacted
    assert report["log"]["causes"][0]["id"] == "oom"
    text = out.read_text()
    _assert_clean(text)
    doc = _json_block(text)
    assert doc["doctor"]["exit_code"] == 1 and doc["doctor"]["log"]["causes"][0]["id"] == "oom"
    snap = Snapshot.from_dict(doc["snapshot"])
    assert snap.platform.hostname == "<host>"
    assert snap.env["TFACCEL_API_TOKEN"] == "<secret>"
    assert snap.env["VIRTUAL_ENV"] == "/home/<user>/venv"
    assert "<ipv4>" in snap.env["TF_CONFIG"] and "<ipv6>" in snap.env["TF_CONFIG"]
    counts = doc["redacted"]
    for kind in ("secret", "home", "user", "host", "ipv4", "ipv6", "mac"):
        assert counts.get(kind, 0) > 0, (kind, counts)
    table = text[text.index("## What was redacted") :]
    for kind, number in counts.items():
        assert re.search(rf"^\| [^|]+ \| [^|]+ \| {number} \|$", table, re.M), (kind, number)
    assert "OOM when allocating tensor" in text
    assert 'File "/home/<user>/train.py", line 12' in text
    assert (out.stat().st_mode & 0o777) == 0o644


def test_doctor_bundle_imports_no_tensorflow_and_says_where_it_went(tmp_path: Path) -> None:
    out = tmp_path / "bundle.md"
    code = (
        "import sys\n"
        "from tfaccel.cli import main\n"
        f"code = main(['doctor', '--bundle', {str(out)!r}])\n"
        "print('tensorflow imported:', 'tensorflow' in sys.modules)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=_planted_env(tmp_path),
    )
    assert done.returncode in (0, 1), done.stderr
    assert "tensorflow imported: False" in done.stdout
    assert f"bundle written to {out}" in done.stdout
    text = out.read_text()
    assert "Not recorded: run `tfaccel doctor --deep --bundle FILE`" in text
    _assert_clean(text)
    _json_block(text)


@pytest.mark.slow
def test_doctor_deep_bundle_holds_tensorflows_start_up_log(tmp_path: Path) -> None:
    out = tmp_path / "bundle.md"
    # TensorFlow's default log level: a level the user set would hide the lines looked for
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    done = subprocess.run(
        [sys.executable, "-m", "tfaccel", "doctor", "--deep", "--bundle", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    text = out.read_text()
    doc = _json_block(text)
    deep = doc["snapshot"]["deep"]
    assert deep["ran"] and deep["tf_version"], deep
    assert "imported in" in doc["versions"]["TensorFlow import"]
    section = text[text.index("## TensorFlow's start-up log") : text.index("## JSON")]
    assert "What TensorFlow logged when `tfaccel doctor --deep` imported it" in section
    assert deep["log"].strip() and deep["log"].rstrip() in section
    _assert_clean(text)
