#!/usr/bin/env python3
"""README "Quick start for a lab", end to end: `cmake --install` into a temporary
root, the daemon started as root exactly as the installed systemd unit starts
it (its ExecStart, with the root's paths put under the temporary one), and the
lab's users' commands run as `nobody`, without GPUHERD_HOME or --home: they find
the system daemon by themselves, submit, see their job's attempts and their
accounting. The Debian package is built with CPack and its contents checked.

Needs root (the daemon switches to the job's user; setpriv drops to nobody);
exits 77 (skipped) saying so otherwise."""

import json
import os
import pwd
import grp
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

BUILD = os.environ.get("GPUHERD_BUILD_DIR", "")
SKIP = 77


def nobody_ids():
    user = pwd.getpwnam("nobody")
    try:
        group = grp.getgrnam("nogroup").gr_gid
    except KeyError:
        group = user.pw_gid
    return user.pw_uid, group


class LabInstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="gpuherd-lab-")
        # nobody must pass through to the installed programs and the socket.
        os.chmod(cls.root, 0o755)
        env = dict(os.environ, DESTDIR=cls.root)
        subprocess.run(["cmake", "--install", BUILD, "--prefix", "/usr/local"], check=True, env=env,
                       capture_output=True, text=True, timeout=120)
        cls.daemon = None

    @classmethod
    def tearDownClass(cls):
        if cls.daemon and cls.daemon.poll() is None:
            cls.daemon.terminate()
            try:
                cls.daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                cls.daemon.kill()
        shutil.rmtree(cls.root, ignore_errors=True)

    def under_root(self, path):
        return self.root + path

    def unit(self):
        with open(self.under_root("/usr/local/lib/systemd/system/gpuherd.service")) as f:
            lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
        unit = {}
        for line in lines:
            if "=" in line:
                key, value = line.split("=", 1)
                unit.setdefault(key, []).append(value)
        return unit

    def as_nobody(self, *args, check=True, timeout=30):
        uid, gid = nobody_ids()
        # A user's login environment: no GPUHERD_HOME, a home with no daemon of its own.
        env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "NO_COLOR": "1",
               "GPUHERD_SYSTEM_ROOT": self.root}
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--",
               self.under_root("/usr/local/bin/gpuherd"), *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd="/")
        if check and proc.returncode != 0:
            raise AssertionError(f"{args} as nobody exited {proc.returncode}: {proc.stdout}{proc.stderr}")
        return proc

    def start_daemon_as_the_unit_does(self):
        unit = self.unit()
        # What systemd makes before ExecStart: StateDirectory and RuntimeDirectory with their modes.
        state = self.under_root("/var/lib/" + unit["StateDirectory"][0])
        runtime = self.under_root("/run/" + unit["RuntimeDirectory"][0])
        os.makedirs(state, exist_ok=True)
        os.chmod(state, int(unit["StateDirectoryMode"][0], 8))
        os.makedirs(runtime, exist_ok=True)
        os.chmod(runtime, int(unit["RuntimeDirectoryMode"][0], 8))
        argv = shlex.split(unit["ExecStart"][0])
        argv[0] = self.under_root(argv[0])
        for i, arg in enumerate(argv):
            if i > 0 and argv[i - 1] in ("--home", "--socket"):
                argv[i] = self.under_root(arg)
        # No GPU here: a simulated fleet, said so in every view; any free TCP port.
        argv += ["--sim", "2", "--port", "0", "--interval", "200ms"]
        with open(os.path.join(self.root, "daemon.out"), "w") as log:
            type(self).daemon = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if os.path.exists(self.under_root("/run/gpuherd/gpuherd.sock")):
                return argv
            if self.daemon.poll() is not None:
                raise AssertionError("daemon exited: " + open(os.path.join(self.root, "daemon.out")).read())
            time.sleep(0.1)
        raise AssertionError("the daemon made no socket within 30 s")

    def test_a_user_reaches_the_system_daemon_without_settings(self):
        unit = self.unit()
        # The unit leaves the socket reachable: no 0700 state directory, an open runtime folder.
        self.assertNotEqual(unit["StateDirectoryMode"][0], "0700")
        self.assertEqual(unit["RuntimeDirectoryMode"][0], "0755")
        self.assertIn("--socket /run/gpuherd/gpuherd.sock", unit["ExecStart"][0])
        self.assertTrue(unit["ExecStart"][0].startswith("/usr/local/bin/gpuherd-daemon "))
        for program in ("gpuherd", "gpuherd-daemon", "gpuherd-shim", "libgpuherd-fence.so"):
            self.assertTrue(os.path.exists(self.under_root("/usr/local/lib/gpuherd/" + program)), program)
        self.assertTrue(os.path.islink(self.under_root("/usr/local/bin/gpuherd")))
        self.assertTrue(os.path.exists(self.under_root("/usr/local/share/doc/gpuherd/README.md")))
        # The README is a map: the topics it links to are installed beside it.
        self.assertTrue(os.path.exists(self.under_root("/usr/local/share/doc/gpuherd/docs/security.md")))

        # Before the daemon runs, a user is told that nothing answers.
        down = self.as_nobody("status", check=False)
        self.assertEqual(down.returncode, 3, down.stdout + down.stderr)

        self.start_daemon_as_the_unit_does()
        socket = self.under_root("/run/gpuherd/gpuherd.sock")
        self.assertEqual(os.stat(socket).st_mode & 0o777, 0o666)
        # The home's socket links to it, so `gpuherd --home ... stop` (ExecStop) finds it.
        self.assertEqual(os.readlink(self.under_root("/var/lib/gpuherd/gpuherd.sock")), socket)

        status = self.as_nobody("status")
        self.assertIn("system daemon", status.stdout)
        self.assertIn(socket, status.stdout)
        health = json.loads(self.as_nobody("status", "--json").stdout)
        self.assertEqual(health["found_by"], "system")
        self.assertEqual(health["socket"], socket)

        job = int(self.as_nobody("submit", "--name", "hello", "--", "/bin/sh", "-c",
                                 "id -un; echo hi; sleep 1").stdout.strip())
        deadline = time.time() + 60
        while True:
            shown = json.loads(self.as_nobody("show", str(job), "--json").stdout)
            if shown["state"] in ("completed", "failed", "cancelled"):
                break
            self.assertLess(time.time(), deadline, f"job {job} still {shown['state']}")
            time.sleep(0.2)
        self.assertEqual(shown["state"], "completed", shown)
        self.assertEqual(shown["user"], "nobody")
        self.assertEqual(shown["spec"]["command"], ["/bin/sh", "-c", "id -un; echo hi; sleep 1"])
        self.assertEqual(len(shown["attempts"]), 1, shown)
        attempt = shown["attempts"][0]
        self.assertEqual(attempt["end_cause"], "completed")
        self.assertEqual(attempt["exit_code"], 0)
        self.assertGreaterEqual(attempt["ended"] - attempt["started"], 1000)
        self.assertEqual(self.as_nobody("logs", str(job)).stdout, "nobody\nhi\n")
        text = self.as_nobody("show", str(job)).stdout
        self.assertIn("attempts", text)
        self.assertIn("completed", text)

        acct = json.loads(self.as_nobody("acct", "--json").stdout)
        self.assertEqual([j["id"] for j in acct["jobs"]], [job])
        self.assertEqual(acct["users"][0]["user"], "nobody")
        self.assertEqual(acct["jobs"][0]["attempts"], 1)
        csv = self.as_nobody("acct", "--format", "csv").stdout.splitlines()
        self.assertTrue(csv[0].startswith("id,name,user,state,"))
        self.assertTrue(csv[1].startswith(f"{job},hello,nobody,completed,"), csv)

        # nobody may not stop the lab's daemon; root stops it as the unit's ExecStop does.
        refused = self.as_nobody("stop", check=False)
        self.assertNotEqual(refused.returncode, 0)
        stop = shlex.split(unit["ExecStop"][0])
        stop[0] = self.under_root(stop[0])
        stop[stop.index("--home") + 1] = self.under_root(stop[stop.index("--home") + 1])
        subprocess.run(stop, check=True, capture_output=True, timeout=60)
        self.assertEqual(self.daemon.wait(timeout=30), 0)

    def test_the_debian_package_holds_programs_unit_and_docs(self):
        out = tempfile.mkdtemp(prefix="gpuherd-deb-")
        try:
            started = time.time()
            subprocess.run(["cpack", "-G", "DEB", "-B", out, "--config", os.path.join(BUILD, "CPackConfig.cmake")],
                           check=True, capture_output=True, text=True, timeout=300, cwd=BUILD)
            took = time.time() - started
            debs = [f for f in os.listdir(out) if f.endswith(".deb")]
            self.assertEqual(len(debs), 1, os.listdir(out))
            deb = os.path.join(out, debs[0])
            files = subprocess.run(["dpkg-deb", "-c", deb], check=True, capture_output=True, text=True).stdout
            for path in ("./usr/bin/gpuherd -> ../lib/gpuherd/gpuherd", "./usr/lib/gpuherd/gpuherd-daemon",
                         "./usr/lib/gpuherd/gpuherd-shim", "./usr/lib/gpuherd/libgpuherd-fence.so",
                         "./usr/lib/systemd/system/gpuherd.service", "./usr/share/doc/gpuherd/README.md"):
                self.assertIn(path, files)
            control = subprocess.run(["dpkg-deb", "-f", deb, "Package", "Depends"], check=True,
                                     capture_output=True, text=True).stdout
            self.assertIn("Package: gpuherd", control)
            self.assertIn("libsqlite3", control)
            extracted = tempfile.mkdtemp(prefix="gpuherd-deb-x-")
            subprocess.run(["dpkg-deb", "-x", deb, extracted], check=True)
            with open(os.path.join(extracted, "usr/lib/systemd/system/gpuherd.service")) as f:
                text = f.read()
            shutil.rmtree(extracted, ignore_errors=True)
            self.assertIn("ExecStart=/usr/bin/gpuherd-daemon daemon --home /var/lib/gpuherd", text)
            settings = [line for line in text.splitlines() if not line.startswith("#")]
            self.assertFalse([line for line in settings if "/usr/local" in line], settings)
            print(f"cpack -G DEB took {took:.1f} s", file=sys.stderr)
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("skipped: the lab install test needs root (the daemon runs jobs as their users, "
              "and the client runs as nobody through setpriv)")
        sys.exit(SKIP)
    if not BUILD:
        print("GPUHERD_BUILD_DIR must name the build folder")
        sys.exit(1)
    unittest.main()
