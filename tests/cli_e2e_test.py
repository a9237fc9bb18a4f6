#!/usr/bin/env python3
"""End-to-end tests of the gpuherd binary: real processes, a simulated fleet,
loopback and a unix socket only. Run by CTest with the binary's path."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

GPUHERD = os.path.abspath(os.environ.get("GPUHERD_BIN", "build/gpuherd"))

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


def run(*args, home=None, check=True, timeout=30):
    cmd = [GPUHERD] + (["--home", home] if home else []) + list(args)
    env = dict(os.environ, NO_COLOR="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}: {proc.stderr}")
    return proc


class Home:
    """A state directory and, optionally, a daemon running on it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gpuherd-e2e-")
        self.daemon = None

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
