"""A real ``redis-server`` for tests: private, on a unix socket, started and stopped by fixtures.

Every probe opens its own client and closes it again (``with redis.Redis(...)``): no socket is left for
the garbage collector (the suite turns its ResourceWarning into an error).
"""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import redis


def _command(port: int, *args: object, timeout: float = 1.0) -> Any:
    """``args`` as one command to the server on ``port`` (replies decoded), on a connection closed after."""
    with redis.Redis(port=port, socket_timeout=timeout, decode_responses=True) as client:
        return client.execute_command(*args)


def _replication(port: int, timeout: float = 1.0) -> dict[str, Any]:
    """``INFO replication`` of the server on ``port``."""
    with redis.Redis(port=port, socket_timeout=timeout, decode_responses=True) as client:
        info: dict[str, Any] = client.info("replication")
        return info


class RedisServer:
    """One ``redis-server`` process listening on a unix socket (and, optionally, AOF in ``directory``)."""

    def __init__(self, directory: Path, *, appendonly: bool = False, port: int = 0) -> None:
        self.directory = directory
        self.appendonly = appendonly
        self.port = port
        self.socket = directory / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``unix://`` URL of the server."""
        return f"unix://{self.socket}"

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait (bounded) until its socket accepts connections."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: run `make setup` (apt-get install redis-server)")
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            binary,
            "--port", str(self.port),
            "--unixsocket", str(self.socket),
            "--unixsocketperm", "700",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "always" if self.appendonly else "everysec",
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            if self.socket.exists():
                try:
                    with redis.Redis(unix_socket_path=str(self.socket)) as client:
                        client.ping()
                    return
                except redis.exceptions.ConnectionError:
                    pass
            time.sleep(0.01)
        raise TimeoutError("redis-server did not start")

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server (SIGKILL when ``kill``), waiting for it to exit."""
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(timeout=10)
        self.process = None
        self.socket.unlink(missing_ok=True)


def _free_port(low: int = 20000, high: int = 45000) -> int:
    """A loopback port that is free now, and whose cluster-bus port (+10000) is free too."""
    for _ in range(200):
        port = random.randint(low, high)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free loopback port")


def _wait(check: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return
        except Exception as error:  # a node still starting refuses connections
            last = error
        time.sleep(0.05)
    raise TimeoutError(f"{what} (last error: {last!r})")


class _Node:
    """One TCP ``redis-server`` process (a cluster node, a master, a replica or a sentinel)."""

    def __init__(self, directory: Path, args: list[str], port: int) -> None:
        self.directory, self.args, self.port = directory, args, port
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / "redis.log").open("ab") as log:  # the child keeps its own copy of the fd
            self.process = subprocess.Popen(self.args, cwd=self.directory, stdout=log, stderr=log)
        _wait(lambda: _command(self.port, "PING"), f"redis on port {self.port} starts")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def pause(self) -> None:
        """SIGSTOP: the process keeps its connections but answers nothing (a replica that stopped acknowledging)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


class RedisClusterServers:
    """A real Redis Cluster: ``masters`` masters with ``replicas`` replicas each (``redis-server
    --cluster-enabled yes`` plus ``redis-cli --cluster create --cluster-replicas N``) on ephemeral loopback
    ports; ``replicas=0`` is a replica-less cluster."""

    def __init__(self, directory: Path, masters: int = 3, replicas: int = 1) -> None:
        self.directory = directory
        self.replicas = replicas
        self.ports = [_free_port() for _ in range(masters * (1 + replicas))]
        binary = shutil.which("redis-server") or "redis-server"
        self.nodes = [
            _Node(
                directory / str(port),
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                 "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000", "--save", "",
                 "--appendonly", "no"],
                port,
            )
            for port in self.ports
        ]  # fmt: skip

    @property
    def url(self) -> str:
        """The seed-node list for ``MAKA_REDIS_URL`` in cluster mode."""
        return ",".join(f"127.0.0.1:{p}" for p in self.ports[:3])

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        subprocess.run(
            [shutil.which("redis-cli") or "redis-cli", "--cluster", "create",
             *[f"127.0.0.1:{p}" for p in self.ports], "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
        )  # fmt: skip

        def ready() -> bool:
            for port in self.ports:
                info = _command(port, "CLUSTER", "INFO")
                state = info.get("cluster_state") if isinstance(info, dict) else None
                if state != "ok" and "cluster_state:ok" not in str(info):
                    return False
            return True

        _wait(ready, "the cluster converges", timeout=60)

        def replicated() -> bool:
            roles = [_replication(p) for p in self.ports]
            replicas = [r for r in roles if r["role"] == "slave"]
            expected = len(self.ports) * self.replicas // (1 + self.replicas)
            return len(replicas) == expected and all(r["master_link_status"] == "up" for r in replicas)

        _wait(replicated, "every replica finished its initial sync", timeout=60)

    def replica_of_slot(self, key: str) -> int:
        """The port of a replica of the master that serves ``key``'s slot."""
        slot = int(_command(self.ports[0], "CLUSTER", "KEYSLOT", key, timeout=2))
        for port in self.ports:
            replication = _replication(port, timeout=2)
            if replication["role"] != "slave":
                continue
            master_port = int(replication["master_port"])
            for entry in _command(self.ports[0], "CLUSTER", "SLOTS", timeout=2):
                start, end, master = int(entry[0]), int(entry[1]), entry[2]
                if start <= slot <= end and int(master[1]) == master_port:
                    return port
        raise RuntimeError(f"no replica serves the slot of {key}")

    def failover(self, replica_port: int) -> None:
        """``CLUSTER FAILOVER`` on ``replica_port`` and wait until it is a master."""
        _command(replica_port, "CLUSTER", "FAILOVER", timeout=5)
        _wait(lambda: _replication(replica_port, timeout=5)["role"] == "master", "the replica takes over", timeout=30)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class RedisSentinelServers:
    """A real Sentinel setup: a master, one replica and three sentinels (``redis-server conf --sentinel``)."""

    SERVICE = "mymaster"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        binary = shutil.which("redis-server") or "redis-server"
        self.master_port, self.replica_port = _free_port(), _free_port()
        common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.master = _Node(directory / "master", [binary, "--port", str(self.master_port), *common], self.master_port)
        self.replica = _Node(
            directory / "replica",
            [binary, "--port", str(self.replica_port), *common, "--replicaof", "127.0.0.1", str(self.master_port)],
            self.replica_port,
        )
        self.sentinel_ports = [_free_port() for _ in range(3)]
        self.sentinels: list[_Node] = []
        for port in self.sentinel_ports:
            home = directory / f"sentinel-{port}"
            home.mkdir(parents=True, exist_ok=True)
            conf = home / "sentinel.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\n"
                f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.master_port} 2\n"
                f"sentinel down-after-milliseconds {self.SERVICE} 2000\n"
                f"sentinel failover-timeout {self.SERVICE} 10000\n"
            )
            self.sentinels.append(_Node(home, [binary, str(conf), "--sentinel"], port))

    @property
    def url(self) -> str:
        """The sentinel list for ``MAKA_REDIS_URL`` in sentinel mode."""
        return ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)

    def master_address(self) -> int:
        """The master port the sentinels report now."""
        host_port = _command(self.sentinel_ports[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.SERVICE, timeout=2)
        return int(host_port[1])

    def start(self) -> None:
        self.master.start()
        self.replica.start()
        _wait(lambda: _replication(self.master_port)["connected_slaves"] >= 1, "the replica connects")
        _wait(
            lambda: _replication(self.replica_port)["master_link_status"] == "up",
            "the replica finished its initial sync",
        )
        for sentinel in self.sentinels:
            sentinel.start()

        def known() -> bool:
            for port in self.sentinel_ports:
                with redis.Redis(port=port, socket_timeout=1, decode_responses=True) as client:
                    fields: dict[str, Any] = client.sentinel_master(self.SERVICE)
                if int(fields["num-other-sentinels"]) < 2 or int(fields["num-slaves"]) < 1:
                    return False
            return True

        _wait(known, "the sentinels discover each other and the replica", timeout=60)

    def current_replica(self) -> _Node:
        """The node that is the replica now (failovers swap the roles), once it is in sync with the master."""
        master = self.master_address()
        replica = self.replica if self.replica.port != master else self.master
        _wait(lambda: _replication(replica.port).get("master_link_status") == "up", "the replica is in sync")
        return replica

    def failover(self) -> None:
        """``SENTINEL FAILOVER`` and wait until the replica is the reported, writable master."""
        before = self.master_address()
        _command(self.sentinel_ports[0], "SENTINEL", "FAILOVER", self.SERVICE, timeout=5)
        _wait(lambda: self.master_address() != before, "the sentinels promote the replica", timeout=60)
        new = self.master_address()
        _wait(lambda: _replication(new)["role"] == "master", "the new master is writable", timeout=30)

    def stop(self) -> None:
        for node in [*self.sentinels, self.replica, self.master]:
            node.stop()
