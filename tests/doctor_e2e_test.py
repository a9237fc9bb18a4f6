#!/usr/bin/env python3
"""End-to-end tests of `gpuherd doctor`, `gpuherd slurm gres-conf` and
`gpuherd k8s labels`: the real binary on the fixture trees of a tuned and an
untuned GPU node (--root) and on a simulated fleet. Run by CTest with the
binary's path."""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest

GPUHERD = os.path.abspath(os.environ.get("GPUHERD_BIN", "build/gpuherd"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(ROOT, "src", "doctor", "testdata")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
    env.update(NO_COLOR="1", **extra)
    return env


def tree_digest(path):
    """Names and contents of every file under path: the doctor must change none."""
    digest = hashlib.sha256()
    for base, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(base, name)
            digest.update(full.encode())
            with open(full, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


class GpuherdTestCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuherd-doctor-e2e-")
        self.home = os.path.join(self.tmp, "home")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def gpuherd(self, *args, env=None, check=None):
        cmd = [GPUHERD, "--home", self.home] + list(args)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env or clean_env())
        if check is not None and proc.returncode != check:
            raise AssertionError(f"{cmd} exited {proc.returncode}, not {check}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def copy_fixture(self, name):
        path = os.path.join(self.tmp, name)
        shutil.copytree(os.path.join(TESTDATA, name), path)
        return path


class DoctorTest(GpuherdTestCase):
    def test_tuned_node_exits_zero(self):
        out = self.gpuherd("doctor", "--root", os.path.join(TESTDATA, "tuned"), check=0).stdout
        self.assertIn("Node doctor: gpu-tuned-01", out)
        self.assertRegex(out, r"\d+ ok, 0 info, 0 warning, 0 critical")
        self.assertNotIn("Findings", out)
        report = json.loads(self.gpuherd("doctor", "--root", os.path.join(TESTDATA, "tuned"), "--json",
                                         check=0).stdout)
        self.assertEqual(report["exit_code"], 0)
        self.assertEqual({c["severity"] for c in report["checks"]}, {"ok"})

    def test_untuned_node_is_critical_and_explains_itself(self):
        tree = os.path.join(TESTDATA, "untuned")
        before = tree_digest(tree)
        proc = self.gpuherd("doctor", "--root", tree, check=2)
        self.assertIn("Findings", proc.stdout)
        self.assertIn("vm.swappiness: 60", proc.stdout)
        self.assertIn("fix: sysctl -w vm.swappiness=1", proc.stdout)
        report = json.loads(self.gpuherd("doctor", "--root", tree, "--json", check=2).stdout)
        by_id = {c["id"]: c for c in report["checks"]}
        self.assertEqual(by_id["kernel.vm.swappiness"]["severity"], "warning")
        self.assertEqual(by_id["gpu.pcie_link.0000:b1:00.0"]["severity"], "critical")
        self.assertEqual(by_id["gpu.pcie_link.0000:17:00.0"]["severity"], "info")
        self.assertEqual(by_id["limits.memlock"]["severity"], "critical")
        self.assertEqual(by_id["gpu.numa_nic"]["severity"], "warning")
        self.assertEqual(report["summary"]["critical"],
                         sum(1 for c in report["checks"] if c["severity"] == "critical"))
        self.assertEqual(tree_digest(tree), before, "the doctor changed the audited tree")

    def test_warnings_only_exit_one(self):
        tree = self.copy_fixture("tuned")
        with open(os.path.join(tree, "proc/sys/vm/swappiness"), "w") as f:
            f.write("60\n")
        proc = self.gpuherd("doctor", "--root", tree, check=1)
        self.assertRegex(proc.stdout, r"1 warning, 0 critical")

    def test_nccl_environment_is_checked(self):
        tree = os.path.join(TESTDATA, "tuned")
        report = json.loads(self.gpuherd("doctor", "--root", tree, "--json",
                                         env=clean_env(NCCL_SOCKET_IFNAME="bond9", NCCL_IB_DISABLE="1"),
                                         check=2).stdout)
        by_id = {c["id"]: c for c in report["checks"]}
        self.assertEqual(by_id["network.nccl.socket_ifname"]["severity"], "critical")
        self.assertEqual(by_id["network.nccl.ib_disable"]["severity"], "warning")

    def test_fix_script(self):
        script = os.path.join(self.tmp, "fix.sh")
        tree = os.path.join(TESTDATA, "untuned")
        proc = self.gpuherd("doctor", "--root", tree, "--fix-script", script, check=2)
        self.assertIn("review it", proc.stderr)
        with open(script) as f:
            text = f.read()
        self.assertTrue(text.startswith("#!/usr/bin/env bash\n"))
        self.assertIn("\nset -euo pipefail\n", text)
        self.assertIn("/etc/sysctl.d/90-gpuherd.conf", text)
        report = json.loads(self.gpuherd("doctor", "--root", tree, "--json", check=2).stdout)
        failing = [c for c in report["checks"] if c["severity"] != "ok" and c["fix"]]
        self.assertEqual(text.count("\n# --- "), len(failing))
        self.assertEqual(subprocess.run(["bash", "-n", script]).returncode, 0)

    def test_usage_errors_exit_two(self):
        self.assertEqual(self.gpuherd("doctor", "--root", os.path.join(self.tmp, "missing")).returncode, 2)
        self.assertEqual(self.gpuherd("doctor", "--no-such-flag").returncode, 2)

    def test_simulated_gpus_on_a_fixture_tree(self):
        report = json.loads(self.gpuherd("doctor", "--root", os.path.join(TESTDATA, "tuned"), "--sim", "2",
                                         "--json", check=0).stdout)
        self.assertTrue(report["simulated_gpus"])
        self.assertEqual(report["exit_code"], 0)
        ids = {c["id"] for c in report["checks"]}
        self.assertIn("gpu.pcie_link.0", ids)
        self.assertIn("gpu.ecc.0", ids)  # the default fleet starts with H100s, which have ECC

    def test_link_under_load_comes_from_the_latest_burnin(self):
        # Audits this machine (its exit code depends on the machine), with a
        # simulated GPU whose level-2 burn-in read the link under load.
        before = json.loads(self.gpuherd("doctor", "--sim", "1", "--json").stdout)
        self.assertNotIn("under load", {c["id"]: c for c in before["checks"]}["gpu.pcie_link.0"]["current"])
        self.gpuherd("burnin", "--sim", "1", "--level", "2", "--json", check=0)
        after = json.loads(self.gpuherd("doctor", "--sim", "1", "--json").stdout)
        link = {c["id"]: c for c in after["checks"]}["gpu.pcie_link.0"]
        self.assertEqual(link["current"], "gen5 x16 under load")
        self.assertEqual(link["severity"], "ok")


class SlurmTest(GpuherdTestCase):
    def gres_lines(self, text):
        lines = []
        for line in text.splitlines():
            if line and not line.startswith("#") and line.startswith("Name="):
                lines.append(dict(word.split("=", 1) for word in line.split()))
        return lines

    def test_gres_conf_matches_the_simulated_topology(self):
        proc = self.gpuherd("slurm", "gres-conf", "--sim", "8", "--shards", "10", "--node", "n1", check=0)
        gpus = json.loads(self.gpuherd("gpus", "--sim", "8", "--json", check=0).stdout)
        gpu_list = gpus["gpus"] if isinstance(gpus, dict) else gpus
        lines = self.gres_lines(proc.stdout)
        gpu_lines = [l for l in lines if l["Name"] == "gpu"]
        shard_lines = [l for l in lines if l["Name"] == "shard"]
        self.assertEqual(len(gpu_lines), 8)
        self.assertEqual(len(shard_lines), 8)
        cores_by_node = {}
        for i, line in enumerate(gpu_lines):
            self.assertEqual(line["File"], f"/dev/nvidia{i}")
            self.assertEqual(shard_lines[i]["File"], line["File"])
            self.assertEqual(shard_lines[i]["Count"], "10")
            cores_by_node.setdefault(i < 4, set()).add(line["Cores"])
        # Each NUMA node's GPUs share its cores, and the two nodes share none.
        self.assertEqual([len(v) for v in cores_by_node.values()], [1, 1])
        self.assertEqual(len(gpu_list), 8)
        self.assertIn("GresTypes=gpu,shard\n", proc.stdout)
        self.assertIn("NodeName=n1 Gres=gpu:h100_80gb_hbm3:4,gpu:geforce_rtx_3090:4,shard:80", proc.stdout)
        as_json = json.loads(self.gpuherd("slurm", "gres-conf", "--sim", "8", "--json", check=0).stdout)
        self.assertTrue(as_json["simulated"])
        self.assertEqual(len(self.gres_lines(as_json["gres_conf"])), 8)

    def test_slurm_needs_a_subcommand(self):
        self.assertEqual(self.gpuherd("slurm").returncode, 2)


class K8sTest(GpuherdTestCase):
    def test_labels_without_burnin_history_say_unknown(self):
        proc = self.gpuherd("k8s", "labels", "--sim", "4", "--node", "gpu-07", check=0)
        self.assertTrue(proc.stdout.startswith("kubectl label node gpu-07 --overwrite"))
        # A mixed machine (2 H100s, 2 3090s): NVIDIA's labels describe the
        # most common model, gpuherd's give the total and each model.
        self.assertIn("nvidia.com/gpu.count=2", proc.stdout)
        self.assertIn("gpuherd.io/gpu.total=4", proc.stdout)
        self.assertIn("gpuherd.io/health=unknown", proc.stdout)
        self.assertIn("run gpuherd burnin", proc.stderr)

    def test_labels_carry_the_latest_burnin_verdict(self):
        self.gpuherd("burnin", "--sim", "2", "--level", "1", "--json", check=0)
        labels = json.loads(self.gpuherd("k8s", "labels", "--sim", "2", "--json", check=0).stdout)["labels"]
        runs = json.loads(self.gpuherd("health", "--json", check=0).stdout)["runs"]
        verdicts = [run["health"]["verdict"] for run in runs]
        self.assertEqual(len(verdicts), 2)
        self.assertEqual(labels["gpuherd.io/gpu.total"], "2")
        self.assertEqual(labels["gpuherd.io/healthy-gpus"], str(verdicts.count("healthy")))
        rank = ["healthy", "unknown", "degraded", "unhealthy"]
        self.assertEqual(labels["gpuherd.io/health"], max(verdicts, key=rank.index))


if __name__ == "__main__":
    unittest.main()
