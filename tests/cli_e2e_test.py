#!/usr/bin/env python3
"""End-to-end tests of the gpuherd binary: real processes, a simulated fleet,
loopback and a unix socket only. Run by CTest with the binary's path."""

import base64
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

GPUHERD = os.path.abspath(os.environ.get("GPUHERD_BIN", "build/gpuherd"))
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCENARIO = """\
# A PCIe down-train on GPU 3 after 1 s and GPU 5 falling off the bus after 2 s.
seed: 11
gpus: [{model: h100-sxm, count: 4}, {model: rtx3090, count: 4}]
faults:
  - {at: 1s, gpu: 3, kind: pcie_downtrain, width: 8}
  - {at: 2s, gpu: 5, kind: xid, xid: 79}
"""

INFO_FIELDS = ["index", "uuid", "name", "serial", "pci_bus_id", "memory_total_bytes", "driver_version",
               "cuda_version", "compute_capability", "max_pcie_gen", "max_pcie_width", "numa_node",
               "cpu_affinity"]
SAMPLE_FIELDS = ["time", "gpu_util_pct", "mem_util_pct", "mem_used_bytes", "temp_c", "power_w", "power_limit_w",
                 "sm_clock_mhz", "mem_clock_mhz", "pcie_gen", "pcie_width", "pcie_tx_kbps", "pcie_rx_kbps",
                 "pcie_replay_count", "throttle_reasons", "xids", "processes"]
ECC_FIELDS = ["ecc_sbe_volatile", "ecc_dbe_volatile", "remapped_rows_correctable", "remapped_rows_uncorrectable"]


# --- running the CLI as another user -------------------------------------------
#
# The daemon runs as root for every user of a lab and each job runs as the user
# who submitted it. Where a test runs as root (and setpriv is here) the suites
# submit their jobs as `nobody`, so that every job feature is exercised by a user
# the kernel checks; where it does not, there is nobody to switch to and the
# same tests run as the current user.

NOBODY = 65534
CAN_SWITCH_USER = os.geteuid() == 0 and shutil.which("setpriv") is not None
# The user the suites' jobs run as (a uid); None: this process's own user.
JOB_USER = NOBODY if CAN_SWITCH_USER else None


def switches_to(user):
    """Whether running as `user` (a uid, None for this process's user) switches users here."""
    return user is not None and CAN_SWITCH_USER and user != os.geteuid()


def uid_of(user):
    """The uid a command run as `user` has."""
    return user if switches_to(user) else os.geteuid()


def gid_of(user):
    return pwd.getpwuid(user).pw_gid if switches_to(user) else os.getegid()


def user_name(user):
    """The name the daemon gives the jobs of `user` (as in `show`'s "user")."""
    return pwd.getpwuid(uid_of(user)).pw_name


def as_user(user):
    """The command prefix that runs a program as `user`: empty when nothing switches."""
    if not switches_to(user):
        return []
    return ["setpriv", f"--reuid={user}", f"--regid={gid_of(user)}", "--clear-groups"]


def reachable_by_anyone(path):
    """Whether a user who owns nothing on the way (nobody) can reach `path`: every
    folder on the way may be searched by others."""
    path = os.path.abspath(path)
    while True:
        try:
            if not os.stat(path).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
        if path == "/":
            return True
        path = os.path.dirname(path)


def _user_path():
    """This process's PATH without the folders another user cannot reach (/root/...)."""
    return os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and reachable_by_anyone(d))


# A Python that any user's job can run (sys.executable may be in root's home).
PYTHON = sys.executable
if CAN_SWITCH_USER and not reachable_by_anyone(sys.executable):
    PYTHON = shutil.which("python3", path=_user_path()) or sys.executable


def user_env(user, extra=None):
    """The environment of a command run as `user`: its own HOME, USER and LOGNAME and
    a PATH of folders it can reach (a submit passes them on to the job), no colour."""
    env = dict(os.environ, NO_COLOR="1")
    if switches_to(user):
        pw = pwd.getpwuid(user)
        env.update(HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name, PATH=_user_path())
    env.update(extra or {})
    return env


def command(*args, home=None, user=None):
    """The argv of `gpuherd [--home HOME] ARGS` run as `user`."""
    return as_user(user) + [GPUHERD] + (["--home", home] if home else []) + list(args)


def run(*args, home=None, check=True, timeout=30, user=None, cwd=None, env=None, input=None):
    """Runs the CLI. `user`: a uid to run it as (through setpriv; None, or where
    the test is not root: this process's user). A switched user's command runs
    in `cwd`, else in /tmp (the CLI sends its folder as a job's cwd, so it must
    be one the user can enter); `env`: variables added to the environment."""
    cmd = command(*args, home=home, user=user)
    if cwd is None and switches_to(user):
        cwd = tempfile.gettempdir()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=user_env(user, env), cwd=cwd,
                          input=input)
    if check and proc.returncode != 0:
        who = f" (as {user_name(user)})" if switches_to(user) else ""
        raise AssertionError(f"{cmd}{who} exited {proc.returncode}: {proc.stderr}")
    return proc


# One HTTP/1.1 request over a unix socket, run as the requesting user: its
# arguments as JSON on stdin, the reply as JSON on stdout.
_UNIX_CLIENT = r"""
import base64, json, socket, sys
a = json.loads(sys.stdin.read())
body = base64.b64decode(a["body"])
lines = [a["method"] + " " + a["target"] + " HTTP/1.1", "Host: localhost", "Connection: close",
         "Content-Length: %d" % len(body)] + ["%s: %s" % kv for kv in a["headers"].items()]
s = socket.socket(socket.AF_UNIX)
s.settimeout(a["timeout"])
s.connect(a["socket"])
s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
data = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    data += c
head, _, rest = data.partition(b"\r\n\r\n")
first, *hl = head.decode("latin-1").split("\r\n")
hdrs = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in hl if ":" in l}
print(json.dumps({"status": int(first.split()[1]), "headers": hdrs, "body": base64.b64encode(rest).decode()}))
"""


def unix_request(sock_path, method, target, body=b"", headers=None, user=None, timeout=10):
    """One HTTP request over the daemon's unix socket as `user` (the daemon takes
    the caller from the socket's peer credentials): (status, headers, body bytes)."""
    args = {"method": method, "target": target, "body": base64.b64encode(body).decode(),
            "headers": headers or {}, "socket": sock_path, "timeout": timeout}
    proc = subprocess.run(as_user(user) + [PYTHON, "-c", _UNIX_CLIENT], input=json.dumps(args),
                          capture_output=True, text=True, timeout=timeout + 20, cwd="/")
    if proc.returncode != 0:
        raise AssertionError(f"{method} {target} over {sock_path}: {proc.stderr}")
    reply = json.loads(proc.stdout)
    body = base64.b64decode(reply["body"])
    if reply["headers"].get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    return reply["status"], reply["headers"], body


def _dechunk(data):
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2:]
    return out


_HOME_USER = object()  # "the home's job user", the default of Home's methods


class Home:
    """A state directory and, optionally, a daemon running on it (as this
    process's user, root in CI: the daemon's user is an admin).

    `user`: the uid the tests' jobs run as (see JOB_USER; None: this process's
    user). Home.run and Home.popen run the CLI as that user in `work`, a folder
    of its own outside the home (its cwd, so its jobs' cwd, and the place of
    the scripts and outputs of its jobs); Home.admin runs it as this process's
    user, for what only an admin may do (drain, undrain, burnin, stop)."""

    def __init__(self, user=None):
        self.dir = tempfile.mkdtemp(prefix="gpuherd-e2e-")
        self.daemon = None
        self.user = user if switches_to(user) else None
        self.uid = uid_of(self.user)
        self.user_name = user_name(self.user)
        self.work = tempfile.mkdtemp(prefix="gpuherd-e2e-work-")
        self._own(self.work, 0o755)

    # --- the job user's side -------------------------------------------------

    def _who(self, user):
        return self.user if user is _HOME_USER else user

    def run(self, *args, user=_HOME_USER, cwd=None, **kw):
        """The CLI on this home as the job user (or `user`), in `work`."""
        return run(*args, home=self.dir, user=self._who(user), cwd=cwd or self.work, **kw)

    def admin(self, *args, **kw):
        """The CLI on this home as this process's user (root: an admin)."""
        return run(*args, home=self.dir, **kw)

    def command(self, *args, user=_HOME_USER):
        return command(*args, home=self.dir, user=self._who(user))

    def popen(self, *args, user=_HOME_USER, env=None, **kw):
        """The CLI started in the background as the job user, in `work`."""
        who = self._who(user)
        return subprocess.Popen(self.command(*args, user=who), cwd=kw.pop("cwd", self.work),
                                env=user_env(who, env), **kw)

    def request(self, method, target, body=b"", headers=None, user=_HOME_USER, timeout=10):
        """One HTTP request over the daemon's unix socket as the job user."""
        return unix_request(os.path.join(self.dir, "gpuherd.sock"), method, target, body, headers,
                            user=self._who(user), timeout=timeout)

    def _own(self, path, mode):
        if self.user is not None:
            os.chown(path, self.user, gid_of(self.user))
        os.chmod(path, mode)

    def folder(self, *parts):
        """A folder under `work` the job user owns (made if missing)."""
        path = os.path.join(self.work, *parts)
        os.makedirs(path, exist_ok=True)
        self._own(path, 0o755)
        return path

    def file(self, name, text, mode=0o644):
        """A file under `work`, owned by the job user: a script or an input of its jobs."""
        path = os.path.join(self.work, name)
        with open(path, "w") as f:
            f.write(text)
        self._own(path, mode)
        return path

    def checkout(self):
        """A copy of the checkout's examples/ and helpers/python/ (what the jobs of
        the tests run: count_steps.py, the toy trainer and its helper) under `work`,
        in the checkout's layout and owned by the job user, who may not be able to
        enter the checkout itself. Made once per home; returns its root."""
        root = os.path.join(self.work, "checkout")
        if not os.path.isdir(root):
            for part in ("examples", os.path.join("helpers", "python")):
                shutil.copytree(os.path.join(CHECKOUT, part), os.path.join(root, part),
                                ignore=shutil.ignore_patterns("__pycache__"))
            for folder, _, files in os.walk(root):
                self._own(folder, 0o755)
                for f in files:
                    path = os.path.join(folder, f)
                    self._own(path, 0o755 if os.stat(path).st_mode & stat.S_IXUSR else 0o644)
        return root

    # --- the daemon ----------------------------------------------------------

    def start(self, *args):
        log = os.path.join(self.dir, "daemon.out")
        with open(log, "w") as out:
            self.daemon = subprocess.Popen([GPUHERD, "--home", self.dir, "daemon", "--port", "0", *args],
                                           stdout=out, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            if run("status", home=self.dir, check=False).returncode == 0:
                return
            if self.daemon.poll() is not None:
                with open(log) as out:
                    raise AssertionError("daemon exited: " + out.read())
            time.sleep(0.1)
        raise AssertionError("daemon did not answer within 20 s")

    def kill9(self):
        self.daemon.send_signal(signal.SIGKILL)
        self.daemon.wait()
        self.daemon = None

    def close(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.terminate()
            try:
                self.daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.work, ignore_errors=True)


class GpusTest(unittest.TestCase):
    def test_sim_8_json_has_every_field(self):
        fleet = json.loads(run("gpus", "--sim", "8", "--json").stdout)
        self.assertTrue(fleet["simulated"])
        self.assertIn("--sim 8", fleet["sim_reason"])
        self.assertEqual(len(fleet["gpus"]), 8)
        self.assertEqual(len(fleet["topology"]), 8)
        self.assertEqual(len({g["uuid"] for g in fleet["gpus"]}), 8)
        for g in fleet["gpus"]:
            for f in INFO_FIELDS:
                self.assertIn(f, g, f"GPU {g['index']} lacks {f}")
            self.assertEqual(g["state"], "ok")
            for f in SAMPLE_FIELDS:
                self.assertIn(f, g["sample"], f"GPU {g['index']} sample lacks {f}")
            if g.get("ecc_enabled"):
                for f in ECC_FIELDS:
                    self.assertIn(f, g["sample"], f"GPU {g['index']} ({g['name']}) lacks {f}")

    def test_same_seed_same_fleet(self):
        a = json.loads(run("gpus", "--sim", "4", "--seed", "5", "--json").stdout)
        b = json.loads(run("gpus", "--sim", "4", "--seed", "5", "--json").stdout)
        self.assertEqual([g["uuid"] for g in a["gpus"]], [g["uuid"] for g in b["gpus"]])

    def test_table_says_simulated(self):
        out = run("gpus", "--sim", "2").stdout
        self.assertTrue(out.startswith("SIMULATED FLEET"), out)
        self.assertIn("IDX", out)

    def test_without_driver_or_daemon_never_shows_a_simulated_fleet(self):
        home = Home()
        try:
            proc = run("gpus", "--json", home=home.dir, check=False)
            if proc.returncode == 0 and json.loads(proc.stdout)["driver"] == "nvml":
                self.skipTest("this machine has an NVIDIA driver")
            self.assertEqual(proc.returncode, 3, proc.stderr)
            self.assertEqual(proc.stdout, "")
            self.assertIn("no NVIDIA driver: ", proc.stderr)
        finally:
            home.close()


FAKE_NVML = {
    "driver_version": "550.54.15", "cuda_version": 12040,
    "topology": [[0, 10], [10, 0]],
    "gpus": [
        {"uuid": "GPU-11111111-2222-3333-4444-555555555555", "name": "NVIDIA H200", "serial": "1650924000001",
         "pci": {"domain": 0, "bus": 23, "device": 0}, "memory": {"total": 150754820096, "used": 1048576},
         "compute_capability": [9, 0], "max_pcie": [5, 16], "pcie": [5, 16], "numa_node": 0,
         "temperature": 34, "utilization": [0, 0], "power_mw": 75000, "power_limit_mw": 700000},
        {"uuid": "GPU-66666666-7777-8888-9999-000000000000", "name": "NVIDIA GeForce GTX 1070 Ti",
         "serial": "", "pci": {"domain": 0, "bus": 101, "device": 0},
         "memory": {"total": 8589934592, "used": 0}, "compute_capability": [6, 1],
         "max_pcie": [3, 16], "pcie": [3, 8], "temperature": 51, "utilization": [40, 10], "fan": 55},
    ],
}


class NvmlTest(unittest.TestCase):
    """The real dlopen path of the CLI against the fake libnvidia-ml built by the tests."""

    def setUp(self):
        lib = os.environ.get("FAKE_NVML_LIB")
        if not lib:
            self.skipTest("FAKE_NVML_LIB not set (run through CTest)")
        self.dir = tempfile.mkdtemp(prefix="gpuherd-nvml-")
        script = os.path.join(self.dir, "fake.json")
        with open(script, "w") as f:
            json.dump(FAKE_NVML, f)
        self.env = dict(os.environ, GPUHERD_NVML_LIBRARY=lib, GPUHERD_FAKE_NVML_SCRIPT=script, NO_COLOR="1")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def gpuherd(self, *args):
        return subprocess.run([GPUHERD, "--home", self.dir, *args], capture_output=True, text=True,
                              env=self.env, timeout=30)

    def test_gpus_reads_nvml(self):
        proc = self.gpuherd("gpus", "--json")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        fleet = json.loads(proc.stdout)
        self.assertEqual(fleet["driver"], "nvml")
        self.assertFalse(fleet["simulated"])
        h200, gtx = fleet["gpus"]
        self.assertEqual(h200["name"], "NVIDIA H200")
        self.assertEqual(h200["cuda_version"], "12.4")
        self.assertEqual(h200["sample"]["temp_c"], 34)
        self.assertNotIn("fan_pct", h200["sample"])  # not supported: absent, never 0
        self.assertEqual(gtx["compute_capability"], "6.1")
        self.assertEqual(gtx["sample"]["pcie_width"], 8)
        self.assertEqual(fleet["topology"][0][1], "pcie-switch")
        table = self.gpuherd("gpus").stdout
        self.assertNotIn("SIMULATED", table)
        self.assertIn("Gen3 x8 ! (max Gen3 x16)", table)

    def test_missing_library_exits_3_and_says_why(self):
        # Never a simulated fleet unless asked for: no driver is exit 3 with the reason.
        self.env["GPUHERD_NVML_LIBRARY"] = os.path.join(self.dir, "libnvidia-ml.so.1")
        proc = self.gpuherd("gpus", "--json")
        self.assertEqual(proc.returncode, 3, proc.stdout)
        self.assertEqual(proc.stdout, "")
        self.assertIn("no NVIDIA driver: cannot load the NVML library", proc.stderr)
        self.assertIn("libnvidia-ml.so.1", proc.stderr)

    def test_compare_script_against_a_stand_in_nvidia_smi(self):
        compare = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "gpu",
                               "compare_nvidia_smi.sh")
        bindir = os.path.join(self.dir, "bin")
        os.mkdir(bindir)
        smi = os.path.join(bindir, "nvidia-smi")

        def stand_in(temp_of_gpu1):
            with open(smi, "w") as f:
                f.write("#!/bin/sh\n"
                        "echo 'NVIDIA H200, 143771, 5, 16, 34'\n"
                        f"echo 'NVIDIA GeForce GTX 1070 Ti, 8192, 3, 8, {temp_of_gpu1}'\n")
            os.chmod(smi, 0o755)

        env = dict(self.env, PATH=bindir + os.pathsep + os.environ["PATH"], GPUHERD_HOME=self.dir)
        stand_in(52)  # within 2 °C
        ok = subprocess.run([compare, GPUHERD], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        stand_in(58)  # 7 °C apart
        bad = subprocess.run([compare, GPUHERD], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
        self.assertIn("FAIL", bad.stdout + bad.stderr)


class BadInputTest(unittest.TestCase):
    def test_usage_errors_exit_2(self):
        self.assertEqual(run("gpus", "--sim", "0", check=False).returncode, 2)
        self.assertEqual(run("frobnicate", check=False).returncode, 2)
        self.assertEqual(run("gpus", "--sim", "2", "--scenario", "x.yaml", check=False).returncode, 2)

    def test_missing_scenario_file(self):
        proc = run("gpus", "--scenario", "/nonexistent/s.yaml", check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("/nonexistent/s.yaml", proc.stderr)

    def test_bad_scenario_names_file_and_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("seed: 1\nfaults:\n  - {at: 1s, gpu: 0, kind: meltdown}\n")
        try:
            proc = run("gpus", "--scenario", f.name, check=False)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn(f.name, proc.stderr)
            self.assertIn("meltdown", proc.stderr)
            self.assertIn("3", proc.stderr)  # the line
        finally:
            os.unlink(f.name)

    def test_interval_too_short(self):
        home = Home()
        try:
            proc = run("daemon", "--sim", "1", "--interval", "10ms", home=home.dir, check=False)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("100ms", proc.stderr)
        finally:
            home.close()

    def test_mutation_without_daemon(self):
        home = Home()
        try:
            proc = run("note", "hello", home=home.dir, check=False)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("daemon", proc.stderr)
            self.assertEqual(run("status", home=home.dir, check=False).returncode, 3)
        finally:
            home.close()


class ScenarioDaemonTest(unittest.TestCase):
    def setUp(self):
        self.home = Home()
        self.scenario = os.path.join(self.home.dir, "scenario.yaml")
        with open(self.scenario, "w") as f:
            f.write(SCENARIO)

    def tearDown(self):
        self.home.close()

    def wait_for_event(self, kind, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            events = json.loads(run("events", "--json", "--kind", kind, home=self.home.dir).stdout)
            if events:
                return events
            time.sleep(0.2)
        self.fail(f"no {kind} event within {timeout} s")

    def test_downtrain_and_xid79_show_in_gpus_and_events(self):
        self.home.start("--scenario", self.scenario, "--interval", "200ms")
        self.wait_for_event("gpu.xid")
        self.wait_for_event("gpu.lost")
        self.wait_for_event("gpu.pcie")
        fleet = json.loads(run("gpus", "--json", home=self.home.dir).stdout)
        self.assertTrue(fleet["simulated"])
        gpu3, gpu5 = fleet["gpus"][3], fleet["gpus"][5]
        self.assertEqual(gpu3["sample"]["pcie_width"], 8)
        self.assertEqual(gpu3["max_pcie_width"], 16)
        self.assertEqual(gpu5["state"], "lost")
        table = run("gpus", home=self.home.dir).stdout
        self.assertIn("x8 !", table)
        self.assertIn("lost", table)

        events = json.loads(run("events", "--json", home=self.home.dir).stdout)
        kinds = [(e["kind"], e["gpu_uuid"]) for e in events]
        self.assertIn(("gpu.pcie", gpu3["uuid"]), kinds)
        self.assertIn(("gpu.xid", gpu5["uuid"]), kinds)
        self.assertIn(("gpu.lost", gpu5["uuid"]), kinds)
        xid = next(e for e in events if e["kind"] == "gpu.xid")
        self.assertEqual(xid["severity"], "critical")
        self.assertIn("79", xid["message"])
        # Edge-triggered: one XID event, one lost event, however many rounds ran.
        self.assertEqual(sum(1 for k, _ in kinds if k == "gpu.xid"), 1)
        self.assertEqual(sum(1 for k, _ in kinds if k == "gpu.lost"), 1)
        text = run("events", home=self.home.dir).stdout
        self.assertIn("gpu.xid", text)
        self.assertIn("fallen off the bus", text)

        run("stop", home=self.home.dir)
        self.assertEqual(run("status", home=self.home.dir, check=False).returncode, 3)
        # Without a daemon the log is read from the database.
        offline = json.loads(run("events", "--json", "--kind", "daemon.", home=self.home.dir).stdout)
        self.assertEqual([e["kind"] for e in offline], ["daemon.start", "daemon.stop"])

    def test_events_survive_kill_9(self):
        self.home.start("--sim", "2", "--interval", "200ms")
        run("note", "before the crash", "--gpu", "1", home=self.home.dir)
        self.home.kill9()
        self.home.start("--sim", "2", "--interval", "200ms")
        notes = json.loads(run("events", "--json", "--kind", "operator.", home=self.home.dir).stdout)
        self.assertEqual([n["message"] for n in notes], ["before the crash"])
        starts = json.loads(run("events", "--json", "--kind", "daemon.start", home=self.home.dir).stdout)
        self.assertEqual(len(starts), 2)

    def test_top_renders_frames_from_the_daemon(self):
        self.home.start("--sim", "3", "--interval", "200ms")
        out = run("top", "--iterations", "2", "--interval", "200ms", home=self.home.dir).stdout
        self.assertEqual(out.count("gpuherd top"), 2)
        self.assertIn("SIMULATED FLEET", out)
        # Routine events stay out of top's pane; it shows firing alerts and faults only.
        self.assertNotIn("daemon.start", out)
        self.assertIn("No firing alerts or faults.", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
