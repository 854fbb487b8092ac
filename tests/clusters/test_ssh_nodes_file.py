"""The SSH backend's nodes file: what it accepts, and one-line errors naming file, entry (line) and field."""
from __future__ import annotations

import pytest

from clusters.base import ClusterSpec
from clusters.ssh import ClusterError, SshCluster, load_nodes_file


def _write(tmp_path, text: str):
    p = tmp_path / "nodes.toml"
    p.write_text(text)
    return p


def test_full_nodes_file_with_defaults(tmp_path):
    key = tmp_path / "id"
    key.write_text("not read here")
    p = _write(tmp_path, f"""
known_hosts = "{tmp_path}/kh"
workdir = "/srv/hw"
[defaults]
user = "ops"
key = "{key}"
[controller]
host = "10.1.0.1"
port = 2200
[[broker]]
host = "10.1.0.2"
[[broker]]
host = "10.1.0.3"
user = "root"
agent = true
service_port = 19092
""")
    nf = load_nodes_file(p)
    assert (nf.controller.target.name, nf.controller.target.host, nf.controller.target.port,
            nf.controller.target.user, nf.controller.service_port) == ("c0", "10.1.0.1", 2200, "ops", 9000)
    assert [(b.target.name, b.target.host, b.target.port, b.target.user, b.target.agent, b.service_port)
            for b in nf.brokers] == [("n1", "10.1.0.2", 22, "ops", False, 9092),
                                     ("n2", "10.1.0.3", 22, "root", True, 19092)]
    assert nf.brokers[0].target.key_file == str(key)
    assert (nf.workdir, nf.known_hosts, nf.python) == ("/srv/hw", tmp_path / "kh", "python3")


@pytest.mark.parametrize("body, message", [
    ('[[broker]]\nhost = "b"\n', "missing [controller] table"),
    ('[controller]\nhost = "a"\n', "needs at least one [[broker]] entry"),
    ('[controller]\nhost = "a"\n\n[[broker]]\nhost = "b"\n\n[[broker]]\nport = 22\n',
     "[[broker]] #2 (line 7): field 'host' is missing or not a string"),
    ('[controller]\nhost = "a"\nport = 70000\n[[broker]]\nhost = "b"\n',
     "[controller] (line 1): field 'port' must be a port number 1..65535, got 70000"),
    ('[controller]\nhost = "a"\nkey = "/nonexistent/key"\n[[broker]]\nhost = "b"\n',
     "[controller] (line 1): field 'key': no such file /nonexistent/key"),
    ('[controller]\nhost = "a"\nagent = false\n[[broker]]\nhost = "b"\n',
     "[controller] (line 1): no way to authenticate (give 'key' or agent = true)"),
    ('[controller]\nhost = "a"\n[[broker]]\nhost = "b"\npasword = "x"\n',
     "[[broker]] #1 (line 3): unknown field 'pasword'"),
    ('hosts = 1\n', "unknown key 'hosts'"),
    # messages that gained "did you mean" (rundir/settings.py)
    ('know_hosts = "kh"\n', "unknown key 'know_hosts' (known: broker, controller, defaults, known_hosts, python, "
                            "workdir) (did you mean 'known_hosts'?)"),
    ('[controller]\nhost = "a"\nusr = "x"\n[[broker]]\nhost = "b"\n',
     "[controller] (line 1): unknown field 'usr' (known: agent, host, key, port, service_port, user) "
     "(did you mean 'user'?)"),
    ('[controller]\nhost = "a"\nuser = ""\n[[broker]]\nhost = "b"\n',
     "[controller] (line 1): field 'user' must be a non-empty string"),
    ('python = ""\n[controller]\nhost = "a"\n[[broker]]\nhost = "b"\n', "field 'python' must be a command name"),
    ('defaults = 3\n[controller]\nhost = "a"\n[[broker]]\nhost = "b"\n', "[defaults] must be a table"),
    ('workdir = "relative"\n[controller]\nhost = "a"\n[[broker]]\nhost = "b"\n',
     "field 'workdir' must be an absolute path, got 'relative'"),
    ('[controller\n', "not valid TOML"),
])
def test_bad_nodes_file_names_file_entry_and_field(tmp_path, body, message):
    p = _write(tmp_path, body)
    with pytest.raises(ClusterError) as err:
        load_nodes_file(p)
    text = str(err.value)
    assert text.startswith(f"nodes file {p}: ")
    assert message in text
    assert "\n" not in text


def test_missing_file_and_too_few_brokers(tmp_path):
    with pytest.raises(ClusterError, match=r"^nodes file .*/absent.toml: cannot read: No such file"):
        load_nodes_file(tmp_path / "absent.toml")
    p = _write(tmp_path, '[controller]\nhost = "a"\n[[broker]]\nhost = "b"\n')
    with pytest.raises(ClusterError, match=r"lists 1 brokers but the test needs 3$"):
        SshCluster(ClusterSpec("r", tmp_path, brokers=3), nodes_file=p)


def test_ssh_backend_without_nodes_file_says_so(tmp_path, monkeypatch):
    from harness import backends
    monkeypatch.delenv("HIGHWATER_NODES_FILE", raising=False)
    with pytest.raises(Exception) as err:
        backends.make_cluster("ssh", ClusterSpec("r", tmp_path, brokers=1))
    assert str(err.value) == "the ssh backend needs a nodes file (--nodes-file FILE)"


def test_run_flags_reach_the_backends(tmp_path):
    from harness import backends, config
    # the nodes file must exist and list enough brokers: `build` checks it before a run directory exists
    (tmp_path / "n.toml").write_text('[controller]\nhost = "10.0.0.1"\n'
                                     + "".join(f'[[broker]]\nhost = "10.0.0.{i}"\n' for i in (2, 3, 4)))
    cfg = config.build(None, {"backend": "ssh", "nodes_file": str(tmp_path / "n.toml"),
                              "ssh_accept_unknown_hosts": True})
    assert backends.backend_options("ssh", cfg.cluster) == {"nodes_file": str(tmp_path / "n.toml"),
                                                           "accept_unknown_hosts": True}
    from clusters.docker_image import ImageBuild
    cfg = config.build(None, {"backend": "docker", "base_image": "debian-py:12"})
    assert backends.backend_options("docker", cfg.cluster) == {"build": ImageBuild(base_image="debian-py:12"),
                                                              "kill_mode": "process"}
    f = tmp_path / "t.toml"
    f.write_text('[cluster]\nbackend = "docker"\ndocker_kill = "node"\n')
    assert backends.backend_options("docker", config.build(f, {}).cluster) == {"build": ImageBuild(base_image=None),
                                                                              "kill_mode": "node"}
    assert backends.backend_options("local", cfg.cluster) == {}


def test_remote_dump_command_quotes_the_nodes_file_python(tmp_path):
    import shlex
    import subprocess

    from clusters.ssh_cluster import dump_command
    marker = tmp_path / "injected"
    python = f"python3; touch {marker}"
    cmd = dump_command(python, "/srv/hw/code x", str(tmp_path / "n1 dir"), "n1")
    words = shlex.split(cmd)
    assert python in words and "/srv/hw/code x" not in words  # one word each, PYTHONPATH=... kept whole
    assert "PYTHONPATH=/srv/hw/code x" in words
    # a real shell runs it: the value is one (missing) program's name, never a second command
    done = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True)
    assert done.returncode == 127 and not marker.exists()
