"""Who this training process is: rank, world size and node id, from
arguments or the usual environment (RANK, LOCAL_RANK, WORLD_SIZE, the host
name), and when the process started (the start of its initialization)."""
import os
import socket
import time


def _env_int(name, default):
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    try:
        return int(v)
    except ValueError:
        return default


def node_id_for(rank, host):
    """The node id the engine gives this process's events: the legacy
    trace files are named `<rank>-<host>`, and the reader rewrites
    `<x>-algo<y>` to `algo<y>-<x>` (RULES.md 1.3), so the live stream and
    the files name the node alike."""
    ident = f"{rank}-{host}"
    i = ident.find("-algo", 1)
    if i < 0:
        return ident
    return f"algo{ident[i + 5:]}-{ident[:i]}"


def process_start_us():
    """Wall-clock start of this process in microseconds (from
    /proc/self/stat and the boot time); the current time where /proc is
    not there."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        # field 22 (starttime, clock ticks since boot); comm may hold spaces
        fields = stat[stat.rindex(")") + 2:].split()
        ticks = int(fields[19])
        hz = os.sysconf("SC_CLK_TCK")
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    btime = int(line.split()[1])
                    break
            else:
                raise ValueError("no btime")
        start = btime * 1_000_000 + ticks * 1_000_000 // hz
        now = time.time_ns() // 1000
        # btime has 1 s resolution: never in the future
        return min(start, now)
    except (OSError, ValueError, IndexError):
        return time.time_ns() // 1000


class Identity:
    def __init__(self, rank=None, local_rank=None, world_size=None,
                 host=None, node=None):
        self.rank = rank if rank is not None else _env_int("RANK", 0)
        self.local_rank = (local_rank if local_rank is not None
                           else _env_int("LOCAL_RANK", self.rank))
        self.world_size = (world_size if world_size is not None
                           else _env_int("WORLD_SIZE", 1))
        self.host = host if host is not None else socket.gethostname()
        self.node = node if node is not None else node_id_for(self.rank,
                                                              self.host)
        self.pid = os.getpid()
